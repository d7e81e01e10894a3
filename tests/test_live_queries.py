"""Every query of the dashboards and rules, run for real: the demo fleet sends OTLP to a running mastwatch, a real
Prometheus (Debian's `prometheus`) scrapes it every second and evaluates the generated rules; each Prometheus
panel query goes through its HTTP API as Grafana sends it, each ClickHouse panel query runs on the chDB store
with Grafana's macros expanded, and the report renders from the same store."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mastwatch.config import Config
from mastwatch.dashboards import report, rules
from mastwatch.dashboards.generate import dashboards
from mastwatch.dashboards.macros import ALL, TimeRange, Variable, expand_promql, expand_sql
from mastwatch.dashboards.panels import CLICKHOUSE, PROMETHEUS
from mastwatch.demo import run_fleet
from mastwatch.service import Service
from tests.conftest import prometheus_process, server_config

# The scrape adds deployment labels, as a Kubernetes one does: the dashboards' topology variables select on them.
SCRAPE_LABELS = {"cluster": "test-cluster", "namespace": "agents"}
ANY_DEPLOYMENT = {label: Variable(ALL, all_value=".*") for label in Config().dashboards.topology_labels}
FLEET_VARS = {**ANY_DEPLOYMENT, "service": Variable(ALL, all_value=".*")}
AGENT_VARS = {**ANY_DEPLOYMENT, "service": Variable("sre-agents"), "agent": Variable("sre-bot"),
              "model": Variable(ALL, all_value=".*")}
VARIABLES = {"mastwatch-failure-modes": FLEET_VARS, "mastwatch-repeated-spend": FLEET_VARS,
             "mastwatch-agent": AGENT_VARS,
             "mastwatch-health": {**ANY_DEPLOYMENT, "instance": Variable(ALL, all_value=".*")}}
# What the demo never produces: rejected spans, and the judge's verdicts (it runs no judge; tests/test_store_queries.py
# runs that query on judgements).
MAY_BE_EMPTY = {"Rejected", "Rejections by reason"}
# without the judge; nothing muted or marked fixed
# With a failure budget, so that its panels and rules are run too: one on any failure, which the demo's runs show.
WITH_SLO = Config.model_validate({"rules": {"slos": [{"name": "runs", "objective": 0.9}]}})
STORE_MAY_BE_EMPTY = {"Judge verdicts by mode (sampled)", "Muted problems", "Fixed problems"}


@dataclass
class Live:
    config: Config
    service: Service
    prometheus: str
    started: float

    def api(self, path: str, **params: str) -> dict[str, Any]:
        url = f"{self.prometheus}{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # 400 bad_data: the query does not parse
            return json.load(e)

    def window(self, variables: dict[str, Variable]) -> TimeRange:
        now = int(time.time())
        return TimeRange(int(self.started) - 5, now, interval_s=2, rate_interval="10s", variables=variables)

    def promql(self, target: dict[str, Any], variables: dict[str, Variable]) -> dict[str, Any]:
        window = self.window(variables)
        expr = expand_promql(target["expr"], window)
        if target["instant"]:
            return self.api("/api/v1/query", query=expr, time=str(window.end))
        return self.api("/api/v1/query_range", query=expr, start=str(window.end - 30), end=str(window.end), step="2")

    def sql(self, query: str, variables: dict[str, Variable]) -> list[dict[str, Any]]:
        now = int(time.time())
        return self.service.store.query(expand_sql(query, TimeRange(now - 600, now + 60, 10, variables=variables)))


def _has_data(answer: dict[str, Any]) -> bool:
    result = answer["data"]["result"]
    if answer["data"]["resultType"] == "matrix":
        return any(v != "NaN" for series in result for _, v in series["values"])
    return any(series["value"][1] != "NaN" for series in result)


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("live")
    config = server_config(tmp, rules__slos=WITH_SLO.model_dump()["rules"]["slos"])
    service = Service(config)
    service.start()
    stop = threading.Event()
    fleet = threading.Thread(target=run_fleet, args=(f"127.0.0.1:{service.grpc.port}",
                                                     f"127.0.0.1:{service.http.port}", stop),
                             kwargs={"pace": 0.02, "seed": 7, "delay_ms": 200}, daemon=True)
    started = time.time()
    fleet.start()
    host, port = service.metrics_address
    try:
        with prometheus_process(tmp, {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules.write(config, tmp / "rules"))],
                "scrape_configs": [{"job_name": "mastwatch", "static_configs": [{"targets": [f"{host}:{port}"],
                                                                                  "labels": SCRAPE_LABELS}]}]}) as url:
            live = Live(config, service, url, started)
            deadline = time.monotonic() + 30
            while True:  # ready, scraping, and the demo's loops counted
                try:
                    # 503 while its storage starts (an HTTPError, an OSError), when the query API answers no JSON
                    urllib.request.urlopen(f"{live.prometheus}/-/ready", timeout=5).close()
                    answer = live.api("/api/v1/query", query="sum(rate(mast_wasted_cost_usd_total[10s])) > 0")
                    if answer["data"]["result"]:
                        break
                except OSError:
                    pass
                assert time.monotonic() < deadline, (tmp / "prometheus.log").read_text()[-2000:]
                time.sleep(0.2)
            yield live
    finally:
        stop.set()
        fleet.join(30)
        service.stop()


def _targets(datasource: dict[str, str]) -> Iterator[tuple[str, dict, dict]]:
    for uid, board in dashboards(WITH_SLO).items():
        for panel in board["panels"]:
            if panel["type"] != "row" and panel["datasource"] == datasource:
                for target in panel["targets"]:
                    yield uid, panel, target


def test_every_prometheus_panel_query_parses_and_returns_what_the_demo_produced(live: Live) -> None:
    targets = list(_targets(PROMETHEUS))
    assert len(targets) > 60
    deadline = time.monotonic() + 40
    while True:  # wait for data: rates need two scrapes, ranges need the demo's runs to finish
        with_data = set()  # panels with data in at least one of their queries
        for uid, panel, target in targets:
            answer = live.promql(target, VARIABLES[uid])
            assert answer["status"] == "success", (uid, panel["title"], target["expr"], answer)
            if _has_data(answer):
                with_data.add((uid, panel["title"]))
        missing = {(uid, p["title"]) for uid, p, _ in targets if p["title"] not in MAY_BE_EMPTY} - with_data
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert not missing, f"panels without data: {sorted(missing)}"


def test_variable_queries_return_the_demo_agents(live: Live) -> None:
    values = {}
    for board in dashboards(Config()).values():
        for var in board["templating"]["list"]:
            if var["type"] == "datasource":  # a data source picker: nothing to query
                continue
            metric, label = var["query"][len("label_values("):-1].rsplit(", ", 1)
            metric = metric.replace("$service", "sre-agents").replace("$agent", "sre-bot")
            for deployment_label in ANY_DEPLOYMENT:
                metric = metric.replace(f"${deployment_label}", ".*")
            answer = live.api(f"/api/v1/label/{label}/values", **{"match[]": metric})
            assert answer["status"] == "success" and answer["data"], var["query"]
            values[var["name"]] = set(answer["data"])
    assert values["agent"] == {"sre-bot"} and values["model"] == {"gpt-4.1-mini"}
    assert values["service"] == {"sre-agents", "support", "coding", "internal-tools"}
    assert (values["cluster"], values["namespace"], values["job"]) == ({"test-cluster"}, {"agents"}, {"mastwatch"})


def test_a_chosen_deployment_selects_every_panel(live: Live) -> None:
    """Set to another job, every panel is empty (but the alert count's `or vector(0)`); set to this one, a panel
    that drew data still does. So no panel forgets the deployment's matchers."""
    elsewhere = {**ANY_DEPLOYMENT, "job": Variable("elsewhere")}
    here = {**ANY_DEPLOYMENT, "cluster": Variable("test-cluster"), "job": Variable("mastwatch")}
    checked = 0
    for uid, panel, target in _targets(PROMETHEUS):
        if "or vector(0)" in target["expr"]:
            continue
        answer = live.promql(target, {**VARIABLES[uid], **elsewhere})
        assert answer["status"] == "success" and not _has_data(answer), (uid, panel["title"], target["expr"])
        if _has_data(live.promql(target, VARIABLES[uid])):
            assert _has_data(live.promql(target, {**VARIABLES[uid], **here})), (uid, panel["title"])
            checked += 1
    assert checked > 40


def test_every_rule_loads_and_evaluates(live: Live) -> None:
    deadline = time.monotonic() + 20
    while True:
        groups = live.api("/api/v1/rules")["data"]["groups"]
        loaded = [r for g in groups for r in g["rules"]]
        if (loaded and all(r.get("lastEvaluation", "").startswith("20") for r in loaded)) or \
                time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(loaded) == len(rules.recording(live.config)) + len(rules.alerts(live.config)) + \
        len(rules.gateway_alerts(live.config)) + len(rules.slo_rules(live.config))
    for rule in loaded:
        assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))
        answer = live.api("/api/v1/query", query=rule["query"])
        assert answer["status"] == "success", (rule["name"], answer)
    deadline = time.monotonic() + 20
    while True:  # the recording rule needs two scrapes of a mode's series after its first trace
        recorded = live.api("/api/v1/query", query="service_agent_failure_mode:mast_failure_mode_traces:ratio_rate5m")
        modes = {r["metric"]["failure_mode"] for r in recorded["data"]["result"]}
        if "FM-1.3" in modes or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "FM-1.3" in modes


def test_every_clickhouse_panel_query_runs_on_the_store(live: Live) -> None:
    targets = list(_targets(CLICKHOUSE))
    assert len(targets) == 35
    live.service.store.flush()
    from mastwatch.exporter.store.mutes import Mute, set_mute
    from mastwatch.exporter.store.resolutions import Resolution, set_resolution
    from mastwatch.exporter.store.reviews import Review, add_review

    (looping,) = live.sql("SELECT trace_id, signature FROM mastwatch.mast_findings WHERE failure_mode = 'FM-1.3' "
                          "AND basis != 'judge' AND agent = 'sre-bot' LIMIT 1", {})  # the agent dashboard's
    engine = live.service.store.engine
    add_review(engine, "mastwatch", Review(looping["trace_id"], "FM-1.3", "dismissed", "sre", "a poll"))
    set_mute(engine, "mastwatch", Mute(looping["signature"], changed_by="sre", note="polls by design"))
    set_resolution(engine, "mastwatch", Resolution(looping["signature"], changed_by="dev", note="new prompt"))
    for uid, panel, target in targets:
        rows = live.sql(target["rawSql"], VARIABLES[uid])
        assert rows or panel["title"] in STORE_MAY_BE_EMPTY, (uid, panel["title"])
        if panel["title"] == "Reviews by mode (store)" and uid == "mastwatch-failure-modes":
            assert {(r["failure_mode"], r["dismissed"], r["latest_dismissal"]) for r in rows if r["reviewed"]} == {
                ("FM-1.3", 1, "a poll")}
        if panel["title"] == "Failure signatures" and uid == "mastwatch-agent":  # the agent's own
            assert {r["agent_name"] for r in rows} == {"sre-bot"}
            assert {r["muted"] for r in rows if r["signature"] == looping["signature"]} == {"yes"}
        if panel["title"] == "Releases" and uid == "mastwatch-agent":
            assert {(r["agent"], r["runs"] > 0) for r in rows} == {("sre-bot", True)}
        if panel["title"] == "Fixed problems":  # (empty where nothing is marked fixed)
            assert [(r["signature"], r["resolved_by"]) for r in rows] == [(looping["signature"], "dev")]
        if panel["title"] == "Muted problems":  # (empty where nothing is muted)
            assert [(r["signature"], r["muted_by"], r["note"]) for r in rows] == [
                (looping["signature"], "sre", "polls by design")]
        if panel["title"] == "Findings by mode" and uid == "mastwatch-failure-modes":  # what SREs page on
            assert {"FM-1.3", "FM-1.5", "FM-3.2", "FM-3.3"} <= {r["failure_mode"] for r in rows}
        if target["format"] == 0:  # time series: a time column, a label, a number
            assert next(iter(rows[0])) == "time" and isinstance(list(rows[0].values())[-1], int | float)
    markers = [(uid, a) for uid, board in dashboards(WITH_SLO).items() for a in board["annotations"]["list"]]
    assert [(uid, a["name"]) for uid, a in markers] == [("mastwatch-agent", "Releases")]
    for uid, a in markers:  # the demo's sre-bot names its release
        assert [(set(r), r["text"]) for r in live.sql(a["target"]["rawSql"], VARIABLES[uid])] == [
            ({"time", "text"}, "sre-bot 1.0.0 in demo")]
    set_mute(engine, "mastwatch", Mute(looping["signature"], muted=False))  # the other tests count it again
    set_resolution(engine, "mastwatch", Resolution(looping["signature"], resolved=False))
    one_model = {**AGENT_VARS, "model": Variable(["gpt-4.1-mini"])}
    other_model = {**AGENT_VARS, "model": Variable(["gpt-4o"])}
    recent = next(t for uid, p, t in targets if uid == "mastwatch-agent" and p["title"] == "Recent traces")
    assert live.sql(recent["rawSql"], one_model) and not live.sql(recent["rawSql"], other_model)


def test_the_report_renders_the_store_panels(live: Live, tmp_path: Path) -> None:
    live.service.store.flush()
    now = int(time.time())
    results, chosen = report.run(live.service.store.query, live.config, now - 86400, now)
    assert len(results) == len(report.panels(live.config)) == 19
    assert all(rows or panel["title"] in STORE_MAY_BE_EMPTY for _, panel, rows in results)
    # a day asked for, the demo's minute drawn: the range starts at its first run, in buckets of seconds
    assert chosen.end - chosen.start < 600 and chosen.interval_s <= 30
    page = report.render_html(results, live.config, "over the last 24h", chosen.interval_s)
    assert f"per {chosen.interval_s} s" in page and "time (UTC)" in page
    unpriced = [r for _, panel, rows in results if panel["title"] == "Wasted spend by agent (store)" for r in rows
                if not r["wasted_usd"] and r["wasted_tokens"]]
    unpriced += [r for _, panel, rows in results if panel["title"] == "Spend and waste by agent and model (store)"
                 for r in rows if not r["spend_usd"] and r["input_token_count"]]
    assert ("unpriced model" in page) == bool(unpriced)
    assert page.count("<svg") == 11 and "Costliest looping runs" in page and "Tools repeated most (store)" in page
    assert "Spend and waste by agent and model (store)" in page and "Spend by model (store)" in page
    assert "Reviews by mode (store)" in page
    assert "final answer claims success" in page  # FM-3.3's latest reason, in the findings by mode
    assert re.search(r"FM-\d\.\d \((content|structure)\): \w", page)  # recent traces: each mode's basis and reason
    assert 'href="http://localhost:16686/trace/' in page and "$__" not in page
    png = tmp_path / "report.png"
    report.render_png(results, png, chosen.interval_s)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
