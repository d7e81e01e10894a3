"""The rows of verdicts (or of a judge's answer) as one durable-queue record, and a batch of records as each
table's insert body.

Record format, version 3 (what `encode` writes, for one verdict or a batch of them): a version byte (3), the byte
length of each table's part (uint32, little-endian, in `ORDER`), then the parts. A part is the table's rows as one
ClickHouse Native block (_native.c): columnar, times as DateTime64(9) ticks, nanoseconds exact. ClickHouse parses
Native several times faster than JSON but pays a fixed cost per block, so `decode` merges a batch's blocks into one
per table: a copy of each column's bytes, no work per value.

Versions 1 and 2 (written before): version 1 a `table<TAB>JSON array` line per row, times as RFC 3339 text;
version 2 the same header as version 3 with JSONCompactEachRow parts, times as JSON numbers of seconds with nine
decimals. Records of either still queued when mastwatch is upgraded are converted when they are read.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Final

from mastwatch.collector.classify.modes import MODES
from mastwatch.collector.judge.stage import Judgement
from mastwatch.collector.verdict import Verdict, rfc3339_ns

from . import _native
from .queue import Batch
from .schema import FINDINGS, JUDGEMENTS, REPEATED_STEPS, TABLES, TRACES, Column

ORDER = (TRACES, FINDINGS, REPEATED_STEPS, JUDGEMENTS)  # a new table needs a new version of the format
VERSION: Final = 3
# Final: compiled code reads them from C statics, not from the module's dict on every verdict
_HEADER: Final = struct.Struct("<B4I")
_encode: Final = _native.encode
_merge: Final = _native.merge
# How _native.c writes each column type's values (its kinds), and the type a block declares: ClickHouse converts
# String to LowCardinality(String) on insert (writing the dictionary encoding here would gain nothing).
_KINDS: Final = {"String": 0, "LowCardinality(String)": 0, "Array(String)": 1, "Array(LowCardinality(String))": 1,
                 "DateTime64(9, 'UTC')": 2, "UInt32": 3, "UInt64": 4, "Float32": 5, "Float64": 6,
                 "Nullable(Float32)": 7}
_BLOCK_TYPES: Final = {0: "String", 1: "Array(String)"}


def native_string(text: str) -> bytes:
    """`text` as Native writes a String: its UTF-8 length as a varint, then its bytes."""
    data = text.encode()
    length = bytearray()
    n = len(data)
    while n >= 0x80:
        length.append(n & 0x7F | 0x80)
        n >>= 7
    length.append(n)
    return bytes(length) + data


def _columns(columns: tuple[Column, ...]) -> tuple[tuple[bytes, int], ...]:
    """A table's columns as _native.c takes them: name and type as Native strings, and the kind of values."""
    kinds = [_KINDS[c.type_name] for c in columns]  # a KeyError here: a column type _native.c does not write yet
    return tuple((native_string(c.name) + native_string(_BLOCK_TYPES.get(kind, c.type_name)), kind)
                 for c, kind in zip(columns, kinds, strict=True))


COLUMNS: Final = {name: _columns(TABLES[name].columns) for name in ORDER}
_TRACE_COLUMNS: Final = COLUMNS[TRACES]
_FINDING_COLUMNS: Final = COLUMNS[FINDINGS]
_STEP_COLUMNS: Final = COLUMNS[REPEATED_STEPS]
_JUDGEMENT_COLUMNS: Final = COLUMNS[JUDGEMENTS]
_TIMES = {name: [i for i, c in enumerate(t.columns) if c.type_name.startswith("DateTime64(9")]
          for name, t in TABLES.items()}
_FLOATS = {name: [i for i, c in enumerate(t.columns) if "Float" in c.type_name] for name, t in TABLES.items()}


def nanoseconds(text: str) -> int:
    """Nanoseconds since the epoch from a time as version 2 wrote it: seconds with nine decimals, as JSON text."""
    whole, _, fraction = text.partition(".")
    return int(whole) * 1_000_000_000 + int(fraction.ljust(9, "0"))


def trace_row(v: Verdict) -> list[Any]:
    """A mast_traces row, in column order."""
    waste = v.waste
    wasted_input = wasted_output = 0
    for (_, kind), n in waste.tokens.items():
        if kind == "output":
            wasted_output += n
        else:  # input, cache_read, cache_write
            wasted_input += n
    return [v.trace_id, v.service, v.agent, v.models, v.started_at_ns, v.ended_at_ns, v.completion, v.steps,
            v.llm_calls, v.tool_calls, v.input_tokens, v.output_tokens, v.cost_usd, sorted(v.findings),
            waste.repeated_steps, wasted_input, wasted_output, v.wasted_cost_usd]


def finding_rows(v: Verdict | Judgement, rows: list[list[Any]]) -> None:
    """mast_findings rows, in column order, added to `rows`."""
    for code, f in sorted(v.findings.items()):
        mode = MODES[code]
        rows.append([v.trace_id, v.service, v.agent, v.started_at_ns, code, mode.category, mode.name, f.confidence,
                     f.basis, [e.hex() for e in f.evidence], f.reason])


def repeated_step_rows(v: Verdict, rows: list[list[Any]]) -> None:
    """mast_repeated_steps rows, in column order, added to `rows`."""
    for r in v.waste.steps:
        step = r.step
        tokens = r.tokens  # as Step.tokens_by_type: input (uncached), output, cache_read, cache_write
        rows.append([v.trace_id, step.span_id.hex(), v.service, v.agent, r.code, r.tool,
                     step.args.fingerprint if step.args is not None else 0, r.model or "", tokens[0][1],
                     tokens[1][1], tokens[2][1], tokens[3][1], r.cost_usd, step.start_ns])


def judgement_rows(j: Judgement, judged_at: float) -> list[list[Any]]:
    """mast_judgements rows, in column order: one per mode assessed."""
    judged = int(judged_at * 1e9)
    return [[j.trace_id, j.service, j.agent, j.started_at_ns, judged, j.model, code, MODES[code].category,
             j.verdict(code), j.structural.get(code), a.confidence, list(a.evidence), a.reason]
            for code, a in sorted(j.assessments.items())]


def encode(verdicts: list[Verdict]) -> tuple[int, bytes]:
    """The rows of verdicts (a batch the processor completed) as one queue record: (rows, payload), each table's
    rows one block."""
    traces = _encode(_TRACE_COLUMNS, [trace_row(v) for v in verdicts])
    found: list[list[Any]] = []
    repeated: list[list[Any]] = []
    for v in verdicts:
        if v.findings:
            finding_rows(v, found)
        if v.waste.steps:
            repeated_step_rows(v, repeated)
    findings, steps = _encode(_FINDING_COLUMNS, found), _encode(_STEP_COLUMNS, repeated)
    return (len(verdicts) + len(found) + len(repeated),
            b"".join((_HEADER.pack(VERSION, len(traces), len(findings), len(steps), 0), traces, findings, steps)))


def encode_judgement(j: Judgement, judged_at: float) -> tuple[int, bytes]:
    """The judge's positive answers as mast_findings rows (basis judge), every answer as a mast_judgements row."""
    found: list[list[Any]] = []
    finding_rows(j, found)
    assessed = judgement_rows(j, judged_at)
    findings, judgements = _encode(_FINDING_COLUMNS, found), _encode(_JUDGEMENT_COLUMNS, assessed)
    header = _HEADER.pack(VERSION, 0, len(findings), 0, len(judgements))
    return len(found) + len(assessed), header + findings + judgements


def decode(batch: Batch) -> dict[str, bytes]:
    """Each table's insert body for a batch: one Native block of its rows (b"" for none)."""
    parts: tuple[list[bytes], ...] = ([], [], [], [])
    unpack = _HEADER.unpack_from
    for payload in batch.payloads:
        version = payload[:1]
        if version == b"\x03" or version == b"\x02":
            start = _HEADER.size
            for i, size in enumerate(unpack(payload)[1:]):
                if size:
                    part = payload[start:start + size]
                    parts[i].append(part if version == b"\x03" else _version_2(ORDER[i], part))
                start += size
        elif payload:
            _version_1(payload, parts)
    return {name: _merge(COLUMNS[name], blocks) for name, blocks in zip(ORDER, parts, strict=True)}


def block_rows(block: bytes) -> int:
    """The rows of a Native block (its second varint)."""
    at = 0
    while block[at] & 0x80:  # the columns' count
        at += 1
    rows, shift = 0, 0
    for byte in block[at + 1:at + 11]:
        rows |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return rows


def _version_2(table: str, lines: bytes) -> bytes:
    """A version 2 part (JSONCompactEachRow lines) as a Native block."""
    rows = []
    for line in lines.splitlines():
        row = json.loads(line, parse_float=str)  # times exact: their text, not a float
        for i in _TIMES[table]:
            row[i] = nanoseconds(str(row[i]))
        for i in _FLOATS[table]:
            if row[i] is not None:
                row[i] = float(row[i])
        rows.append(row)
    return _encode(COLUMNS[table], rows)


def _version_1(payload: bytes, parts: tuple[list[bytes], ...]) -> None:
    """A record of version 1, each of its rows added to `parts` as a Native block."""
    for line in payload.splitlines():
        table, _, text = line.partition(b"\t")
        name = table.decode()
        row = json.loads(text)
        for i in _TIMES[name]:
            row[i] = rfc3339_ns(row[i])
        parts[ORDER.index(name)].append(_encode(COLUMNS[name], [row]))
