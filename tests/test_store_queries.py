"""Every query of the query layer, on chDB with data, and `mastwatch top` printing them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mastwatch.exporter.store import StoreConfig, StoreExporter
from mastwatch.exporter.store.queries import QUERIES, Filters, run, time_bound
from tests.test_store import make_verdict

DAY = 86_400 * 10**9
T0 = 1_767_225_600 * 10**9  # 2026-01-01 00:00 UTC


def fill(store: StoreExporter) -> None:
    """Two days of verdicts: sre-bot loops on kubectl (expensive), data-bot on search, one trace in the past."""
    verdicts = [
        make_verdict(1, "ops", "sre-bot", T0 + 1, ("kubectl", "kubectl", "kubectl"), cost=0.03),
        make_verdict(2, "ops", "sre-bot", T0 + 2, ("kubectl", "search"), cost=0.02),
        make_verdict(3, "data", "data-bot", T0 + 3, ("search", "search"), cost=0.01),
        make_verdict(4, "data", "data-bot", T0 + 4, (), modes=("FM-3.3",)),
        make_verdict(5, "data", "data-bot", T0 + 5, (), modes=()),  # healthy
        make_verdict(6, "ops", "sre-bot", T0 - 3 * DAY, ("kubectl", "kubectl"), cost=0.5),  # before the range
    ]
    for v in verdicts:
        store.export_verdict(v, None)
    assert store.flush()


@pytest.fixture
def store(tmp_path):  # one chDB store per process at a time: not shared with the CLI test's
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    fill(store)
    yield store
    store.shutdown()


RANGE = Filters(T0, T0 + DAY)


def test_waste_by_agent_then_tool(store) -> None:
    rows = run(store.engine, "mastwatch", "waste", RANGE)
    assert [(r["agent"], r["tool"], r["repeated_steps"], r["traces"]) for r in rows] == [
        ("sre-bot", "kubectl", 4, 2), ("sre-bot", "search", 1, 1), ("data-bot", "search", 2, 1)]
    sre = rows[0]
    assert (sre["wasted_cost_usd"], sre["agent_wasted_cost_usd"]) == (pytest.approx(0.05), pytest.approx(0.05))
    assert (sre["wasted_input_tokens"], sre["wasted_output_tokens"]) == (1800, 80)  # two model calls charged
    assert rows[2]["agent_wasted_cost_usd"] == pytest.approx(0.01)
    only = run(store.engine, "mastwatch", "waste", Filters(T0, T0 + DAY, agent="data-bot"))
    assert [r["tool"] for r in only] == ["search"]
    assert run(store.engine, "mastwatch", "waste", Filters(T0, T0 + DAY, service="nope")) == []


def test_failure_modes_with_their_share_of_traces(store) -> None:
    rows = run(store.engine, "mastwatch", "failures", RANGE)
    assert [(r["failure_mode"], r["traces"], r["share"], r["agents"]) for r in rows] == [
        ("FM-1.3", 3, 0.6, 2), ("FM-3.3", 1, 0.2, 1)]
    assert rows[1]["name"] == "Incorrect verification" and rows[1]["category"] == "FC3"
    data = run(store.engine, "mastwatch", "failures", Filters(T0, T0 + DAY, service="data"))
    assert [(r["failure_mode"], r["share"]) for r in data] == [("FM-1.3", pytest.approx(1 / 3, abs=1e-4)),
                                                               ("FM-3.3", pytest.approx(1 / 3, abs=1e-4))]


def test_failing_traces_filtered_by_mode_and_time(store) -> None:
    rows = run(store.engine, "mastwatch", "traces", RANGE)
    assert [int(r["trace_id"], 16) for r in rows] == [1, 2, 3, 4]  # most wasteful first; the healthy one is not
    assert rows[0]["started"] == "2026-01-01 00:00:00.000000001" and rows[0]["failure_modes"] == ["FM-1.3"]
    (fm33,) = run(store.engine, "mastwatch", "traces", Filters(T0, T0 + DAY, mode="FM-3.3"))
    assert fm33["trace_id"] == f"{4:032x}"
    past = run(store.engine, "mastwatch", "traces", Filters(T0 - 4 * DAY, T0))
    assert [int(r["trace_id"], 16) for r in past] == [6]
    assert len(run(store.engine, "mastwatch", "traces", Filters(T0, T0 + DAY, limit=2))) == 2


def test_every_query_has_a_test() -> None:
    tested = {"waste", "failures", "traces"}
    assert set(QUERIES) == tested


def test_time_bounds() -> None:
    now = T0
    assert time_bound("now", now) == now
    assert time_bound("24h", now) == now - DAY
    assert time_bound("7d", now) == now - 7 * DAY
    assert time_bound("90m", now) == now - 90 * 60 * 10**9
    assert time_bound("2026-01-01", now) == T0
    assert time_bound("2026-01-01T12:00:00.5Z", now) == T0 + DAY // 2 + 500_000_000
    with pytest.raises(ValueError):
        time_bound("yesterday", now)


def test_top_prints_aligned_tables(tmp_path) -> None:
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        fill(store)
    finally:
        store.shutdown()
    top = [sys.executable, "-m", "mastwatch.cli", "top", "--store-path", str(tmp_path), "--since", "2026-01-01",
           "--until", "2026-01-02"]
    out = subprocess.run([*top, "waste", "--agent", "sre-bot"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    header, kubectl, search = out.stdout.splitlines()
    assert header.split()[:4] == ["service", "agent", "tool", "repeated_steps"]
    assert kubectl.split()[:4] == ["ops", "sre-bot", "kubectl", "4"]
    assert header.index("repeated_steps") + len("repeated_steps") == kubectl.index(" 4 ") + 2  # right-aligned
    assert search.split()[2] == "search"
    out = subprocess.run([*top, "traces", "--mode", "FM-3.3"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.splitlines()[1].startswith(f"{4:032x}  2026-01-01 00:00:00.000000004")
    out = subprocess.run([*top, "failures", "--since", "nonsense"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "nonsense" in out.stderr
