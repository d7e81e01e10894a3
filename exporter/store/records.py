"""The rows of verdicts (or of a judge's answer) as one durable-queue record, and a batch of records as each
table's insert body.

Record format, version 2 (what `encode` writes, for one verdict or a batch of them): a version byte (2), the byte
length of each table's part (uint32, little-endian, in `ORDER`), then the parts. A part is the table's rows as
JSONCompactEachRow lines, in the table's column order. Times are JSON numbers, seconds since the epoch with nine
decimals: ClickHouse reads them into DateTime64(9) exactly (a JSON integer is out of range for it, and a quoted
number is ambiguous), and they cost a fraction of an RFC 3339 text to write. So a batch becomes an insert body by
slicing and joining, with no work per row.

Version 1 (written before): a `table<TAB>JSON array` line per row, times as RFC 3339 text. Records of
version 1 still queued when mastwatch is upgraded are converted when they are read.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Final

import orjson

from mastwatch.collector.classify.modes import MODES
from mastwatch.collector.judge.stage import Judgement
from mastwatch.collector.verdict import Verdict, rfc3339_ns

from . import _times
from .queue import Batch
from .schema import FINDINGS, JUDGEMENTS, REPEATED_STEPS, TABLES, TRACES

ORDER = (TRACES, FINDINGS, REPEATED_STEPS, JUDGEMENTS)  # a new table needs a new version of the format
VERSION: Final = 2
# Final: compiled code reads them from C statics, not from the module's dict on every verdict
_HEADER: Final = struct.Struct("<B4I")
_LINE: Final = orjson.OPT_APPEND_NEWLINE
_dumps: Final = orjson.dumps
_Fragment: Final = orjson.Fragment
_seconds_text: Final = _times.seconds_text
_TIMES = {name: [i for i, c in enumerate(t.columns) if c.type_name.startswith("DateTime64(9")]
          for name, t in TABLES.items()}


def seconds(ns: int) -> orjson.Fragment:
    """A time as a JSON number: seconds since the epoch, nanoseconds exact (written in C, see _times.c)."""
    text = _seconds_text(ns)
    return _Fragment(text if text is not None else seconds_text(ns))


def seconds_text(ns: int) -> str:
    """The text of `seconds` (what _times.c writes for 0 <= ns < 2**64)."""
    fraction = ns % 1_000_000_000
    return f"{ns // 1_000_000_000}.{str(fraction + 1_000_000_000)[1:]}"


def nanoseconds(text: str) -> int:
    """The inverse of `seconds` (the number's text): nanoseconds since the epoch."""
    whole, _, fraction = text.partition(".")
    return int(whole) * 1_000_000_000 + int(fraction.ljust(9, "0"))


def trace_row(v: Verdict, started: orjson.Fragment) -> list[Any]:
    """A mast_traces row, in column order."""
    waste = v.waste
    wasted_input = wasted_output = 0
    for (_, kind), n in waste.tokens.items():
        if kind == "output":
            wasted_output += n
        else:  # input, cache_read, cache_write
            wasted_input += n
    return [v.trace_id, v.service, v.agent, v.models, started, seconds(v.ended_at_ns), v.completion, v.steps,
            v.llm_calls, v.tool_calls, v.input_tokens, v.output_tokens, v.cost_usd, sorted(v.findings),
            waste.repeated_steps, wasted_input, wasted_output, v.wasted_cost_usd]


def finding_rows(v: Verdict | Judgement, started: orjson.Fragment) -> list[list[Any]]:
    """mast_findings rows, in column order."""
    rows = []
    for code, f in sorted(v.findings.items()):
        mode = MODES[code]
        rows.append([v.trace_id, v.service, v.agent, started, code, mode.category, mode.name, f.confidence,
                     f.basis, [e.hex() for e in f.evidence], f.reason])
    return rows


def repeated_step_rows(v: Verdict) -> list[list[Any]]:
    """mast_repeated_steps rows, in column order."""
    rows = []
    for r in v.waste.steps:
        step = r.step
        tokens = r.tokens  # as Step.tokens_by_type: input (uncached), output, cache_read, cache_write
        rows.append([v.trace_id, step.span_id.hex(), v.service, v.agent, r.code, r.tool,
                     step.args.fingerprint if step.args is not None else 0, r.model or "", tokens[0][1],
                     tokens[1][1], tokens[2][1], tokens[3][1], r.cost_usd, seconds(step.start_ns)])
    return rows


def judgement_rows(j: Judgement, started: orjson.Fragment, judged_at: float) -> list[list[Any]]:
    """mast_judgements rows, in column order: one per mode assessed."""
    judged = seconds(int(judged_at * 1e9))
    return [[j.trace_id, j.service, j.agent, started, judged, j.model, code, MODES[code].category, j.verdict(code),
             j.structural.get(code), a.confidence, list(a.evidence), a.reason]
            for code, a in sorted(j.assessments.items())]


def _lines(rows: list[list[Any]]) -> bytes:
    return b"".join([_dumps(row, None, _LINE) for row in rows])  # arguments by position: no keywords to parse


def encode(verdicts: list[Verdict]) -> tuple[int, bytes]:
    """The rows of verdicts (a batch the processor completed) as one queue record: (rows, payload). Each table's
    rows are encoded for the whole batch in turn: one piece of code at a time stays in the instruction cache."""
    started = [seconds(v.started_at_ns) for v in verdicts]
    traces = b"".join([_dumps(trace_row(v, started[i]), None, _LINE) for i, v in enumerate(verdicts)])
    rows = len(verdicts)
    finding_lines: list[bytes] = []
    step_lines: list[bytes] = []
    for i, v in enumerate(verdicts):
        if v.findings:
            finding_lines.append(_lines(finding_rows(v, started[i])))
            rows += len(v.findings)
    for v in verdicts:
        if v.waste.steps:
            step_lines.append(_lines(repeated_step_rows(v)))
            rows += len(v.waste.steps)
    findings, steps = b"".join(finding_lines), b"".join(step_lines)
    return rows, b"".join((_HEADER.pack(VERSION, len(traces), len(findings), len(steps), 0), traces, findings, steps))


def encode_judgement(j: Judgement, judged_at: float) -> tuple[int, bytes]:
    """The judge's positive answers as mast_findings rows (basis judge), every answer as a mast_judgements row."""
    started = seconds(j.started_at_ns)
    found, assessed = finding_rows(j, started), judgement_rows(j, started, judged_at)
    findings, judgements = _lines(found), _lines(assessed)
    header = _HEADER.pack(VERSION, 0, len(findings), 0, len(judgements))
    return len(found) + len(assessed), header + findings + judgements


def decode(batch: Batch) -> dict[str, bytes]:
    """Each table's insert body (JSONCompactEachRow lines) for a batch; rows = lines."""
    traces: list[bytes] = []
    findings: list[bytes] = []
    steps: list[bytes] = []
    judgements: list[bytes] = []
    unpack = _HEADER.unpack_from
    for payload in batch.payloads:  # unrolled: this loop runs once per record
        if payload[:1] == b"\x02":
            _, a, b, c, d = unpack(payload)
            start = _HEADER.size + a
            if a:
                traces.append(payload[_HEADER.size:start])
            if b:
                findings.append(payload[start:start + b])
            if c or d:
                start += b
                steps.append(payload[start:start + c])
                judgements.append(payload[start + c:start + c + d])
        elif payload:
            _upgrade(payload, (traces, findings, steps, judgements))
    return {TRACES: b"".join(traces), FINDINGS: b"".join(findings), REPEATED_STEPS: b"".join(steps),
            JUDGEMENTS: b"".join(judgements)}


def _upgrade(payload: bytes, parts: tuple[list[bytes], ...]) -> None:
    """A record of version 1, its rows added to `parts` as version 2 writes them."""
    for line in payload.splitlines():
        table, _, text = line.partition(b"\t")
        name = table.decode()
        row = json.loads(text)
        for i in _TIMES[name]:
            row[i] = seconds(rfc3339_ns(row[i]))
        parts[ORDER.index(name)].append(_dumps(row, option=_LINE))
