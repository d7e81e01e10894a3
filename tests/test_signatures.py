"""Failure signatures: masking, stability across processes, grouping, what the store keeps per signature (across
restarts, and from records queued before the upgrade), the counter of new signatures and `mastwatch top
signatures`."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import time

import pytest
from prometheus_client import CollectorRegistry

from mastwatch.collector.model.steps import Finding
from mastwatch.collector.processor import NO_INCREMENT
from mastwatch.collector.signature import mask, signature
from mastwatch.exporter.signatures import NewSignatures, SignatureRefresh
from mastwatch.exporter.store import StoreConfig, StoreExporter, records
from mastwatch.exporter.store.queue import DurableQueue
from mastwatch.exporter.store.schema import FINDINGS, FINDINGS_V4_WIDTH, MIGRATIONS, TABLES, Layout
from mastwatch.exporter.totals import LabelLimiter
from tests.test_store import make_verdict

MASKED = [
    ('kubectl_get_pods called 5 times with equivalent arguments {"id":5935}',
     'kubectl_get_pods called N times with equivalent arguments {"…"<id>}'),
    ("read_file called 3 times on /home/dev/src/app.py", "read_file called N times on <path>"),
    ("order W2378156 cancelled; ticket INC-4021 still open", "order <id> cancelled; ticket <id> still open"),
    ("run 123e4567-e89b-12d3-a456-426614174000 retried", "run <id> retried"),
    ("span 82a189d15d9a3784 failed at 2026-12-03T14:31:00Z", "span <id> failed at <id>"),
    ("model gpt-4o on C:\\repo\\tests\\", "model <id> on <path>"),
    ("claimed 'all tests pass' but 2 of 14 failed in 350ms", 'claimed "…" but N of N failed in N'),
    ("refund of $1,234.50 and 3.5 units", "refund of $N,N and N units"),
    ("cycle search_tickets→get_ticket repeated 4 times", "cycle search_tickets→get_ticket repeated N times"),
]


@pytest.mark.parametrize(("reason", "masked"), MASKED)
def test_values_are_masked_and_names_kept(reason: str, masked: str) -> None:
    assert mask(reason) == masked


def test_the_same_problem_with_other_values_is_one_signature_and_another_is_not() -> None:
    one = signature("sre-bot", "FM-1.3", ["kubectl_get_pods"], 'kubectl_get_pods called 5 times with {"id":5935}')
    assert one == signature("sre-bot", "FM-1.3", ["kubectl_get_pods"], 'kubectl_get_pods called 7 times with {"id":18}')
    assert one != signature("sre-bot", "FM-1.3", ["kubectl_logs"], 'kubectl_logs called 5 times with {"id":5935}')
    assert one != signature("triage-bot", "FM-1.3", ["kubectl_get_pods"], 'kubectl_get_pods called 5 times with {}')
    assert one != signature("sre-bot", "FM-3.3", ["kubectl_get_pods"], 'kubectl_get_pods called 5 times with {}')


def test_a_signature_is_the_same_in_every_process() -> None:
    """Replicas and restarts compute the same value: no per-process hash seed in it."""
    code = "from mastwatch.collector.signature import signature; print(signature('a', 'FM-1.3', ['t'], 'x 1'))"
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip() for seed in ("1", "2", "3")}
    assert seen == {signature("a", "FM-1.3", ["t"], "x 2")} and len(seen.pop()) == 16


def test_ten_thousand_findings_of_fifty_causes_are_fifty_signatures() -> None:
    rng = random.Random(5)
    templates = [
        ("sre-bot", "FM-1.3", "kubectl_get_pods", 'kubectl_get_pods called {n} times with {{"id":{i}}}'),
        ("support-agent", "FM-3.3", "lookup_order", "final answer claims order W{i} refunded; lookup_order said {n}"),
        ("coding-agent", "FM-1.3", "read_file", "read_file called {n} times on /repo/src/mod{i}/main.py"),
        ("triage-agent", "FM-2.5", "get_ticket", "get_ticket failed {n} times for ticket 'T-{i}', ignored"),
        ("sre-bot", "FM-3.2", "restart_pod", "restart_pod {u} changed state at {t}, never checked"),
    ]
    causes = [(agent, mode, f"{tool}_{k}", text.replace(tool, f"{tool}_{k}")) for agent, mode, tool, text in templates
              for k in range(10)]
    found = set()
    for _ in range(10_000):
        agent, mode, tool, text = rng.choice(causes)
        reason = text.format(n=rng.randint(2, 90), i=rng.randint(1, 10**7), t=f"2026-12-0{rng.randint(1, 9)}T10:00:00Z",
                             u=f"{rng.getrandbits(128):032x}"[:8] + "-1111-2222-3333-444455556666")
        found.add(signature(agent, mode, [tool], reason))
    assert len(found) == len(causes) == 50


def _signatures(store: StoreExporter) -> list[dict]:
    return store.query("SELECT signature, failure_mode, agent, uniqMerge(runs) AS runs, min(first_seen) AS first, "
                       "groupUniqArrayArray(models) AS models, sum(wasted_cost_usd) AS wasted "
                       "FROM mastwatch.mast_signatures GROUP BY signature, failure_mode, agent ORDER BY failure_mode")


def test_the_store_keeps_each_signature_across_restarts(tmp_path) -> None:
    config = StoreConfig(path=str(tmp_path), flush_interval=0.05)
    store = StoreExporter(config)
    try:  # three runs of one loop (other ids), one verification failure; a judge's answer is no signature
        verdicts = [make_verdict(trace=t, modes=("FM-1.3",)) for t in (1, 2)]
        verdicts.append(make_verdict(trace=3, modes=("FM-1.3", "FM-3.3")))
        verdicts[1].findings["FM-1.3"].reason = 'search called 9 times with {"q":"other"}'
        store.export_verdicts(verdicts, [NO_INCREMENT] * 3)
        assert store.flush()
        first = _signatures(store)
    finally:
        store.shutdown()
    assert [(r["failure_mode"], r["runs"]) for r in first] == [("FM-1.3", 3), ("FM-3.3", 1)]
    assert first[0]["models"] == ["gpt-4.1-mini"] and first[0]["wasted"] == pytest.approx(3 * 0.0004)
    store = StoreExporter(config)
    try:
        store.export_verdicts([make_verdict(trace=4)], [NO_INCREMENT])
        assert store.flush()
        again = _signatures(store)
        assert {k.signature: k.runs for k in store.known_signatures()}[again[0]["signature"]] == 4
    finally:
        store.shutdown()
    assert [(r["signature"], r["runs"], r["first"]) for r in again] == \
        [(first[0]["signature"], 4, first[0]["first"]), (first[1]["signature"], 1, first[1]["first"])]


def test_a_store_from_before_signatures_is_migrated_and_its_queued_records_written(tmp_path) -> None:
    """mast_findings of version 4 gains the columns; a record queued by the previous version (format 3: findings
    without them) is written with the columns it has."""
    from mastwatch.exporter.store.chdb_engine import ChdbEngine

    try:
        from mastwatch.exporter.store import _native
    except ImportError:  # the pure-Python build
        from mastwatch.exporter.store import _native_py as _native

    old = TABLES[FINDINGS].columns[:FINDINGS_V4_WIDTH]
    engine = ChdbEngine(str(tmp_path))
    try:
        engine.command("CREATE DATABASE mastwatch")
        for migration in MIGRATIONS[:4]:
            for statement in migration.statements(Layout()):
                engine.command(statement)
        engine.command("ALTER TABLE mastwatch.mast_findings DROP COLUMN signature, DROP COLUMN models, "
                       "DROP COLUMN wasted_cost_usd")
        engine.command("CREATE TABLE mastwatch.mast_schema_migrations (version UInt32, applied_at DateTime64(3, 'UTC') "
                       "DEFAULT now64(3), description String) ENGINE = ReplacingMergeTree ORDER BY version")
        for migration in MIGRATIONS[:4]:
            engine.command(f"INSERT INTO mastwatch.mast_schema_migrations (version, description) VALUES "
                           f"({migration.version}, 'x')")
    finally:
        engine.close()
    verdict = make_verdict(trace=9)
    rows: list[list] = []
    records.finding_rows(verdict, rows)
    findings = _native.encode(records._columns(old), [row[:FINDINGS_V4_WIDTH] for row in rows])
    width = records.WIDTHS_V3["mast_traces"]  # before the time of repeated steps too
    trace = _native.encode(records._columns(TABLES["mast_traces"].columns[:width]),
                           [records.trace_row(verdict)[:width]])
    payload = struct.pack("<B4I", 3, len(trace), len(findings), 0, 0) + trace + findings
    queue = DurableQueue(str(tmp_path / "queue"), 1000, 1 << 20)
    queue.append(1 + len(rows), payload)
    queue.close()
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        assert store.flush()
        (row,) = store.query("SELECT trace_id, failure_mode, signature, models FROM mastwatch.mast_findings")
        assert (row["trace_id"], row["failure_mode"]) == (f"{9:032x}", "FM-1.3")
        assert (row["signature"], row["models"]) == ("", [])
    finally:
        store.shutdown()


def test_a_new_signature_is_counted_once_it_recurs_and_known_ones_never() -> None:
    registry = CollectorRegistry()
    verdicts = [make_verdict(trace=t) for t in range(5)]
    known = signature(verdicts[0].agent, "FM-3.3", ["search", "search"], verdicts[0].findings["FM-1.3"].reason)
    counter = NewSignatures(registry, LabelLimiter(200, lambda label: None), 3, [(known, 7)])
    counter.export_verdicts(verdicts[:2], [NO_INCREMENT] * 2)

    def counted(mode: str) -> float:
        return registry.get_sample_value("mast_new_failure_signatures_total", {
            "service": "svc", "agent": "agent 'x'", "failure_mode": mode, "category": "FC1" if mode == "FM-1.3"
            else "FC3"}) or 0.0

    assert counted("FM-1.3") == 0  # two runs: not yet recurring
    counter.export_verdicts(verdicts[2:], [NO_INCREMENT] * 3)
    assert counted("FM-1.3") == 1  # the third run makes it new; the fourth and fifth add nothing
    judged = make_verdict(trace=9, modes=("FM-3.3",))
    judged.findings["FM-3.3"] = Finding("FM-3.3", 0.8, [], "the judge says so", basis="judge")
    for _ in range(3):
        counter.export_verdicts([judged], [NO_INCREMENT])
    assert counted("FM-3.3") == 0


def test_a_signature_recurring_over_replicas_is_counted_from_the_store(tmp_path) -> None:
    """Two replicas writing to one store each see a loop twice: neither reaches 3 runs alone; read back from the
    store (every `signature_refresh`), the four runs make it new on both, once each."""
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        verdicts = [make_verdict(trace=t) for t in range(4)]
        replicas = [(CollectorRegistry(), verdicts[:2]), (CollectorRegistry(), verdicts[2:])]
        counters = [NewSignatures(registry, LabelLimiter(200, lambda label: None), 3, store.known_signatures())
                    for registry, _ in replicas]
        for counter, (_, seen) in zip(counters, replicas, strict=True):
            counter.export_verdicts(seen, [NO_INCREMENT] * 2)
            store.export_verdicts(seen, [NO_INCREMENT] * 2)
        assert store.flush()

        def counted(registry: CollectorRegistry) -> float:
            return registry.get_sample_value("mast_new_failure_signatures_total", {
                "service": "svc", "agent": "agent 'x'", "failure_mode": "FM-1.3", "category": "FC1"}) or 0.0

        assert [counted(r) for r, _ in replicas] == [0, 0]
        refreshes = [SignatureRefresh(counter, store.known_signatures, 0.05) for counter in counters]
        for refresh in refreshes:
            refresh.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(counted(r) == 0 for r, _ in replicas):
            time.sleep(0.05)
        time.sleep(0.3)  # more refreshes: the signature is counted once per replica, not once per refresh
        for refresh in refreshes:
            refresh.stop()
        assert [counted(r) for r, _ in replicas] == [1, 1]
        counters[0].export_verdicts([make_verdict(trace=9)], [NO_INCREMENT])  # a fifth run: already counted
        assert counted(replicas[0][0]) == 1
    finally:
        store.shutdown()


def test_the_refresh_reads_only_signatures_seen_lately(tmp_path) -> None:
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        now_ns = time.time_ns()
        store.export_verdicts([make_verdict(trace=1), make_verdict(trace=2, started_ns=now_ns, modes=("FM-3.3",))],
                              [NO_INCREMENT] * 2)
        assert store.flush()
        assert [k.failure_mode for k in store.known_signatures()] == ["FM-1.3", "FM-3.3"]
        assert [k.failure_mode for k in store.known_signatures(seen_within=3600)] == ["FM-3.3"]
    finally:
        store.shutdown()


def test_top_signatures_lists_and_filters_new_ones(tmp_path) -> None:
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        store.export_verdicts([make_verdict(trace=t, started_ns=1_700_000_000_000_000_000 + t) for t in (1, 2)],
                              [NO_INCREMENT] * 2)
        assert store.flush()
    finally:
        store.shutdown()
    command = [sys.executable, "-m", "mastwatch.cli", "top", "signatures", "--store-path", str(tmp_path),
               "--since", "2023-01-01"]
    listed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:6] == ["signature", "mode", "service_name", "agent_name", "runs_in_range", "runs_all_time"]
    assert len(lines) == 2 and " FM-1.3 " in lines[1] and f"{1:032x}" in lines[1]
    assert "2023-11-14 22:13:20.000 " in lines[1]  # first seen, to the millisecond
    for narrower in (["--new-since", "2024-01-01"], ["--mode", "FM-3.3"]):
        answer = subprocess.run([*command, *narrower], capture_output=True, text=True, timeout=60)
        assert answer.returncode == 0 and answer.stdout.strip() == "(no rows)", (narrower, answer.stderr)


def test_a_signature_names_the_releases_it_showed_in(tmp_path) -> None:
    """Which releases a problem shows in, within the range: one only in the newest release came with it."""
    from mastwatch.exporter.store.queries import Filters, run

    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        runs = [(1, "3.1.0", ("FM-1.3",)), (2, "3.2.0", ("FM-1.3",)), (3, "3.2.0", ("FM-1.3", "FM-3.3")),
                (4, "", ("FM-1.3",))]
        verdicts = []
        for trace, version, modes in runs:
            verdict = make_verdict(trace=trace, started_ns=1_700_000_000_000_000_000 + trace, modes=modes)
            verdict.version = version
            verdicts.append(verdict)
        store.export_verdicts(verdicts, [NO_INCREMENT] * len(verdicts))
        assert store.flush()
        rows = run(store.engine, "mastwatch", "signatures", Filters(1_690_000_000 * 10**9, 1_710_000_000 * 10**9))
        assert {r["mode"]: r["versions"] for r in rows} == {"FM-1.3": ["3.1.0", "3.2.0"], "FM-3.3": ["3.2.0"]}
    finally:
        store.shutdown()
