"""The generated Prometheus rules: promtool checks them and runs their unit tests (tests/rules/)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mastwatch.config import Config
from mastwatch.dashboards.rules import FILENAME, PROMETHEUS_RULE, alerts, gateway_alerts

ROOT = Path(__file__).resolve().parents[1]
MASTWATCH = [sys.executable, "-m", "mastwatch.cli"]


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is installed by .ci/run (Debian package prometheus)"
    return path


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rules")
    result = subprocess.run([*MASTWATCH, "rules", "--out", str(out), "--set", "rules.wasted_spend.budgets.sre-bot=0.5"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return out


def test_promtool_checks_the_rules(promtool: str, rules_dir: Path) -> None:
    result = subprocess.run([promtool, "check", "rules", str(rules_dir / FILENAME)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 22 rules found" in result.stdout  # 10 recorded, 1 budget of its own, 7 alerts, 4 gateway


def test_promtool_unit_tests_pass(promtool: str, rules_dir: Path) -> None:
    shutil.copy(ROOT / "tests" / "rules" / "mastwatch-rules.test.yaml", rules_dir)
    result = subprocess.run([promtool, "test", "rules", "mastwatch-rules.test.yaml"], cwd=rules_dir,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_summary_description_and_a_runbook_section(rules_dir: Path) -> None:
    doc = yaml.safe_load((rules_dir / FILENAME).read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    sections = {m.lower() for m in re.findall(r"^## (\w+)$", runbooks, re.M)}
    names = [r["alert"] for r in rules if "alert" in r]
    assert len(names) == len(alerts(Config())) + len(gateway_alerts(Config())) == 11
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
