"""Every query of the query layer, on chDB with data, and `mastwatch top` printing them."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from mastwatch.collector.model.judgement import Assessment, Judgement
from mastwatch.exporter.store import StoreConfig, StoreExporter, queries
from mastwatch.exporter.store.queries import PARAMETERS, QUERIES, Filters, Query, run, time_bound
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
        store.export_verdicts([v], [None])
    # The judge read traces 1 and 4: it confirms FM-1.3 in 1, rejects FM-3.3 in 4, and finds FM-2.3 in 4.
    store.export_judgement(Judgement(f"{1:032x}", "ops", "sre-bot", T0 + 1, "judge-model", {
        "FM-1.3": Assessment("FM-1.3", True, 0.8, (), "same call again")}, {"FM-1.3": 0.9}))
    store.export_judgement(Judgement(f"{4:032x}", "data", "data-bot", T0 + 4, "judge-model", {
        "FM-3.3": Assessment("FM-3.3", False, 0.7, (), "the check passed"),
        "FM-2.3": Assessment("FM-2.3", True, 0.6, ("0101010101010101",), "drifted off the task")}, {"FM-3.3": 0.5}))
    assert store.flush()


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


def test_waste_by_model_and_by_tool(store) -> None:
    model, other = run(store.engine, "mastwatch", "models", RANGE)
    assert (other["agent"], other["repeated_steps"]) == ("data-bot", 2)
    assert (model["agent"], model["repeated_steps"], model["traces"]) == ("sre-bot", 5, 2)
    # input by type: uncached here, cache reads and writes beside it (`top waste`'s wasted_input_tokens is their sum)
    assert (model["wasted_uncached_input_tokens"], model["wasted_output_tokens"], model["wasted_tokens"]) == \
        (1800, 80, 1880)
    assert model["wasted_cost_usd"] == pytest.approx(0.05)
    assert len(run(store.engine, "mastwatch", "models", replace(RANGE, limit=1))) == 1
    assert run(store.engine, "mastwatch", "models", replace(RANGE, model="other-model")) == []
    assert len(run(store.engine, "mastwatch", "traces", replace(RANGE, model="other-model"))) == 0
    tools = run(store.engine, "mastwatch", "tools", RANGE)
    assert [(r["tool"], r["repeated_steps"], r["traces"], r["agents"]) for r in tools] == [
        ("kubectl", 4, 2, 1), ("search", 3, 2, 2)]
    assert tools[1]["wasted_cost_usd"] == pytest.approx(0.01)


def test_spend_by_agent_and_model_over_every_run(store) -> None:
    """Every run's spend counts, looping or not; waste is a share of it."""
    sre, data = run(store.engine, "mastwatch", "spend", RANGE)
    assert (sre["agent"], sre["model"], sre["runs"], sre["repeated"]) == ("sre-bot", "gpt-4.1-mini", 2, 5)
    assert (data["agent"], data["runs"], data["repeated"], data["unpriced_runs"]) == ("data-bot", 3, 2, 0)
    assert sre["spend_usd"] == pytest.approx(0.05 + 2 * 0.0002) and sre["wasted_usd"] == pytest.approx(0.05)
    assert data["spend_usd"] == pytest.approx(0.01 + 2 * 0.0004 + 3 * 0.0002)
    assert data["wasted_share"] == pytest.approx(0.01 / data["spend_usd"], abs=1e-4)
    assert (data["input_token_count"], data["output_token_count"]) == (3 * 1200, 3 * 60)
    assert run(store.engine, "mastwatch", "spend", replace(RANGE, model="other-model")) == []


def test_judge_verdicts_by_mode(store) -> None:
    rows = run(store.engine, "mastwatch", "judge", RANGE)
    assert [(r["failure_mode"], r["judged"], r["confirmed"], r["rejected"], r["found"], r["agreement"])
            for r in rows] == [("FM-1.3", 1, 1, 0, 0, 1.0), ("FM-2.3", 1, 0, 0, 1, 0.0), ("FM-3.3", 1, 0, 1, 0, 0.0)]


def test_failure_modes_with_their_share_of_traces(store) -> None:
    rows = run(store.engine, "mastwatch", "failures", RANGE)
    assert [(r["failure_mode"], r["traces"], r["share"], r["agents"]) for r in rows] == [
        ("FM-1.3", 3, 0.6, 2), ("FM-2.3", 1, 0.2, 1), ("FM-3.3", 1, 0.2, 1)]
    assert rows[2]["name"] == "Incorrect verification" and rows[2]["category"] == "FC3"
    assert rows[1]["basis"] == "judge" and rows[1]["latest_reason"] == "found by the judge"  # its reasoning: content
    data = run(store.engine, "mastwatch", "failures", Filters(T0, T0 + DAY, service="data"))
    third = pytest.approx(1 / 3, abs=1e-4)
    assert [(r["failure_mode"], r["share"]) for r in data] == [("FM-1.3", third), ("FM-2.3", third),
                                                               ("FM-3.3", third)]


def test_failing_traces_filtered_by_mode_and_time(store) -> None:
    rows = run(store.engine, "mastwatch", "traces", RANGE)
    assert [int(r["trace_id"], 16) for r in rows] == [1, 2, 3, 4]  # most wasteful first; the healthy one is not
    assert rows[0]["started"] == "2026-01-01 00:00:00.000" and rows[0]["failure_modes"] == ["FM-1.3"]  # to the ms
    (fm33,) = run(store.engine, "mastwatch", "traces", Filters(T0, T0 + DAY, mode="FM-3.3"))
    assert fm33["trace_id"] == f"{4:032x}"
    past = run(store.engine, "mastwatch", "traces", Filters(T0 - 4 * DAY, T0))
    assert [int(r["trace_id"], 16) for r in past] == [6]
    assert len(run(store.engine, "mastwatch", "traces", Filters(T0, T0 + DAY, limit=2))) == 2


def test_agents_by_their_share_of_runs_failing_any_mode_or_one(store) -> None:
    rows = run(store.engine, "mastwatch", "agents", RANGE)
    assert [(r["agent"], r["runs"], r["failing_runs"], r["failing_share"]) for r in rows] == [
        ("sre-bot", 2, 2, 1.0), ("data-bot", 3, 2, 0.6667)]  # trace 6 is before the range; trace 5 healthy
    assert rows[0]["top_modes"] == ["FM-1.3"] and rows[0]["wasted_usd"] == 0.05
    fm33 = run(store.engine, "mastwatch", "agents", Filters(T0, T0 + DAY, mode="FM-3.3"))
    assert [(r["agent"], r["failing_runs"], r["failing_share"]) for r in fm33] == [("data-bot", 1, 0.3333),
                                                                                  ("sre-bot", 0, 0.0)]


def test_runs_lists_every_run_the_most_model_calls_first(store) -> None:
    assert {int(r["trace_id"], 16) for r in run(store.engine, "mastwatch", "runs", RANGE)} == {1, 2, 3, 4, 5}
    for trace, calls in ((21, 2), (22, 9), (23, 5)):  # healthy runs of another agent, long and short
        verdict = make_verdict(trace, "ops", "long-bot", T0 + trace, (), modes=())
        verdict.llm_calls = calls
        store.export_verdicts([verdict], [None])
    assert store.flush()
    rows = run(store.engine, "mastwatch", "runs", Filters(T0, T0 + DAY, agent="long-bot"))
    assert [(int(r["trace_id"], 16), r["llm_calls"], r["failure_modes"]) for r in rows] == [
        (22, 9, []), (23, 5, []), (21, 2, [])]
    assert rows[0]["seconds"] == 1.0 and rows[0]["started"] == "2026-01-01 00:00:00.000"


def test_each_release_against_the_one_before_in_its_environment(store) -> None:
    """Per agent and environment, newest release first: its share of failing runs and whether it moved beyond chance
    from the release before (two-proportion z-test); runs that named no version are a release of their own ('')."""
    releases = [("production", "1.0", 40, 4), ("production", "1.1", 40, 16), ("production", "1.2", 12, 5),
                ("production", "1.3", 20, 0), ("staging", "1.1", 15, 1)]
    verdicts, trace = [], 100
    for order, (environment, version, runs, failing) in enumerate(releases):
        for i in range(runs):
            trace += 1
            verdict = make_verdict(trace, "ops", "sre-bot", T0 + order * 3_600 * 10**9 + i, (),
                                   modes=("FM-3.3",) if i < failing else ())
            verdict.version, verdict.environment = version, environment
            verdicts.append(verdict)
    store.export_verdicts(verdicts, [None] * len(verdicts))
    assert store.flush()
    rows = run(store.engine, "mastwatch", "versions", replace(RANGE, agent="sre-bot"))
    assert [(r["environment"], r["version"], r["runs"], r["failing_runs"], r["previous_version"],
             r["share_change"], r["against_previous"]) for r in rows] == [
        ("", "", 2, 2, "", 0, ""),  # the fixture's runs, which named no release
        ("production", "1.3", 20, 0, "1.2", -0.4167, "better"),
        ("production", "1.2", 12, 5, "1.1", 0.0167, "same"),
        ("production", "1.1", 40, 16, "1.0", 0.3, "worse"),
        ("production", "1.0", 40, 4, "", 0, ""),
        ("staging", "1.1", 15, 1, "", 0, "")]
    assert rows[3]["top_modes"] == ["FM-3.3"] and rows[3]["failing_share"] == 0.4
    assert [r["zscore"] for r in rows] == [0, -3.14, 0.1, 3.1, 0, 0]  # 0.3 over its standard error of 0.0968
    assert rows[3]["first_run"] == "2026-01-01 01:00:00.000"
    # the dashboards' markers: where each release first ran, if that is in the range
    markers = store.query(PARAMETERS.render(queries.RELEASE_MARKERS, "mastwatch"),
                          Filters(T0 + 5_400 * 10**9, T0 + DAY, agent="sre-bot").params())
    assert [r["text"] for r in markers] == ["sre-bot 1.2 in production", "sre-bot 1.3 in production",
                                            "sre-bot 1.1 in staging"]
    newest_runs = [make_verdict(trace + i, "ops", "sre-bot", T0 + 9 * 3_600 * 10**9 + i, (), modes=())
                for i in range(1, 6)]
    for verdict in newest_runs:
        verdict.version, verdict.environment = "1.4", "production"
    store.export_verdicts(newest_runs, [None] * len(newest_runs))
    assert store.flush()
    newest = run(store.engine, "mastwatch", "versions", replace(RANGE, agent="sre-bot"))[1]
    assert (newest["version"], newest["previous_version"], newest["against_previous"]) == ("1.4", "1.3",
                                                                                           "too few runs")
    assert run(store.engine, "mastwatch", "versions", replace(RANGE, service="nope")) == []
    looping = run(store.engine, "mastwatch", "versions", replace(RANGE, agent="sre-bot", mode="FM-1.3"))
    assert [(r["version"], r["failing_runs"], r["top_modes"]) for r in looping][:3] == [
        ("", 2, ["FM-1.3"]), ("1.4", 0, []), ("1.3", 0, [])]  # no release's runs loop: only the fixture's


def test_the_newest_release_against_the_one_before_is_a_series_per_agent_and_environment(store) -> None:
    """mast_release_failure_zscore: only each group's newest release, once it and the one before have 10 runs."""
    from prometheus_client import CollectorRegistry, generate_latest

    from mastwatch.exporter.releases import ReleaseComparison
    from mastwatch.exporter.totals import LabelLimiter

    def release(trace: int, version: str, environment: str, runs: int, failing: int, hour: int) -> list:
        made = [make_verdict(trace + i, "support", "support-agent", T0 + hour * 3_600 * 10**9 + i, (),
                             modes=("FM-3.3",) if i < failing else ()) for i in range(runs)]
        for verdict in made:
            verdict.version, verdict.environment = version, environment
        return made

    verdicts = [*release(100, "3.1.0", "production", 30, 3, 1), *release(200, "3.2.0", "production", 30, 15, 2),
                *release(300, "3.1.0", "staging", 30, 3, 1), *release(400, "3.2.0", "staging", 5, 5, 2)]
    store.export_verdicts(verdicts, [None] * len(verdicts))
    assert store.flush()
    registry = CollectorRegistry()
    releases = ReleaseComparison(registry, LabelLimiter(200, lambda label: None))
    rows = run(store.engine, "mastwatch", "versions", replace(RANGE, limit=10_000))
    releases.update(rows, now=T0 / 1e9 + 3 * 3600)  # the newest release's last run an hour ago
    series = [line for line in generate_latest(registry).decode().splitlines() if not line.startswith("#")]
    assert series == ['mast_release_failure_zscore{agent="support-agent",environment="production",'
                      'previous_version="3.1.0",service="support",version="3.2.0"} 3.38']  # 0.4 over 0.118
    releases.update(rows, now=T0 / 1e9 + 3 * 3600 + 60)  # and no run since: rolled back, or not run any more
    assert "mast_release_failure_zscore{" not in generate_latest(registry).decode()


def test_every_query_has_a_test() -> None:
    tested = {"agents", "spend", "waste", "models", "tools", "failures", "traces", "judge", "signatures", "versions",
              "reviews",  # tests/test_reviews.py
              "mutes",  # tests/test_mutes.py
              "resolutions",  # tests/test_resolutions.py
              "runs"}
    assert set(QUERIES) == tested


def test_every_query_renders_for_the_cli_and_returns_rows(store) -> None:
    """The dashboards' queries too: each runs with query parameters, with rows (the dashboards run them with
    Grafana's macros in tests/test_live_queries.py)."""
    every = {name: value for name, value in vars(queries).items() if isinstance(value, Query)}
    assert len(every) == 25 and set(QUERIES.values()) <= set(every.values())
    for name, query in every.items():
        rows = store.query(PARAMETERS.render(query, "mastwatch"), RANGE.params())
        # one lists agents with 10 runs or more, two the signatures muted or marked fixed, one the runs' releases
        # (their own tests have some)
        assert rows or name in ("AGENTS_BY_FAILURE_RATE", "MUTES", "RESOLUTIONS", "RELEASE_MARKERS"), name
        if query.format == "timeseries":
            assert next(iter(rows[0])) == "time" and isinstance(list(rows[0].values())[-1], int | float), name
    recent = store.query(PARAMETERS.render(queries.RECENT_FAILING_TRACES, "mastwatch"), RANGE.params())
    by_trace = {int(r["trace_id"], 16): r for r in recent}
    assert by_trace[4]["modes"] == "FM-2.3 FM-3.3" and by_trace[4]["evidence_spans"] == \
        "0101010101010101 0202020202020202"
    assert by_trace[4]["reasons"].startswith("FM-2.3 (judge): found by the judge | FM-3.3 (structure): ")


def test_a_dialect_without_modes_refuses_the_mode_query() -> None:
    from mastwatch.dashboards.clickhouse import FLEET

    with pytest.raises(ValueError, match="failure mode"):
        FLEET.render(queries.TRACES, "mastwatch")
    assert "{" not in FLEET.render(queries.RECENT_FAILING_TRACES, "mastwatch").replace("${", "")


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


def filled_for_the_cli(path, *queries: str) -> tuple[list[str], list[list[dict]]]:
    """A store in `path` filled and closed (the CLI opens it), `mastwatch top` on the filled day, and what `queries`
    returned while it was open."""
    store = StoreExporter(StoreConfig(path=str(path), flush_interval=0.05))
    try:
        fill(store)
        results = [run(store.engine, "mastwatch", name, RANGE) for name in queries]
    finally:
        store.shutdown()
    return [sys.executable, "-m", "mastwatch.cli", "top", "--store-path", str(path), "--since", "2026-01-01",
            "--until", "2026-01-02"], results


def test_top_prints_aligned_tables(tmp_path) -> None:
    top, _ = filled_for_the_cli(tmp_path)
    out = subprocess.run([*top, "waste", "--agent", "sre-bot"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    header, kubectl, search = out.stdout.splitlines()
    assert header.split()[:4] == ["service", "agent", "tool", "repeated_steps"]
    assert kubectl.split()[:4] == ["ops", "sre-bot", "kubectl", "4"]
    assert header.index("repeated_steps") + len("repeated_steps") == kubectl.index(" 4 ") + 2  # right-aligned
    assert search.split()[2] == "search"
    out = subprocess.run([*top, "traces", "--mode", "FM-3.3"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.splitlines()[1].startswith(f"{4:032x}  2026-01-01 00:00:00.000  ")
    out = subprocess.run([*top, "failures", "--since", "nonsense"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "nonsense" in out.stderr


def test_top_on_a_store_an_older_version_wrote_says_how_to_upgrade_it(tmp_path) -> None:
    from mastwatch.exporter.store.chdb_engine import ChdbEngine

    top, _ = filled_for_the_cli(tmp_path)
    engine = ChdbEngine(str(tmp_path))
    engine.command("DROP TABLE mastwatch.mast_model_spend")  # as a store written before spend per model
    engine.close()
    out = subprocess.run([*top, "spend"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "has no table mast_model_spend yet" in out.stderr and "mastwatch serve" in out.stderr
    assert "query failed" not in out.stderr
    out = subprocess.run([*top, "waste"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("service")  # the other queries read on
    out = subprocess.run([*top, "waste", "--set", "exporters.store.database=elsewhere"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "no database elsewhere with mastwatch's tables" in out.stderr


def test_top_writes_csv_and_json_lines_for_spreadsheets_and_scripts(tmp_path) -> None:
    import csv
    import json

    top, (expected, traces) = filled_for_the_cli(tmp_path, "spend", "traces")
    out = subprocess.run([*top, "spend", "--format", "json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == expected
    out = subprocess.run([*top, "traces", "--format", "csv"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(out.stdout.splitlines()))
    assert [r["trace_id"] for r in rows] == [t["trace_id"] for t in traces]
    assert rows[0]["failure_modes"] == ",".join(traces[0]["failure_modes"])  # a list: its items joined
    assert float(rows[0]["cost_usd"]) == pytest.approx(traces[0]["cost_usd"])
    out = subprocess.run([*top, "spend", "--model", "nope", "--format", "csv"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout == ""  # no rows: nothing, not a table's "(no rows)"


def test_repeats_without_a_price_are_counted_apart_from_free_ones(tmp_path) -> None:
    """A model genai-prices does not know prices its calls at 0 USD: top waste and top models count those repeats,
    so that a loop on a fine-tuned model does not read as free."""
    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        store.export_verdicts([make_verdict(1, "ops", "ft-bot", T0 + 1, ("lookup", "lookup"), cost=0.0),
                               make_verdict(2, "ops", "sre-bot", T0 + 2, ("kubectl", "kubectl"), cost=0.03)],
                              [None, None])
        assert store.flush()
        for name in ("waste", "models"):
            rows = {r["agent"]: r for r in run(store.engine, "mastwatch", name, RANGE)}
            assert (rows["ft-bot"]["unpriced_repeats"], rows["ft-bot"]["wasted_cost_usd"]) == (1, 0), name
            assert rows["sre-bot"]["unpriced_repeats"] == 0, name
    finally:
        store.shutdown()
