"""The generated dashboards and provisioning files, checked as Grafana would load them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mastwatch.config import load
from mastwatch.dashboards.generate import dashboards
from mastwatch.dashboards.macros import ALL, TimeRange, Variable, expand_promql, expand_sql
from mastwatch.dashboards.panels import PROVISIONED

MASTWATCH = [sys.executable, "-m", "mastwatch.cli"]
UIDS = {"mastwatch-failure-modes", "mastwatch-repeated-spend", "mastwatch-agent", "mastwatch-health"}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("grafana")
    result = subprocess.run([*MASTWATCH, "dashboards", "--out", str(out), "--trace-url",
                             "http://jaeger.internal:16686/trace/{trace_id}"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return out


def _boards(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (out / "dashboards").glob("*.json")}


def _panels(board: dict) -> list[dict]:
    return [p for p in board["panels"] if p["type"] != "row"]


def test_every_dashboard_is_written_with_its_provisioning(generated: Path) -> None:
    assert set(_boards(generated)) == UIDS
    sources = yaml.safe_load((generated / "provisioning/datasources/mastwatch.yaml").read_text())
    assert {(d["type"], d["uid"]) for d in sources["datasources"]} == set(PROVISIONED.items())
    provider = yaml.safe_load((generated / "provisioning/dashboards/mastwatch.yaml").read_text())
    assert provider["apiVersion"] == 1 and provider["providers"][0]["type"] == "file"
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards/mastwatch"


def test_panel_ids_are_unique_and_the_grid_has_no_overlaps(generated: Path) -> None:
    for uid, board in _boards(generated).items():
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)) and all(ids), uid
        cells: dict[tuple[int, int], str] = {}
        for p in board["panels"]:
            g = p["gridPos"]
            assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] >= 1, (uid, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    assert (x, y) not in cells, f"{uid}: {p['title']!r} overlaps {cells[(x, y)]!r}"
                    cells[(x, y)] = p["title"]


def test_schema_datasources_and_panel_settings(generated: Path) -> None:
    """Every panel and query variable reads the data source its dashboard's picker chose (`$datasource`,
    `$clickhouse`), whose default is the provisioned one: the dashboards drop into any Grafana."""
    provisioned = {(d["type"], d["uid"]) for d in
                   yaml.safe_load((generated / "provisioning/datasources/mastwatch.yaml").read_text())["datasources"]}
    for uid, board in _boards(generated).items():
        assert 36 <= board["schemaVersion"] <= 41 and board["uid"] == uid  # Grafana 10.x to 12.x
        assert board["title"].startswith("mastwatch / ") and "mastwatch" in board["tags"]
        pickers = {v["name"]: v for v in board["templating"]["list"] if v["type"] == "datasource"}
        chosen = {f"${{{name}}}": (v["query"], v["current"]["value"]) for name, v in pickers.items()}
        assert set(chosen.values()) <= provisioned
        for var in board["templating"]["list"]:
            if var["type"] != "datasource":
                assert var["datasource"]["uid"] in chosen and var["datasource"]["type"] == \
                    chosen[var["datasource"]["uid"]][0]
        for p in _panels(board):
            where = f"{uid}: {p['title']}"
            assert p["description"], where
            assert p["datasource"]["uid"] in chosen and p["datasource"]["type"] == \
                chosen[p["datasource"]["uid"]][0], where
            assert p["targets"] and all(t["datasource"] == p["datasource"] for t in p["targets"]), where
            assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), where
            if p["type"] in ("timeseries", "stat", "bargauge"):
                assert p["fieldConfig"]["defaults"]["unit"], where
                steps = p["fieldConfig"]["defaults"]["thresholds"]["steps"]
                assert steps[0]["value"] is None and all(s["value"] is not None for s in steps[1:]), where
            if p["type"] == "timeseries":
                assert p["options"]["legend"]["displayMode"] == "table", where
                assert all(t.get("legendFormat", "sql") for t in p["targets"]), where


def test_trace_ids_link_to_the_configured_trace_ui_and_to_the_trace_view(generated: Path) -> None:
    linked = 0
    for board in _boards(generated).values():
        for p in _panels(board):
            for o in p["fieldConfig"].get("overrides", []):
                if o["matcher"]["options"] == "trace_id":
                    ui, view = next(prop["value"] for prop in o["properties"] if prop["id"] == "links")
                    assert ui["url"] == "http://jaeger.internal:16686/trace/${__value.raw}"
                    assert view == {"title": "mastwatch trace view", "targetBlank": True,
                                    "url": "http://localhost:9464/traces/${__value.raw}"}
                    linked += 1
    assert linked >= 4  # recent findings (fleet, agent), costliest loops (fleet, agent), recent traces


def test_the_trace_view_link_follows_its_setting(tmp_path) -> None:
    from mastwatch.dashboards.panels import trace_link

    for url, links in (("https://mw.internal/traces/{trace_id}", 2), ("", 1)):
        config = load(None, {"dashboards": {"trace_view_url": url}}, environ={})
        shown = trace_link(config.dashboards)["properties"][0]["value"]
        assert len(shown) == links
        if links == 2:
            assert shown[1]["url"] == "https://mw.internal/traces/${__value.raw}"
    result = subprocess.run([*MASTWATCH, "dashboards", "--out", str(tmp_path), "--set",
                             "dashboards.trace_view_url=http://x/traces"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "dashboards.trace_view_url: Value error, must contain {trace_id}" in result.stderr


def test_thresholds_and_budgets_come_from_the_configuration() -> None:
    config = load(None, {"rules": {"rising": {"min_rate": 0.12}, "wasted_spend": {"budget_usd": 7,
                                                                                  "budgets": {"sre-bot": 2}}},
                         "processor": {"queue_spans": 5000}}, environ={})
    boards = dashboards(config)
    text = json.dumps(boards)
    assert "own budgets: sre-bot 2" in text and "default 7 USD" in text
    fm33 = next(p for p in boards["mastwatch-failure-modes"]["panels"] if p["title"].startswith("FM-3.3"))
    assert fm33["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 0.12
    queue = next(p for p in boards["mastwatch-health"]["panels"] if p["title"] == "Processing queue")
    # the queue's capacity is each instance's own, read from its metrics, not baked into the dashboard
    assert any("mastwatch_queue_capacity" in t["expr"] for t in queue["targets"])
    assert not any("5000" in t["expr"] for p in boards["mastwatch-health"]["panels"] for t in p.get("targets", []))


def test_bad_settings_are_clear_errors(tmp_path: Path) -> None:
    result = subprocess.run([*MASTWATCH, "dashboards", "--out", str(tmp_path), "--trace-url", "http://x/trace"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "dashboards.trace_url: Value error, must contain {trace_id}" in result.stderr
    result = subprocess.run([*MASTWATCH, "rules", "--out", str(tmp_path), "--set", "rules.rising.failure_mode=FM-9"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "rules.rising.failure_mode" in result.stderr


def test_macros_expand_as_grafana_and_the_clickhouse_plugin_do() -> None:
    window = TimeRange(1000, 4600, interval_s=60, rate_interval="2m", variables={
        "service": Variable(["a'b", "c"]), "agent": Variable("x.y"), "model": Variable(ALL, all_value=".*"),
        "inst": Variable(ALL, options=["i1", "i2"])})
    sql = ("SELECT $__timeInterval(t) FROM x WHERE $__timeFilter(t) AND service IN (${service:sqlstring}) AND "
           "$__conditionalAll(hasAny(models, [${model:sqlstring}]), $model) AND $__conditionalAll(f(g(1), 2), "
           "$service) AND $__fromTime < $__toTime")
    assert expand_sql(sql, window) == (
        "SELECT toStartOfInterval(toDateTime(t), INTERVAL 60 second) FROM x WHERE t >= toDateTime(1000) AND "
        "t <= toDateTime(4600) AND service IN ('a''b','c') AND 1=1 AND f(g(1), 2) AND toDateTime(1000) < "
        "toDateTime(4600)")
    expr = 'rate(m{service=~"$service", agent="$agent", model=~"$model", i=~"${inst}"}[$__rate_interval]) [$__range]'
    assert expand_promql(expr, window) == (
        "rate(m{service=~\"(a'b|c)\", agent=\"x.y\", model=~\".*\", i=~\"(i1|i2)\"}[2m]) [3600s]")
    with pytest.raises(ValueError, match="unexpanded"):
        expand_sql("SELECT $__unknown(x)", window)


def test_report_command_renders_a_store(tmp_path: Path) -> None:
    from tests.otlp_corpus import corpus, to_otlp_json_line

    captured = tmp_path / "runs.jsonl"
    captured.write_text("".join(to_otlp_json_line(request) + "\n" for _, _, request in corpus()))
    store = tmp_path / "store"
    assert subprocess.run([*MASTWATCH, "replay", str(captured), "--store", str(store)], capture_output=True,
                          timeout=120).returncode == 0
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    result = subprocess.run([*MASTWATCH, "report", "--store-path", str(store), "--since", "2000-01-01", "--out",
                             str(page), "--png", str(png)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    assert "<svg" in text and "swe-agent" in text and "submit" in text  # the CTF run that loops on `submit`
    assert png.read_bytes()[:4] == b"\x89PNG"
    # a set week, as for a weekly review: the recorded runs are not in it
    result = subprocess.run([*MASTWATCH, "report", "--store-path", str(store), "--since", "2001-01-01", "--until",
                             "2001-01-08", "--out", str(page)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    assert "from 2001-01-01 00:00 to 2001-01-08 00:00 UTC" in text and "swe-agent" not in text
    result = subprocess.run([*MASTWATCH, "report", "--store-path", str(store), "--since", "1h", "--until", "2h",
                             "--out", str(page)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "is not before --until" in result.stderr
    result = subprocess.run([*MASTWATCH, "report", "--store-path", str(store), "--since", "a week", "--out",
                             str(page)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--since" in result.stderr
    result = subprocess.run([*MASTWATCH, "report", "--store-path", str(tmp_path / "none"), "--out", str(page)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "no store at" in result.stderr


def test_the_report_says_a_model_without_a_price_is_unpriced_not_free() -> None:
    """A spend or waste bar at 0 USD for tokens spent is a model genai-prices does not know: the report says so."""
    from mastwatch.config import Config
    from mastwatch.dashboards.report import _bar_column, panels

    by_title = {p["title"]: p for _, p in panels(Config())}
    spend = _bar_column(by_title["Spend and waste by agent and model (store)"], [
        {"service": "s", "agent": "a", "model": "gpt-4o", "spend_usd": 2.0, "input_token_count": 900,
         "output_token_count": 50},
        {"service": "s", "agent": "b", "model": "in-house-7b", "spend_usd": 0.0, "input_token_count": 1000,
         "output_token_count": 234}])
    assert spend is not None and spend[3] == ["", "unpriced model: 1,234 tokens, cost unknown"]
    waste = _bar_column(by_title["Wasted spend by agent (store)"], [
        {"service": "s", "agent": "b", "wasted_usd": 0.0, "wasted_tokens": 0},
        {"service": "s", "agent": "c", "wasted_usd": 0.0, "wasted_tokens": 70}])
    assert waste is not None and waste[3] == ["", "unpriced model: 70 tokens, cost unknown"]  # none wasted: no note
