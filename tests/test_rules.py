"""The generated Prometheus rules: promtool checks them and runs their unit tests (tests/rules/)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from mastwatch.config import Config
from mastwatch.dashboards.rules import FILENAME, PROMETHEUS_RULE, alerts, gateway_alerts
from tests.conftest import installed

ROOT = Path(__file__).resolve().parents[1]
MASTWATCH = [sys.executable, "-m", "mastwatch.cli"]


@pytest.fixture(scope="module")
def promtool() -> str:
    return installed("promtool")


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rules")
    result = subprocess.run([*MASTWATCH, "rules", "--out", str(out), "--set", "rules.wasted_spend.budgets.sre-bot=0.5"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return out


SLO = "rules.slos=[{name: verification, failure_mode: FM-3.3, objective: 0.95, agents: [verifier, steady]}]"


@pytest.fixture(scope="module")
def slo_rules_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("slo-rules")
    result = subprocess.run([*MASTWATCH, "rules", "--out", str(out), "--set", SLO], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return out


def test_failure_budget_rules_pass_their_unit_tests(promtool: str, slo_rules_dir: Path) -> None:
    """An objective adds its recorded ratios, its budget left and two burn alerts, in a group of their own."""
    result = subprocess.run([promtool, "check", "rules", str(slo_rules_dir / FILENAME)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 43 rules found" in result.stdout  # 32 as without, 1 budget, 7 windows, 1 left, 2 alerts
    shutil.copy(ROOT / "tests" / "rules" / "mastwatch-slo.test.yaml", slo_rules_dir)
    result = subprocess.run([promtool, "test", "rules", "mastwatch-slo.test.yaml"], cwd=slo_rules_dir,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    groups = yaml.safe_load((slo_rules_dir / FILENAME).read_text())["groups"]
    assert [g["name"] for g in groups][-1] == "mastwatch.slo"
    runbooks = (ROOT / "dashboards" / "runbooks.md").read_text()
    for rule in groups[-1]["rules"]:
        if "alert" in rule:
            assert f"## {rule['alert']}\n" in runbooks and rule["labels"]["slo"] == "verification"


def test_an_objective_is_checked_when_loaded() -> None:
    for bad in ({"name": "x", "failure_mode": "FM-9.9"}, {"name": "Bad Name"}, {"name": "x", "objective": 1}):
        with pytest.raises(ValidationError):
            Config.model_validate({"rules": {"slos": [bad]}})
    with pytest.raises(ValidationError, match="own name"):
        Config.model_validate({"rules": {"slos": [{"name": "x"}, {"name": "x", "failure_mode": "FM-1.3"}]}})


def test_promtool_checks_the_rules(promtool: str, rules_dir: Path) -> None:
    result = subprocess.run([promtool, "check", "rules", str(rules_dir / FILENAME)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 33 rules found" in result.stdout  # 14 recorded, 1 budget of its own, 14 alerts, 4 gateway


def test_promtool_unit_tests_pass(promtool: str, rules_dir: Path) -> None:
    shutil.copy(ROOT / "tests" / "rules" / "mastwatch-rules.test.yaml", rules_dir)
    result = subprocess.run([promtool, "test", "rules", "mastwatch-rules.test.yaml"], cwd=rules_dir,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_summary_description_and_a_runbook_section(rules_dir: Path) -> None:
    doc = yaml.safe_load((rules_dir / FILENAME).read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    runbooks = (ROOT / "dashboards" / "runbooks.md").read_text()
    sections = {m.lower() for m in re.findall(r"^## (\w+)$", runbooks, re.M)}
    names = [r["alert"] for r in rules if "alert" in r]
    assert len(names) == len(alerts(Config())) + len(gateway_alerts(Config())) == 18
    for rule in rules:
        if "alert" in rule:
            assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}
            assert rule["labels"]["severity"] in ("info", "warning", "critical")
            anchor = rule["annotations"]["runbook_url"].rpartition("#")[2]
            assert anchor == rule["alert"].lower() and anchor in sections
    assert {"record": "agent:mast_wasted_cost_usd:budget1h", "expr": "vector(0.5)", "labels": {"agent": "sre-bot"}} \
        in rules


def test_the_prometheus_operator_rule_holds_the_same_groups(rules_dir: Path, tmp_path: Path) -> None:
    result = subprocess.run([*MASTWATCH, "rules", "--out", str(tmp_path), "--prometheus-rule", "--set",
                             "rules.wasted_spend.budgets.sre-bot=0.5"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    operator = yaml.safe_load((tmp_path / PROMETHEUS_RULE).read_text())
    assert (operator["apiVersion"], operator["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert operator["spec"] == yaml.safe_load((rules_dir / FILENAME).read_text())


def test_every_runbook_link_resolves_on_the_page_mastwatch_serves(server) -> None:
    """The alerts' default runbook_url is absolute and points at /runbooks on the metrics port: each anchor is an id
    there, and the page needs no token (on-call opens it from the alert)."""
    host, port = server.service.metrics_address
    with urllib.request.urlopen(f"http://{host}:{port}/runbooks", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/html")
        page = r.read().decode()
    ids = set(re.findall(r'<h2 id="([^"]+)"', page))
    config = Config()
    for rule in [*alerts(config), *gateway_alerts(config)]:
        url = rule["annotations"]["runbook_url"]
        assert url.startswith("http://localhost:9464/runbooks#") and url.rpartition("#")[2] in ids, rule["alert"]


@pytest.mark.parametrize("url", ["docs/runbooks.md#{anchor}", "/runbooks#{anchor}", "https://wiki.example.com/x"])
def test_a_runbook_url_that_alerts_cannot_follow_is_refused(url: str) -> None:
    with pytest.raises(ValidationError, match=r"absolute|anchor"):
        Config.model_validate({"rules": {"runbook_url": url}})


def test_routing_labels_severity_and_keep_firing_for_are_set_by_the_configuration() -> None:
    config = Config.model_validate({"rules": {"labels": {"team": "sre"},
                                              "rising": {"severity": "critical", "keep_firing_for": "20m"}}})
    rising, *others = alerts(config)
    assert rising["labels"] == {"team": "sre", "severity": "critical", "failure_mode": "FM-3.3"}
    assert rising["keep_firing_for"] == "20m" and rising["for"] == "10m"
    assert all(a["labels"]["team"] == "sre" and "keep_firing_for" not in a for a in others + gateway_alerts(config))
    for bad in ({"severity": "page"}, {"agent": "x"}, {"not-a-label": "x"}):
        with pytest.raises(ValidationError, match=r"set by the alerts|not a Prometheus label name"):
            Config.model_validate({"rules": {"labels": bad}})


@pytest.mark.parametrize("labels", [["service"], ["cluster", "__name__"], ["not-a-label"]])
def test_topology_labels_must_be_label_names_of_their_own(labels: list[str]) -> None:
    with pytest.raises(ValidationError, match="label"):
        Config.model_validate({"dashboards": {"topology_labels": labels}})


def test_without_topology_labels_the_rules_group_by_agent_alone(promtool: str, tmp_path: Path) -> None:
    result = subprocess.run([*MASTWATCH, "rules", "--out", str(tmp_path), "--set", "dashboards.topology_labels=[]"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    checked = subprocess.run([promtool, "check", "rules", str(tmp_path / FILENAME)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "sum by (service, agent) (rate(mast_traces_total[5m]))" in (tmp_path / FILENAME).read_text()


@pytest.mark.parametrize(("endpoint", "runbooks", "noted"), [
    ("0.0.0.0:9464", "http://localhost:9464/runbooks#{anchor}", True),  # a deployment linking to on-call's machine
    ("0.0.0.0:9464", "https://mastwatch.example.com/runbooks#{anchor}", False),
    ("127.0.0.1:9464", "http://localhost:9464/runbooks#{anchor}", False)])  # a local server: the link is right
def test_links_to_localhost_from_a_deployment_are_noted(tmp_path: Path, endpoint: str, runbooks: str,
                                                       noted: bool) -> None:
    result = subprocess.run([sys.executable, "-m", "mastwatch.cli", "rules", "--out", str(tmp_path), "--set",
                             f"exporters.prometheus.endpoint={endpoint}", "--set", f"rules.runbook_url={runbooks}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and (tmp_path / FILENAME).exists(), result.stderr
    assert ("note: rules.runbook_url is http://localhost:9464" in result.stderr) is noted, result.stderr


def test_alerts_about_an_agent_link_to_its_drill_down_with_its_labels(promtool: str, tmp_path: Path) -> None:
    """With dashboards.grafana_url, each alert about an agent carries a `dashboard` link to the agent drill-down with
    the alert's service and agent as the dashboard's variables (escaped as Prometheus renders them: promtool)."""
    from mastwatch.dashboards.generate import dashboards

    result = subprocess.run([*MASTWATCH, "rules", "--out", str(tmp_path), "--set",
                             "dashboards.grafana_url=https://grafana.example/"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    doc = yaml.safe_load((tmp_path / FILENAME).read_text())
    linked = {r["alert"]: r["annotations"]["dashboard"] for g in doc["groups"] for r in g["rules"]
              if "dashboard" in r.get("annotations", {})}
    assert set(linked) == {"MastFailureModeRateRising", "MastRunsGettingLonger", "MastRepeatedStepSpendOverBudget",
                           "MastNewFailureSignature", "MastFailureSignatureRegressed", "MastReleaseWorse"}
    agent_board = next(b for b in dashboards(Config()).values() if b["uid"] == "mastwatch-agent")
    variables = {v["name"] for v in agent_board["templating"]["list"]}
    for link in linked.values():
        assert link.startswith("https://grafana.example/d/mastwatch-agent?")
        assert {part.split("=")[0].removeprefix("var-") for part in link.split("?")[1].split("&")} <= variables
    (tmp_path / "link.test.yaml").write_text(yaml.safe_dump({"rule_files": [FILENAME], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": [{
            "series": 'mast_regressed_failure_signatures_total{service="check out", agent="bot&co", '
                      'failure_mode="FM-3.3", category="FC3"}', "values": "0x10 1x30"}],
            "alert_rule_test": [{"eval_time": "20m", "alertname": "MastFailureSignatureRegressed", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "service": "check out", "agent": "bot&co",
                               "failure_mode": "FM-3.3"},
                "exp_annotations": {
                    **next(r["annotations"] for g in doc["groups"] for r in g["rules"]
                           if r.get("alert") == "MastFailureSignatureRegressed"),
                    "summary": "A fixed failure of bot&co is back: FM-3.3",
                    "description": "A failure signature of bot&co (check out) showing FM-3.3, marked fixed "
                                   "(`mastwatch resolve`), has shown again in a run within the last 1h. `mastwatch "
                                   "top signatures` says which (`resolved`: regressed), with an example trace.",
                    "dashboard": "https://grafana.example/d/mastwatch-agent?var-service=check+out&var-agent=bot%26co",
                }}]}]}]}))
    result = subprocess.run([promtool, "test", "rules", "link.test.yaml"], cwd=tmp_path, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
