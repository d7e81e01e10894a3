"""The chDB store: its tables hold exactly the columns the exporter writes, and rows read back whole."""

from __future__ import annotations

from mastwatch.collector.classify.modes import MODES
from mastwatch.collector.spend import Waste
from mastwatch.collector.steps import Finding
from mastwatch.collector.verdict import Verdict
from mastwatch.exporter.store import StoreConfig, StoreExporter
from mastwatch.exporter.store.schema import COLUMNS


def _verdict() -> Verdict:
    model = "gpt-4.1-mini"
    waste = Waste(repeated_by_tool={"search": 2}, tokens={(model, "input"): 900, (model, "output"): 40},
                  cost={model: 0.0004})
    finding = Finding("FM-1.3", 0.9, [b"\x01" * 8, b"\x02" * 8], 'search called 3 times with {"q":"a\\tb\\n"}')
    return Verdict("ab" * 16, "svc", "agent 'x'", [model], 1_700_000_000_123_456_789, 1_700_000_001_000_000_000,
                   5, 3, 2, 1200, 60, 0.0006, {"FM-1.3": finding}, waste)


def test_rows_read_back_whole(tmp_path) -> None:
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        for table, columns in COLUMNS.items():
            described = store.query(f"DESCRIBE TABLE mastwatch.{table}")
            assert tuple(c["name"] for c in described) == columns
        verdict = _verdict()
        store.export_verdict(verdict, None)
        assert store.flush()
        (row,) = store.query("SELECT * FROM mastwatch.mast_traces")
        assert row["agent"] == "agent 'x'" and row["failure_modes"] == ["FM-1.3"]
        assert row["started_at"] == "2023-11-14 22:13:20.123456789"  # nanoseconds kept
        assert int(row["wasted_input_tokens"]) == 900 and int(row["repeated_steps"]) == 2
        (finding,) = store.query("SELECT * FROM mastwatch.mast_findings")
        assert finding["reason"] == verdict.findings["FM-1.3"].reason  # tabs, newlines, quotes survive
        assert finding["evidence"] == ["0101010101010101", "0202020202020202"]
        assert finding["name"] == MODES["FM-1.3"].name
    finally:
        store.shutdown()


def test_rfc3339_is_exact_to_the_nanosecond() -> None:
    import random
    from datetime import datetime, timezone

    from mastwatch.collector.verdict import rfc3339

    rng = random.Random(7)
    for ns in [0, 86_399_999_999_999, 1_700_000_000_123_456_789] + [rng.randrange(0, 4 * 10**18) for _ in range(2000)]:
        seconds, fraction = divmod(ns, 10**9)
        expected = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        assert rfc3339(ns) == f"{expected}.{fraction:09d}Z"


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
            store.export_verdict(_verdict(), None)
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
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=60, max_queued_rows=4), telemetry)
    try:
        for _ in range(3):  # two rows each (trace and finding): 6 rows for a queue of 4
            store.export_verdict(_verdict(), None)
        assert telemetry.store_dropped._value.get() == 2
    finally:
        store.shutdown()
