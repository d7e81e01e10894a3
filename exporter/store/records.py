"""The rows of verdicts (or of a judge's answer) as one durable-queue record, and a batch of records as each
table's insert body.

Record format, version 8 (what `encode` writes, for one verdict or a batch of them): a version byte (8), the byte
length of each table's part (uint32, little-endian, in `ORDER`), then the parts. A part is the table's rows as one
ClickHouse Native block (_native.c): columnar, times as DateTime64(9) ticks, nanoseconds exact. ClickHouse parses
Native several times faster than JSON but pays a fixed cost per block, so `decode` merges a batch's blocks into one
per table: a copy of each column's bytes, no work per value.

Written before: version 7 the same with mast_traces and mast_findings blocks of fewer columns (before runs' version
and environment); version 6 with blocks of fewer columns still in mast_traces, and in mast_findings and
mast_repeated_steps (before the time of repeated steps); version 5 as version 6 without the model spend's part (five
lengths); version 4 without the steps' part either (four lengths); version 3 as version 4 with mast_findings blocks
of fewer columns still (before failure signatures); version 1 a `table<TAB>JSON array` line per row,
times as RFC 3339 text; version 2 the header of version 3 with JSONCompactEachRow parts, times as JSON numbers of
seconds with nine decimals. Records of any of them still queued when mastwatch is upgraded are converted when they
are read.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any, Final

from mastwatch.collector.model.judgement import Judgement
from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.steps import LLM
from mastwatch.collector.model.verdict import Verdict, rfc3339_ns
from mastwatch.collector.signature import finding_signature
from mastwatch.collector.spend import price

from .queue import Batch
from .schema import (
    FINDINGS,
    FINDINGS_V4_WIDTH,
    JUDGEMENTS,
    MODEL_SPEND,
    RELEASE_COLUMNS,
    REPEATED_STEPS,
    STEPS,
    TABLES,
    TRACES,
    WASTED_TIME_COLUMNS,
    Column,
)

try:
    from . import _native
except ImportError:  # built without a C compiler: the same blocks written in Python
    from . import _native_py as _native  # type: ignore[no-redef]

ORDER = (TRACES, FINDINGS, REPEATED_STEPS, JUDGEMENTS, STEPS, MODEL_SPEND)  # a new table: a new version of the format
VERSION: Final = 8
# Which runs' steps are written (exporters.store.steps)
STEPS_OF_FINDINGS: Final = "findings"
STEPS_OF_ALL: Final = "all"
NO_STEPS: Final = "off"
# Final: compiled code reads them from C statics, not from the module's dict on every verdict
_HEADER: Final = struct.Struct("<B6I")
_HEADER_V5: Final = struct.Struct("<B5I")  # version 5: no model spend's part
_HEADER_V4: Final = struct.Struct("<B4I")  # versions 2 to 4: no steps' part either
# The columns of the tables whose blocks had fewer in records of older versions (a table's columns are only ever
# appended to): before version 8 runs had no version and environment, before version 7 none had the time of repeated
# steps, before version 4 findings had no signatures.
WIDTHS_V7: Final = {table: TABLES[table].column_names.index(names[0]) for table, names in RELEASE_COLUMNS.items()}
WIDTHS_V6: Final = {table: TABLES[table].column_names.index(name) for table, name in WASTED_TIME_COLUMNS.items()}
WIDTHS_V3: Final = {**WIDTHS_V6, FINDINGS: FINDINGS_V4_WIDTH}
_NO_WIDTHS: Final[dict[str, int]] = {}  # version 8: every block has every column
_encode: Final = _native.encode
_merge: Final = _native.merge
# How _native.c writes each column type's values (its kinds), and the type a block declares: ClickHouse converts
# String to LowCardinality(String) on insert (writing the dictionary encoding here would gain nothing).
_KINDS: Final = {"String": _native.STRING, "LowCardinality(String)": _native.STRING,
                 "Array(String)": _native.ARRAY_STRING, "Array(LowCardinality(String))": _native.ARRAY_STRING,
                 "DateTime64(9, 'UTC')": _native.INT64, "UInt32": _native.UINT32, "UInt64": _native.UINT64,
                 "Float32": _native.FLOAT32, "Float64": _native.FLOAT64, "Nullable(Float32)": _native.NULLABLE_FLOAT32,
                 "Bool": _native.BOOL}
_BLOCK_TYPES: Final = {_native.STRING: "String", _native.ARRAY_STRING: "Array(String)"}
block_rows: Final = _native.rows  # the rows of a Native block


def _columns(columns: tuple[Column, ...]) -> tuple[tuple[bytes, int], ...]:
    """A table's columns as _native.c takes them: name and type as Native strings, and the kind of values."""
    kinds = [_KINDS[c.type_name] for c in columns]  # a KeyError here: a column type _native.c does not write yet
    return tuple((_native.string(c.name) + _native.string(_BLOCK_TYPES.get(kind, c.type_name)), kind)
                 for c, kind in zip(columns, kinds, strict=True))


COLUMNS: Final = {name: _columns(TABLES[name].columns) for name in ORDER}
_TRACE_COLUMNS: Final = COLUMNS[TRACES]
_FINDING_COLUMNS: Final = COLUMNS[FINDINGS]
_STEP_COLUMNS: Final = COLUMNS[REPEATED_STEPS]
_JUDGEMENT_COLUMNS: Final = COLUMNS[JUDGEMENTS]
_RUN_STEP_COLUMNS: Final = COLUMNS[STEPS]
_MODEL_SPEND_COLUMNS: Final = COLUMNS[MODEL_SPEND]
_KIND_NAMES: Final = ("", "llm", "tool", "agent", "other")  # by StepKind
_TIMES = {name: [i for i, c in enumerate(t.columns) if c.type_name.startswith("DateTime64(9")]
          for name, t in TABLES.items()}
_FLOATS = {name: [i for i, c in enumerate(t.columns) if "Float" in c.type_name] for name, t in TABLES.items()}


def _default(column: Column) -> Any:
    """What ClickHouse fills an omitted column with."""
    kind = column.type_name
    return [] if kind.startswith("Array(") else "" if "String" in kind else None if kind.startswith("Nullable(") else 0


_DEFAULTS: dict[str, list[Any]] = {name: [_default(c) for c in t.columns] for name, t in TABLES.items()}


def nanoseconds(seconds: str | int) -> int:
    """Nanoseconds since the epoch from a time as version 2 wrote it: seconds with nine decimals, as JSON text (an
    int when it has no fraction)."""
    whole, _, fraction = str(seconds).partition(".")
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
            waste.repeated_steps, wasted_input, wasted_output, v.wasted_cost_usd, waste.seconds_total, v.version,
            v.environment]


Quotes = Callable[[str], str] | None  # what a finding's quote is stored as (content storage opted in), or None


def finding_rows(v: Verdict | Judgement, rows: list[list[Any]], quotes: Quotes = None) -> None:
    """mast_findings rows, in column order, added to `rows`. A finding's quote (captured content) is added to its
    reason only through `quotes` (content storage opted in, its redaction applied)."""
    models = v.models if isinstance(v, Verdict) else []
    for code, f in sorted(v.findings.items()):
        mode = MODES[code]
        reason = f.reason if quotes is None or not f.quote else f"{f.reason}: {quotes(f.quote)}"
        grouped = finding_signature(v.agent, code, f)
        wasted = seconds = 0.0
        if isinstance(v, Verdict):
            for r in v.waste.steps:
                if r.code == code:
                    wasted += r.cost_usd
                    seconds += r.seconds
        rows.append([v.trace_id, v.service, v.agent, v.started_at_ns, code, mode.category, mode.name, f.confidence,
                     f.basis, [e.hex() for e in f.evidence], reason, grouped, models, wasted, seconds,
                     v.version if isinstance(v, Verdict) else ""])


def repeated_step_rows(v: Verdict, rows: list[list[Any]]) -> None:
    """mast_repeated_steps rows, in column order, added to `rows`."""
    for r in v.waste.steps:
        step = r.step
        tokens = r.tokens  # as Step.tokens_by_type: input (uncached), output, cache_read, cache_write
        rows.append([v.trace_id, step.span_id.hex(), v.service, v.agent, r.code, r.tool,
                     step.args.fingerprint if step.args is not None else 0, r.model or "", tokens[0][1],
                     tokens[1][1], tokens[2][1], tokens[3][1], r.cost_usd, step.start_ns, r.seconds])


def step_rows(v: Verdict, rows: list[list[Any]], quotes: Quotes = None) -> None:
    """mast_steps rows, in column order, added to `rows`: one per step of the run. A model call's cost is its price
    as the verdict's (its model's rates, 0 when the model has none). The previews of a tool's arguments and result
    (a model call's output) are captured content: stored only through `quotes` (content storage opted in)."""
    trace_id = v.trace_id
    for step in v.trace_steps:
        cost = 0.0
        result: str | None = None
        if step.kind is LLM:
            cost = price(step.model, step.provider, [step]) or 0.0
            result = step.output_preview
        elif step.result is not None:
            result = step.result.preview
        args = step.args
        rows.append([trace_id, step.span_id.hex(), step.parent_span_id.hex(), _KIND_NAMES[step.kind], step.name,
                     step.service, step.agent or "", step.model or "", step.tool or "", step.start_ns, step.end_ns,
                     step.error, step.error_type or "", step.input_tokens, step.output_tokens, step.cache_read_tokens,
                     step.cache_write_tokens, cost, args.fingerprint if args is not None else 0,
                     _quoted(args.preview if args is not None else None, quotes), _quoted(result, quotes)])


def model_spend_rows(v: Verdict, rows: list[list[Any]]) -> None:
    """mast_model_spend rows, in column order, added to `rows`: one per model the run called, as the verdict's
    tokens and cost name it."""
    calls = v.model_calls
    for model in v.models:  # a verdict not made by the processor may lack call counts: its tokens still count
        if model not in calls:
            calls = {**calls, model: (0, 0.0)}
    tokens, waste = v.tokens, v.waste
    wasted = waste.tokens
    repeated: dict[str, int] = {}
    for r in waste.steps:
        if r.model is not None:
            repeated[r.model] = repeated.get(r.model, 0) + 1
    for model, (n, seconds) in calls.items():
        cost = v.cost.get(model)
        rows.append([v.trace_id, v.service, v.agent, model, v.started_at_ns, n, seconds,
                     tokens.get((model, "input"), 0), tokens.get((model, "output"), 0),
                     tokens.get((model, "cache_read"), 0), tokens.get((model, "cache_write"), 0),
                     cost if cost is not None else 0.0, cost is not None, repeated.get(model, 0),
                     wasted.get((model, "input"), 0) + wasted.get((model, "cache_read"), 0)
                     + wasted.get((model, "cache_write"), 0), wasted.get((model, "output"), 0),
                     waste.cost.get(model, 0.0)])


def _quoted(text: str | None, quotes: Quotes) -> str:
    return quotes(text) if quotes is not None and text else ""


def _with_steps(v: Verdict, steps: str) -> bool:
    """Whether the run's steps are written (`steps`: exporters.store.steps)."""
    if steps == STEPS_OF_FINDINGS:
        return bool(v.findings)
    return steps == STEPS_OF_ALL


def judgement_rows(j: Judgement, judged_at: float, quotes: Quotes = None) -> list[list[Any]]:
    """mast_judgements rows, in column order: one per mode assessed. The judge's reasons read the content: stored
    only through `quotes`."""
    judged = int(judged_at * 1e9)
    return [[j.trace_id, j.service, j.agent, j.started_at_ns, judged, j.model, code, MODES[code].category,
             j.verdict(code), j.structural.get(code), a.confidence, list(a.evidence),
             quotes(a.reason) if quotes is not None and a.reason else ""]
            for code, a in sorted(j.assessments.items())]


def encode(verdicts: list[Verdict], quotes: Quotes = None, steps: str = STEPS_OF_FINDINGS) -> tuple[int, bytes]:
    """The rows of verdicts (a batch the processor completed) as one queue record: (rows, payload), each table's
    rows one block. `steps`: whose steps get mast_steps rows (those with findings, all, or off)."""
    traces = _encode(_TRACE_COLUMNS, [trace_row(v) for v in verdicts])
    found: list[list[Any]] = []
    repeated: list[list[Any]] = []
    run_steps: list[list[Any]] = []
    spend: list[list[Any]] = []
    for v in verdicts:
        if v.llm_calls or v.models:
            model_spend_rows(v, spend)
        if v.findings:
            finding_rows(v, found, quotes)
        if v.waste.steps:
            repeated_step_rows(v, repeated)
        if v.trace_steps and _with_steps(v, steps):
            step_rows(v, run_steps, quotes)
    findings, repeats = _encode(_FINDING_COLUMNS, found), _encode(_STEP_COLUMNS, repeated)
    stepped, spent = _encode(_RUN_STEP_COLUMNS, run_steps), _encode(_MODEL_SPEND_COLUMNS, spend)
    return (len(verdicts) + len(found) + len(repeated) + len(run_steps) + len(spend),
            b"".join((_HEADER.pack(VERSION, len(traces), len(findings), len(repeats), 0, len(stepped), len(spent)),
                      traces, findings, repeats, stepped, spent)))


def encode_judgement(j: Judgement, judged_at: float, quotes: Quotes = None) -> tuple[int, bytes]:
    """The judge's positive answers as mast_findings rows (basis judge), every answer as a mast_judgements row."""
    found: list[list[Any]] = []
    finding_rows(j, found, quotes)
    assessed = judgement_rows(j, judged_at, quotes)
    findings, judgements = _encode(_FINDING_COLUMNS, found), _encode(_JUDGEMENT_COLUMNS, assessed)
    header = _HEADER.pack(VERSION, 0, len(findings), 0, len(judgements), 0, 0)
    return len(found) + len(assessed), header + findings + judgements


def decode(batch: Batch) -> dict[str, bytes]:
    """Each table's insert body for a batch: one Native block of its rows (b"" for none). The blocks of older records
    with fewer columns are merged apart, as `<table>@<columns>`: they are inserted with the columns they have."""
    parts: tuple[list[bytes], ...] = ([], [], [], [], [], [])
    narrower: dict[tuple[str, int], list[bytes]] = {}
    for payload in batch.payloads:
        version = payload[:1]
        if version in (b"\x08", b"\x07", b"\x06", b"\x05", b"\x04", b"\x03", b"\x02"):
            header = _HEADER if version in (b"\x08", b"\x07", b"\x06") else _HEADER_V5 if version == b"\x05" \
                else _HEADER_V4
            widths = _NO_WIDTHS if version == b"\x08" else WIDTHS_V7 if version == b"\x07" else \
                WIDTHS_V3 if version == b"\x03" else WIDTHS_V6
            start = header.size
            for i, size in enumerate(header.unpack_from(payload)[1:]):
                if size:
                    part = payload[start:start + size]
                    if version == b"\x02":
                        parts[i].append(_version_2(ORDER[i], part))
                    elif ORDER[i] in widths:
                        narrower.setdefault((ORDER[i], widths[ORDER[i]]), []).append(part)
                    else:
                        parts[i].append(part)
                start += size
        elif payload:
            _version_1(payload, parts)
    tables = {name: _merge(COLUMNS[name], blocks) for name, blocks in zip(ORDER, parts, strict=True)}
    for (name, width), blocks in narrower.items():
        tables[f"{name}@{width}"] = _merge(_columns(TABLES[name].columns[:width]), blocks)
    return tables


def _json_row(table: str, text: bytes, time_ns: Callable[[Any], int]) -> list[Any]:
    """A row as versions 1 and 2 wrote it (a JSON array), times in nanoseconds by `time_ns`, floats as floats.
    Numbers with a fraction are read as text, so that times stay exact."""
    row = json.loads(text, parse_float=str)
    row += _DEFAULTS[table][len(row):]  # columns added since
    for i in _TIMES[table]:
        row[i] = time_ns(row[i])
    for i in _FLOATS[table]:
        if row[i] is not None:
            row[i] = float(row[i])
    return row


def _version_2(table: str, lines: bytes) -> bytes:
    """A version 2 part (JSONCompactEachRow lines, times as seconds with nine decimals) as a Native block."""
    return _encode(COLUMNS[table], [_json_row(table, line, nanoseconds) for line in lines.splitlines()])


def _version_1(payload: bytes, parts: tuple[list[bytes], ...]) -> None:
    """A record of version 1 (a `table<TAB>JSON array` line per row, RFC 3339 times), each row added to `parts` as a
    Native block."""
    for line in payload.splitlines():
        table, _, text = line.partition(b"\t")
        name = table.decode()
        parts[ORDER.index(name)].append(_encode(COLUMNS[name], [_json_row(name, text, rfc3339_ns)]))
