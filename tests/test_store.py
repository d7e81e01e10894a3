"""The chDB store: its tables hold exactly the columns the exporter writes, rows read back whole, migrations are
versioned and idempotent, a retried batch is never doubled, and the cluster DDL parses."""

from __future__ import annotations

import re

import pytest

from mastwatch.collector.model.content import Content
from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.steps import Finding, StepKind
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.model.waste import RepeatedStep, Waste
from mastwatch.collector.processor import NO_INCREMENT
from mastwatch.exporter.store import StoreConfig, StoreExporter
from mastwatch.exporter.store.queue import Batch
from mastwatch.exporter.store.records import block_rows, decode, encode
from mastwatch.exporter.store.schema import (
    COLUMNS,
    FINDINGS,
    MIGRATIONS,
    MODEL_SPEND,
    REPEATED_STEPS,
    STEPS,
    TABLES,
    TRACES,
    VERSION,
    WASTED_TIME_COLUMNS,
    Layout,
    ddl,
    migrate,
)
from tests.native_blocks import read_blocks
from tests.test_spend import make_step

MODEL = "gpt-4.1-mini"


def make_verdict(trace: int = 0xAB, service: str = "svc", agent: str = "agent 'x'", started_ns: int =
                 1_700_000_000_123_456_789, tools: tuple[str, ...] = ("search", "search"), cost: float = 0.0004,
                 modes: tuple[str, ...] = ("FM-1.3",)) -> Verdict:
    """A verdict whose repeated steps are `tools`; the first step carries the producing call's spend (`cost`), the
    run's model calls cost 0.0002 USD more."""
    steps = [make_step(StepKind.TOOL, started_ns + i, started_ns + i + 1, tool=tool, args=Content({"q": "a\tb\n"}))
             for i, tool in enumerate(tools)]
    charged = (("input", 900), ("output", 40), ("cache_read", 0), ("cache_write", 0))
    none = tuple((kind, 0) for kind, _ in charged)
    waste = Waste(repeated_by_tool={t: tools.count(t) for t in tools}, tokens={(MODEL, "input"): 900,
                  (MODEL, "output"): 40} if tools else {}, cost={MODEL: cost} if tools else {},
                  steps=[RepeatedStep("FM-1.3", s, s.tool, MODEL, charged if i == 0 else none, cost if i == 0 else 0.0)
                         for i, s in enumerate(steps)])
    findings = {code: Finding(code, 0.9, [b"\x01" * 8, b"\x02" * 8], 'search called 3 times with {"q":"a\\tb\\n"}')
                for code in modes}
    spent = cost + 0.0002  # the run's model calls: the repeats' and the rest
    return Verdict(f"{trace:032x}", service, agent, [MODEL], started_ns, started_ns + 1_000_000_000, 5, 3, 2, 1200,
                   60, spent, findings, waste, tokens={(MODEL, "input"): 1100, (MODEL, "cache_read"): 100,
                                                       (MODEL, "output"): 60}, cost={MODEL: spent})


_verdict = make_verdict


def bodies(verdict: Verdict) -> dict[str, bytes]:
    """Each table's insert body for one verdict, as the writer sends it."""
    rows, payload = encode([verdict])
    return decode(Batch("q", 0, 1, rows, [payload]))


def test_a_batch_of_verdicts_is_one_record_holding_every_row_in_order() -> None:
    batch = [make_verdict(trace=1), make_verdict(trace=2, tools=(), modes=()),
             make_verdict(trace=3, tools=("a", "b", "c"), modes=("FM-1.3", "FM-3.3"))]
    rows, payload = encode(batch)
    assert rows == 3 + (1 + 0 + 2) + (2 + 0 + 3) + 3  # traces, findings, repeated steps, spend per model
    tables = decode(Batch("q", 0, 1, rows, [payload]))
    assert [row[0][-1] for row in read_blocks(tables[MODEL_SPEND])[1]] == ["1", "2", "3"]
    (names, traces), (_, findings), (_, steps) = (read_blocks(tables[t]) for t in (TRACES, FINDINGS, REPEATED_STEPS))
    assert [name for name, _ in names] == list(COLUMNS[TRACES])
    assert [row[0][-1] for row in traces] == ["1", "2", "3"]
    assert [(row[0][-1], row[4]) for row in findings] == [("1", "FM-1.3"), ("3", "FM-1.3"), ("3", "FM-3.3")]
    assert [(row[0][-1], row[5]) for row in steps] == [("1", "search"), ("1", "search"), ("3", "a"), ("3", "b"),
                                                       ("3", "c")]
    one_by_one = [encode([v])[1] for v in batch]  # records of one verdict each, merged into one block per table
    assert decode(Batch("q", 0, 3, rows, one_by_one)) == tables


def test_rows_read_back_whole(tmp_path) -> None:
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        for table, columns in COLUMNS.items():
            described = store.query(f"DESCRIBE TABLE mastwatch.{table}")
            assert tuple(c["name"] for c in described) == columns
        verdict = _verdict()
        verdict.waste.steps[0].seconds, verdict.waste.seconds = 1.25, {"search": 1.25}
        store.export_verdicts([verdict], [NO_INCREMENT])
        assert store.flush()
        (row,) = store.query("SELECT * FROM mastwatch.mast_traces")
        assert row["agent"] == "agent 'x'" and row["failure_modes"] == ["FM-1.3"]
        assert row["started_at"] == "2023-11-14 22:13:20.123456789"  # nanoseconds kept
        assert int(row["wasted_input_tokens"]) == 900 and int(row["repeated_steps"]) == 2
        assert row["wasted_seconds"] == 1.25
        (finding,) = store.query("SELECT * FROM mastwatch.mast_findings")
        assert finding["wasted_seconds"] == 1.25
        assert finding["reason"] == verdict.findings["FM-1.3"].reason  # tabs, newlines, quotes survive
        assert finding["evidence"] == ["0101010101010101", "0202020202020202"]
        assert finding["name"] == MODES["FM-1.3"].name
        steps = store.query("SELECT * FROM mastwatch.mast_repeated_steps ORDER BY started_at")
        first = verdict.waste.steps[0].step
        assert [r["span_id"] for r in steps] == [r.step.span_hex for r in verdict.waste.steps]
        assert steps[0] == {"trace_id": verdict.trace_id, "span_id": first.span_hex, "service": "svc",
                            "agent": "agent 'x'", "failure_mode": "FM-1.3", "tool": "search",
                            "args_fingerprint": first.args_fingerprint, "model": MODEL, "uncached_input_tokens": 900,
                            "output_tokens": 40, "cache_read_tokens": 0, "cache_write_tokens": 0, "cost_usd": 0.0004,
                            "started_at": "2023-11-14 22:13:20.123456789", "seconds": 1.25}
        assert steps[1]["cost_usd"] == 0 and steps[1]["args_fingerprint"] == first.args_fingerprint
        assert first.args_fingerprint > 2**53  # exact beyond a double's precision
    finally:
        store.shutdown()


def test_rfc3339_is_exact_to_the_nanosecond() -> None:
    import random
    from datetime import datetime, timezone

    from mastwatch.collector.model.verdict import rfc3339, rfc3339_ns

    rng = random.Random(7)
    for ns in [0, 86_399_999_999_999, 1_700_000_000_123_456_789] + [rng.randrange(0, 4 * 10**18) for _ in range(2000)]:
        seconds, fraction = divmod(ns, 10**9)
        expected = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        assert rfc3339(ns) == f"{expected}.{fraction:09d}Z"
        assert rfc3339_ns(rfc3339(ns)) == ns


def test_failed_writes_are_queued_and_retried_until_the_store_recovers(tmp_path) -> None:
    """A real failure: the table is gone, so inserts fail; rows wait and arrive once it is back."""
    import time

    from prometheus_client import CollectorRegistry

    from mastwatch.exporter.prometheus import SelfMetrics
    from mastwatch.exporter.store.schema import FINDINGS, TABLES, Layout, create_table

    telemetry = SelfMetrics(CollectorRegistry())
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05), telemetry)
    try:
        store.engine.command("DROP TABLE mastwatch.mast_findings")  # traces go in, findings fail
        for _ in range(3):
            store.export_verdicts([_verdict()], [NO_INCREMENT])
        deadline = time.monotonic() + 10
        while telemetry.store_errors._value.get() < 2:
            assert time.monotonic() < deadline, "the failing insert was not retried"
            time.sleep(0.05)
        for statement in create_table(TABLES[FINDINGS], Layout()):
            store.engine.command(statement)
        assert store.flush(timeout=60)
        assert [int(r["n"]) for r in store.query("SELECT count() AS n FROM mastwatch.mast_traces")] == [3]  # once
        assert [int(r["n"]) for r in store.query("SELECT count() AS n FROM mastwatch.mast_findings")] == [3]
    finally:
        store.shutdown()


def test_rows_beyond_the_queue_bound_are_dropped_and_counted(tmp_path) -> None:
    from prometheus_client import CollectorRegistry

    from mastwatch.exporter.prometheus import SelfMetrics

    telemetry = SelfMetrics(CollectorRegistry())
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=60, max_queued_rows=10), telemetry)
    try:
        for _ in range(3):  # five rows each (trace, finding, two steps, spend): 15 rows for a queue of 10
            store.export_verdicts([_verdict()], [NO_INCREMENT])
        assert telemetry.store_dropped._value.get() == 5  # the oldest verdict, whole
        assert telemetry.store_queue_rows.collect()[0].samples[0].value == 10  # read when scraped
    finally:
        store.shutdown()


def _count(store: StoreExporter, table: str) -> int:
    return store.query(f"SELECT count() AS n FROM mastwatch.{table}")[0]["n"]


def test_migrations_are_versioned_and_idempotent(tmp_path) -> None:
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        applied = store.query("SELECT version, description FROM mastwatch.mast_schema_migrations ORDER BY version")
        assert applied == [{"version": m.version, "description": m.description} for m in MIGRATIONS]
        assert migrate(store.engine, store.layout) == []  # nothing left to do
        for table in TABLES:
            (row,) = store.query(f"SELECT engine_full FROM system.tables WHERE database = 'mastwatch' AND "
                                 f"name = '{table}'")
            assert "non_replicated_deduplication_window = 1000" in row["engine_full"]
    finally:
        store.shutdown()


def test_a_store_of_the_first_version_is_migrated_in_place(tmp_path) -> None:
    """Stores written before migrations existed hold version 1's tables and no migrations table."""
    from mastwatch.exporter.store.chdb_engine import ChdbEngine

    engine = ChdbEngine(str(tmp_path))
    try:
        engine.command("CREATE DATABASE mastwatch")
        for statement in MIGRATIONS[0].statements(Layout()):
            engine.command(statement)
        engine.insert("mastwatch.mast_traces", TABLES[TRACES].columns, bodies(make_verdict())[TRACES], "t")
    finally:
        engine.close()
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        versions = store.query("SELECT version FROM mastwatch.mast_schema_migrations ORDER BY version")
        assert [r["version"] for r in versions] == list(range(1, VERSION + 1))
        assert _count(store, TRACES) == 1  # kept
        store.export_verdicts([make_verdict(trace=2)], [NO_INCREMENT])
        assert store.flush()
        assert (_count(store, TRACES), _count(store, REPEATED_STEPS)) == (2, 2)
    finally:
        store.shutdown()


class Recorder:
    """An engine that records the statements run through it."""

    def __init__(self, engine) -> None:
        self.engine, self.commands = engine, []

    def command(self, sql: str) -> None:
        self.commands.append(sql)
        self.engine.command(sql)

    def query(self, sql: str, params=None):
        return self.engine.query(sql, params)


def test_ttl_follows_the_configuration_and_is_altered_only_on_a_change(tmp_path) -> None:
    def ttl(store: StoreExporter) -> set[str]:
        rows = store.query("SELECT engine_full FROM system.tables WHERE database = 'mastwatch'")
        return {m.group(1) for r in rows for m in [re.search(r"TTL (.+?) SETTINGS", r["engine_full"])] if m}

    store = StoreExporter(StoreConfig(path=str(tmp_path), ttl_days=30))
    try:
        assert ttl(store) == {"toDateTime(started_at) + toIntervalDay(30)"}
        recorder = Recorder(store.engine)
        migrate(recorder, Layout(ttl_days=30))
        assert not [c for c in recorder.commands if c.startswith("ALTER")]  # no rewrite of parts at each start
        migrate(recorder, Layout(ttl_days=7))
        assert ttl(store) == {"toDateTime(started_at) + toIntervalDay(7)"}
        migrate(recorder, Layout(ttl_days=0))
        assert ttl(store) == set()
    finally:
        store.shutdown()


def test_a_table_may_keep_its_rows_for_its_own_days(tmp_path) -> None:
    """The bulky steps for a week, spend for good, the rest as ttl_days says; a table's days change on their own."""
    def ttl(store: StoreExporter) -> dict[str, str | None]:
        rows = store.query("SELECT name, engine_full FROM system.tables WHERE database = 'mastwatch' AND "
                           "name LIKE 'mast_%' AND engine LIKE '%MergeTree'")
        return {r["name"]: (m.group(1) if (m := re.search(r"TTL (.+?) SETTINGS", r["engine_full"])) else None)
                for r in rows}

    store = StoreExporter(StoreConfig(path=str(tmp_path), ttl_days=30,
                                      table_ttl_days={STEPS: 7, MODEL_SPEND: 0}))
    try:
        days = ttl(store)
        assert days[STEPS] == "toDateTime(started_at) + toIntervalDay(7)" and days[MODEL_SPEND] is None
        assert all(days[t] == "toDateTime(started_at) + toIntervalDay(30)" for t in (TRACES, FINDINGS,
                                                                                     REPEATED_STEPS))
        migrate(store.engine, StoreConfig(ttl_days=30, table_ttl_days={STEPS: 3}).layout)
        days = ttl(store)
        assert days[STEPS].endswith("toIntervalDay(3)") and days[MODEL_SPEND].endswith("toIntervalDay(30)")
    finally:
        store.shutdown()
    statements = ddl(StoreConfig(table_ttl_days={STEPS: 7}).layout)
    assert [s for s in statements if "TTL" in s] == [
        "ALTER TABLE mastwatch.mast_steps MODIFY TTL toDateTime(started_at) + toIntervalDay(7)"]
    with pytest.raises(ValueError, match="'mast_signatures' is not one of the tables"):
        StoreConfig(table_ttl_days={"mast_signatures": 7})


def test_a_retried_batch_is_not_doubled(tmp_path) -> None:
    store = StoreExporter(StoreConfig(path=str(tmp_path)))
    try:
        for table, body in bodies(make_verdict()).items():
            if not body:
                continue
            for _ in range(2):  # the answer to the first insert was lost: the same batch again
                store.engine.insert(f"mastwatch.{table}", TABLES[table].columns, body, f"q-0-10-{table}")
            assert _count(store, table) == block_rows(body) > 0
            store.engine.insert(f"mastwatch.{table}", TABLES[table].columns, body, f"q-10-20-{table}")
            assert _count(store, table) == 2 * block_rows(body)  # another batch with the same rows is written
    finally:
        store.shutdown()


def test_cluster_ddl_parses_and_is_replicated_and_distributed(tmp_path) -> None:
    from mastwatch.exporter.store.chdb_engine import ChdbEngine

    statements = ddl(Layout(database="obs", cluster="mastwatch", ttl_days=14))
    engine = ChdbEngine(str(tmp_path))
    try:
        for statement in statements:  # ClickHouse's own parser; ReplicatedMergeTree needs Keeper to run
            (row,) = engine.query("SELECT formatQuery({q:String}) AS f", {"q": statement})
            assert row["f"]
        for statement in ddl(Layout(database="obs")):  # the same DDL for one server runs
            engine.command(statement)
    finally:
        engine.close()
    creates = [s for s in statements if s.startswith("CREATE TABLE")]
    assert all(re.search(r" ON CLUSTER mastwatch\b", s) for s in statements if not s.startswith("INSERT"))
    for table in TABLES:
        (local,) = [s for s in creates if s.startswith(f"CREATE TABLE IF NOT EXISTS obs.{table}_local ")]
        assert "ENGINE = ReplicatedMergeTree\n" in local and "non_replicated" not in local
        (distributed,) = [s for s in creates if s.startswith(f"CREATE TABLE IF NOT EXISTS obs.{table} ")]
        assert f"Distributed(mastwatch, obs, {table}_local, cityHash64(trace_id))" in distributed
        assert f"ALTER TABLE obs.{table}_local ON CLUSTER mastwatch MODIFY TTL toDateTime(started_at) + " \
               "toIntervalDay(14)" in statements
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{database}/mast_schema_migrations', '{replica}')" \
        in statements[1]


@pytest.mark.parametrize("table", [TRACES, FINDINGS, REPEATED_STEPS, STEPS, MODEL_SPEND])
def test_every_table_is_partitioned_by_day_and_indexed_by_trace_id(tmp_path, table) -> None:
    (create,) = [s for s in ddl(Layout()) if f"mastwatch.{table} (" in s]
    assert "PARTITION BY toDate(started_at)" in create
    assert "INDEX idx_trace_id trace_id TYPE bloom_filter" in create
    assert COLUMNS[table][0] == "trace_id"


def random_times(n: int = 150) -> list[int]:
    """Start times to the nanosecond, from the epoch to 2096: edges, and days enough for 100+ partitions."""
    import random

    rng = random.Random(11)
    return [0, 1, 999_999_999, 1_000_000_000, 86_399_999_999_999] + [rng.randrange(0, 4 * 10**18) for _ in range(n)]


def export_and_check_times(store: StoreExporter) -> None:
    """Verdicts started at `random_times()` arrive with every time exact, whatever days one batch spans."""
    times = random_times()
    for i, ns in enumerate(times):
        store.export_verdicts([make_verdict(trace=i, started_ns=ns)], [NO_INCREMENT])
    assert store.flush(60)
    rows = store.query("SELECT trace_id, toUnixTimestamp64Nano(started_at) AS s, toUnixTimestamp64Nano(ended_at) AS e "
                       "FROM mastwatch.mast_traces")
    assert sorted((int(r["trace_id"], 16), int(r["s"]), int(r["e"])) for r in rows) == \
        [(i, ns, ns + 1_000_000_000) for i, ns in enumerate(times)]
    steps = store.query("SELECT trace_id, toUnixTimestamp64Nano(started_at) AS s FROM mastwatch.mast_repeated_steps")
    assert sorted((int(r["trace_id"], 16), int(r["s"])) for r in steps) == \
        sorted((i, ns + k) for i, ns in enumerate(times) for k in (0, 1))
    assert _count(store, FINDINGS) == len(times)


def test_times_are_exact_to_the_nanosecond_and_a_batch_may_span_any_days(tmp_path) -> None:
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=60))  # one batch
    try:
        export_and_check_times(store)
    finally:
        store.shutdown()


def _rows(verdict: Verdict) -> dict[str, list[list]]:
    """Each table's rows of a verdict as records before version 7 held them (fewer columns), times in nanoseconds."""
    from mastwatch.exporter.store import records

    found: list[list] = []
    repeated: list[list] = []
    records.finding_rows(verdict, found)
    records.repeated_step_rows(verdict, repeated)
    rows = {TRACES: [records.trace_row(verdict)], FINDINGS: found, REPEATED_STEPS: repeated}
    return {table: [row[:records.WIDTHS_V6[table]] for row in table_rows] for table, table_rows in rows.items()}


def _old_parts(verdict: Verdict) -> dict[str, bytes]:
    """Each table's Native block of a verdict's rows as records of versions 3 to 6 held them."""
    from mastwatch.exporter.store import records

    return {name: records._encode(records._columns(TABLES[name].columns[:records.WIDTHS_V6[name]]), rows)
            for name, rows in _rows(verdict).items()}


def _times(table: str) -> list[int]:
    return [i for i, c in enumerate(TABLES[table].columns) if c.type_name.startswith("DateTime64(9")]


def version_1(verdict: Verdict) -> tuple[int, bytes]:
    """A verdict's queue record as written before version 2: `table<TAB>JSON array` lines, RFC 3339 times."""
    import json

    from mastwatch.collector.model.verdict import rfc3339

    lines = [f"{table}\t{json.dumps([rfc3339(v) if i in _times(table) else v for i, v in enumerate(row)])}\n"
             for table, rows in _rows(verdict).items() for row in rows]
    return len(lines), "".join(lines).encode()


def version_2(verdict: Verdict) -> tuple[int, bytes]:
    """A verdict's queue record as version 2 wrote it: each table's JSONCompactEachRow lines after a header of their
    lengths, times as JSON numbers of seconds with nine decimals."""
    import json
    import struct

    def line(table: str, row: list) -> str:
        return "[" + ",".join(f"{v // 10**9}.{v % 10**9:09d}" if i in _times(table) else json.dumps(v)
                              for i, v in enumerate(row)) + "]\n"

    parts = [("".join(line(table, row) for row in rows)).encode() for table, rows in _rows(verdict).items()]
    header = struct.pack("<B4I", 2, *(len(p) for p in parts), 0)
    return sum(len(rows) for rows in _rows(verdict).values()), header + b"".join(parts)


def assert_copies(store: StoreExporter, copies: int, per_trace: dict[str, int]) -> None:
    """Each table holds `per_trace` rows for each of `copies` traces of one verdict, the same but for the trace id."""
    for table, n in per_trace.items():
        rows = store.query(f"SELECT * EXCEPT trace_id FROM mastwatch.{table} ORDER BY trace_id, started_at")
        assert len(rows) == copies * n, table
        assert all(rows[i * n:(i + 1) * n] == rows[:n] for i in range(copies)), table


def check_upgrade(queue_path, open_store) -> None:
    """A verdict queued as version 1 and as version 2 before the upgrade, and the same verdict queued now, give the
    same rows."""
    from mastwatch.exporter.store.queue import DurableQueue

    queue = DurableQueue(str(queue_path), 1000, 1 << 20)
    verdict = make_verdict(trace=1)
    queue.append(*version_1(verdict))
    verdict.trace_id = f"{3:032x}"
    queue.append(*version_2(verdict))
    queue.close()
    store = open_store()
    try:
        verdict.trace_id = f"{2:032x}"
        store.export_verdicts([verdict], [NO_INCREMENT])
        assert store.flush()
        assert_copies(store, 3, {TRACES: 1, FINDINGS: 1, REPEATED_STEPS: 2})
    finally:
        store.shutdown()


def test_records_of_versions_1_and_2_still_queued_are_written_after_an_upgrade(tmp_path) -> None:
    check_upgrade(tmp_path / "queue", lambda: StoreExporter(StoreConfig(path=str(tmp_path),
                                                                                  flush_interval=0.05)))


def queued_before_and_now(path, rows: int, payload: bytes, verdict: Verdict) -> StoreExporter:
    """A record of an older format queued in `path` before an upgrade (trace 1 of `verdict`), then the same verdict
    (as trace 2) exported by the store opened now; both written to every table they have rows for. The store is
    left open."""
    from mastwatch.exporter.store.queue import DurableQueue

    queue = DurableQueue(str(path / "queue"), 1000, 1 << 20)
    queue.append(rows, payload)
    queue.close()
    store = StoreExporter(StoreConfig(path=str(path), flush_interval=0.05))
    verdict.trace_id = f"{2:032x}"
    store.export_verdicts([verdict], [NO_INCREMENT])
    assert store.flush()
    assert_copies(store, 2, {TRACES: 1, FINDINGS: 1, REPEATED_STEPS: 2})
    return store


def test_records_of_version_4_still_queued_are_written_after_an_upgrade(tmp_path) -> None:
    """A record queued before mast_steps (format 4: four parts) is written as it was; one queued now, of the same
    verdict, has its steps too."""
    import struct

    from mastwatch.collector.model.steps import StepKind

    verdict = make_verdict(trace=1)
    verdict.trace_steps = [make_step(StepKind.LLM, verdict.started_at_ns, verdict.started_at_ns + 5, model=MODEL,
                                     input_tokens=10, output_tokens=2, error=True, error_type="timeout"),
                           *(r.step for r in verdict.waste.steps)]
    parts = _old_parts(verdict)
    payload = struct.pack("<B4I", 4, len(parts[TRACES]), len(parts[FINDINGS]), len(parts[REPEATED_STEPS]), 0) + \
        parts[TRACES] + parts[FINDINGS] + parts[REPEATED_STEPS]
    store = queued_before_and_now(tmp_path, 1 + 1 + 2, payload, verdict)
    try:
        steps = store.query("SELECT trace_id, kind, error, error_type, model, input_tokens, cost_usd, "
                            "args_fingerprint FROM mastwatch.mast_steps ORDER BY kind, started_at")  # llm first
        assert [r["trace_id"] for r in steps] == [verdict.trace_id] * 3  # the old record had none
        assert steps[0] == {"trace_id": verdict.trace_id, "kind": "llm", "error": True, "error_type": "timeout",
                            "model": MODEL, "input_tokens": 10, "cost_usd": pytest.approx(steps[0]["cost_usd"]),
                            "args_fingerprint": 0}
        assert steps[0]["cost_usd"] > 0 and [r["kind"] for r in steps[1:]] == ["tool", "tool"]
        assert all(r["args_fingerprint"] == verdict.waste.steps[0].step.args_fingerprint for r in steps[1:])
    finally:
        store.shutdown()


def test_spend_is_stored_per_run_and_model(tmp_path) -> None:
    """A row per model the run called: its calls and seconds, tokens by type, price, and its
    repeated steps' waste; a model without a price is stored as unpriced, not as free."""
    verdict = make_verdict(trace=1)
    verdict.model_calls = {MODEL: (2, 3.0), "in-house-7b": (1, 0.5)}  # as the processor counts them
    verdict.models = [MODEL, "in-house-7b"]
    verdict.tokens[("in-house-7b", "input")] = 500
    verdict.tokens[("in-house-7b", "output")] = 7
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        store.export_verdicts([verdict], [NO_INCREMENT])
        assert store.flush()
        rows = store.query("SELECT * EXCEPT (trace_id, service, agent, started_at) FROM mastwatch.mast_model_spend "
                           "ORDER BY model")
    finally:
        store.shutdown()
    assert rows == [
        {"model": MODEL, "calls": 2, "seconds": 3.0, "uncached_input_tokens": 1100, "output_tokens": 60,
         "cache_read_tokens": 100, "cache_write_tokens": 0, "cost_usd": pytest.approx(0.0006), "priced": True,
         "repeated_steps": 2, "wasted_input_tokens": 900, "wasted_output_tokens": 40, "wasted_cost_usd": 0.0004},
        {"model": "in-house-7b", "calls": 1, "seconds": 0.5, "uncached_input_tokens": 500, "output_tokens": 7,
         "cache_read_tokens": 0, "cache_write_tokens": 0, "cost_usd": 0.0, "priced": False, "repeated_steps": 0,
         "wasted_input_tokens": 0, "wasted_output_tokens": 0, "wasted_cost_usd": 0.0}]


def test_records_of_version_5_still_queued_are_written_after_an_upgrade(tmp_path) -> None:
    """A record queued before mast_model_spend (format 5: five parts) is written as it was."""
    import struct


    verdict = make_verdict(trace=1)
    parts = _old_parts(verdict)
    sizes = [len(parts[TRACES]), len(parts[FINDINGS]), len(parts[REPEATED_STEPS]), 0, 0]
    payload = struct.pack("<B5I", 5, *sizes) + parts[TRACES] + parts[FINDINGS] + parts[REPEATED_STEPS]
    store = queued_before_and_now(tmp_path, 1 + 1 + 2, payload, verdict)
    try:
        assert [r["trace_id"] for r in store.query("SELECT trace_id FROM mastwatch.mast_model_spend")] == \
            [verdict.trace_id]  # the old record had none
    finally:
        store.shutdown()


def test_records_of_version_6_still_queued_are_written_after_an_upgrade(tmp_path) -> None:
    """A record queued before the time of repeated steps (format 6: fewer columns in three tables) is written with
    the columns it has: its time is 0; the same run queued now has it."""
    import struct


    verdict = make_verdict(trace=1)
    rows, payload = encode([verdict])
    sizes = struct.unpack_from("<B6I", payload)[1:]
    new = payload[struct.calcsize("<B6I") + sum(sizes[:3]):]  # the parts after the three narrower ones
    parts = _old_parts(verdict)
    old = struct.pack("<B6I", 6, len(parts[TRACES]), len(parts[FINDINGS]), len(parts[REPEATED_STEPS]), *sizes[3:])
    old += parts[TRACES] + parts[FINDINGS] + parts[REPEATED_STEPS] + new
    store = queued_before_and_now(tmp_path, rows, old, verdict)
    try:
        for table in (TRACES, FINDINGS, REPEATED_STEPS):  # make_verdict's repeats take no time
            column = WASTED_TIME_COLUMNS[table]
            assert {r[column] for r in store.query(f"SELECT {column} FROM mastwatch.{table}")} == {0.0}
        timed = make_verdict(trace=3)
        timed.waste.steps[0].seconds, timed.waste.steps[1].seconds = 2.5, 0.5
        timed.waste.seconds = {"search": 3.0}
        store.export_verdicts([timed], [NO_INCREMENT])
        assert store.flush()
        one = "WHERE trace_id = '" + timed.trace_id + "'"
        assert store.query(f"SELECT wasted_seconds FROM mastwatch.mast_traces {one}") == [{"wasted_seconds": 3.0}]
        assert store.query(f"SELECT wasted_seconds FROM mastwatch.mast_findings {one}") == [{"wasted_seconds": 3.0}]
        assert [r["seconds"] for r in store.query(f"SELECT seconds FROM mastwatch.mast_repeated_steps {one} "
                                                  "ORDER BY started_at")] == [2.5, 0.5]
    finally:
        store.shutdown()


def test_records_of_version_7_still_queued_are_written_after_an_upgrade(tmp_path) -> None:
    """A record queued before runs' version and environment (format 7: mast_traces and mast_findings blocks of fewer
    columns) is written with the columns it has: they read ''; the same run queued now has them."""
    import struct

    from mastwatch.exporter.store import records

    verdict = make_verdict(trace=1)
    rows, payload = encode([verdict])
    sizes = struct.unpack_from("<B6I", payload)[1:]
    found: list[list] = []
    records.finding_rows(verdict, found)
    parts = {table: records._encode(records._columns(TABLES[table].columns[:width]), [r[:width] for r in table_rows])
             for (table, width), table_rows in (((TRACES, records.WIDTHS_V7[TRACES]), [records.trace_row(verdict)]),
                                                ((FINDINGS, records.WIDTHS_V7[FINDINGS]), found))}
    old = struct.pack("<B6I", 7, len(parts[TRACES]), len(parts[FINDINGS]), *sizes[2:]) + parts[TRACES] + \
        parts[FINDINGS] + payload[struct.calcsize("<B6I") + sizes[0] + sizes[1]:]
    store = queued_before_and_now(tmp_path, rows, old, verdict)
    try:
        released = make_verdict(trace=3)
        released.version, released.environment = "1.4.2", "production"
        store.export_verdicts([released], [NO_INCREMENT])
        assert store.flush()
        assert store.query("SELECT trace_id, version, environment FROM mastwatch.mast_traces ORDER BY trace_id") == [
            {"trace_id": f"{1:032x}", "version": "", "environment": ""},
            {"trace_id": f"{2:032x}", "version": "", "environment": ""},
            {"trace_id": f"{3:032x}", "version": "1.4.2", "environment": "production"}]
        assert store.query("SELECT trace_id, version FROM mastwatch.mast_findings ORDER BY trace_id") == [
            {"trace_id": f"{1:032x}", "version": ""}, {"trace_id": f"{2:032x}", "version": ""},
            {"trace_id": f"{3:032x}", "version": "1.4.2"}]
    finally:
        store.shutdown()
    assert records.VERSION == 8


def test_a_failing_fsync_of_the_queue_is_retried_not_the_writers_end(tmp_path, monkeypatch) -> None:
    """With no file descriptor left (EMFILE), syncing the queue fails: the writer logs it, backs off and goes on;
    the rows arrive once descriptors are free again. Simulated: os.dup fails for a while."""
    import errno
    import os
    import time

    real_dup, failing = os.dup, {"on": True}

    def dup(fd: int) -> int:
        if failing["on"]:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_dup(fd)

    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        monkeypatch.setattr(os, "dup", dup)
        store.export_verdicts([_verdict()], [NO_INCREMENT])
        time.sleep(0.5)  # several attempts fail
        assert store._thread.is_alive()
        failing["on"] = False
        assert store.flush(timeout=60)
        assert [int(r["n"]) for r in store.query("SELECT count() AS n FROM mastwatch.mast_traces")] == [1]
    finally:
        store.shutdown()
