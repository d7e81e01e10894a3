"""The path to a page, run for real: the demo fleet sends OTLP to a running mastwatch, a real Prometheus
(Debian's `prometheus`) scrapes it and evaluates the generated rules, and sends what fires to a real Alertmanager
(Debian's `prometheus-alertmanager`) running the compose stack's `alertmanager.yml`, whose receivers are given a
webhook on loopback here. The routing of every generated alert is checked with amtool against the same file."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mastwatch.config import Config
from mastwatch.dashboards import rules
from mastwatch.demo import run_fleet
from tests.conftest import free_port, installed, prometheus_process
from tests.test_stop_signal import Hooks

ALERTMANAGER_YML = Path(__file__).resolve().parents[1] / "deploy" / "compose" / "alertmanager.yml"
WITH_SLO = Config.model_validate({"rules": {"slos": [{"name": "verification", "failure_mode": "FM-3.3"}]}})
ALERTMANAGER_PACKAGE = "Debian's prometheus-alertmanager package (apt-get install prometheus-alertmanager; " \
                       ".ci/run installs it)"


def _route(amtool: str, config: Path, labels: dict[str, str]) -> str:
    result = subprocess.run([amtool, "config", "routes", "test", f"--config.file={config}",
                             *(f"{k}={v}" for k, v in labels.items())], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def test_the_compose_alertmanager_config_is_valid_and_routes_every_alert_by_severity() -> None:
    amtool = installed("amtool", ALERTMANAGER_PACKAGE)
    result = subprocess.run([amtool, "check-config", str(ALERTMANAGER_YML)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr
    expected = {"critical": "oncall", "warning": "oncall", "info": "tickets"}
    alerts = rules.alerts(Config()) + [r for r in rules.slo_rules(WITH_SLO) if "alert" in r]
    assert {a["labels"]["severity"] for a in alerts} == set(expected)
    for alert in alerts:
        labels = {"alertname": alert["alert"], **alert["labels"]}
        assert _route(amtool, ALERTMANAGER_YML, labels) == expected[alert["labels"]["severity"]], alert["alert"]


def _from_operator(spec: dict) -> dict:
    """An AlertmanagerConfig's spec as the Alertmanager configuration the Prometheus Operator makes of it (without
    the namespace matcher it adds)."""
    def matchers(items: list[dict]) -> list[str]:
        return [f'{m["name"]} {m.get("matchType", "=")} "{m["value"]}"' for m in items]

    def route(r: dict) -> dict:
        names = {"receiver": "receiver", "groupBy": "group_by", "groupWait": "group_wait",
                 "groupInterval": "group_interval", "repeatInterval": "repeat_interval"}
        out = {names[k]: v for k, v in r.items() if k in names}
        if "matchers" in r:
            out["matchers"] = matchers(r["matchers"])
        if "routes" in r:
            out["routes"] = [route(child) for child in r["routes"]]
        return out

    return {"route": route(spec["route"]),
            "inhibit_rules": [{"source_matchers": matchers(i["sourceMatch"]), "target_matchers": matchers(
                i["targetMatch"]), "equal": i["equal"]} for i in spec["inhibitRules"]],
            "receivers": [{"name": r["name"]} for r in spec["receivers"]]}


def test_the_kubernetes_alertmanager_config_routes_as_the_compose_one(tmp_path) -> None:
    """The Prometheus Operator's AlertmanagerConfig in deploy/kubernetes holds the compose stack's routes, grouping
    and inhibitions; made into an Alertmanager configuration, amtool takes it and routes every alert as compose's."""
    amtool = installed("amtool", ALERTMANAGER_PACKAGE)
    resource = yaml.safe_load((ALERTMANAGER_YML.parents[1] / "kubernetes" / "mastwatch-alertmanagerconfig.yaml")
                              .read_text(encoding="utf-8"))
    assert (resource["apiVersion"], resource["kind"]) == ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig")
    converted = _from_operator(resource["spec"])
    compose = yaml.safe_load(ALERTMANAGER_YML.read_text(encoding="utf-8"))

    def normal(config: dict) -> dict:  # matchers with their spacing normalised
        return yaml.safe_load(re.sub(r"\s*(=~|!~|!=|=)\s*", r" \1 ", yaml.safe_dump(config)))

    assert normal(converted) == normal(compose)
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(converted), encoding="utf-8")
    result = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr
    for alert in rules.alerts(Config()) + rules.gateway_alerts(Config()) + rules.slo_rules(WITH_SLO):
        if "alert" not in alert:
            continue
        labels = {"alertname": alert["alert"], **alert["labels"]}
        assert _route(amtool, path, labels) == _route(amtool, ALERTMANAGER_YML, labels), alert["alert"]


@pytest.fixture
def alertmanager(tmp_path) -> Iterator[tuple[str, Hooks]]:
    """A running Alertmanager with the compose stack's config, every receiver sending to a loopback webhook; its
    group_wait cut from 30 s to 1 s (what this test would otherwise wait)."""
    binary = installed("prometheus-alertmanager", ALERTMANAGER_PACKAGE)
    hooks = Hooks()
    config = yaml.safe_load(ALERTMANAGER_YML.read_text(encoding="utf-8"))
    for receiver in config["receivers"]:
        receiver["webhook_configs"] = [{"url": hooks.url, "send_resolved": False}]
    config["route"]["group_wait"] = "1s"
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(config))
    web = f"127.0.0.1:{free_port()}"
    log = (tmp_path / "alertmanager.log").open("w")
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'alertmanager.yml'}",
                             f"--storage.path={tmp_path / 'am-data'}", f"--web.listen-address={web}",
                             "--cluster.listen-address="], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield web, hooks
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
        hooks.close()


def _notified(hooks: Hooks) -> list[tuple[str, dict[str, Any]]]:
    """(receiver, alert) of every notification the webhook received."""
    return [(body["receiver"], alert) for _, body, _, _ in list(hooks.received) for alert in body["alerts"]]


def test_an_agent_over_its_spend_budget_pages_the_oncall_receiver(tmp_path, start_server, alertmanager) -> None:
    """The demo's looping agents burn money on repeated steps; with a budget of a hundredth of a cent and no hold,
    MastRepeatedStepSpendOverBudget fires and reaches the receiver its severity routes to, with the agent named
    and a runbook link."""
    address, hooks = alertmanager
    server = start_server(rules__wasted_spend__budget_usd=0.0001, rules__wasted_spend__hold=0,
                          rules__labels={"team": "agents-sre"})
    service = server.service
    host, port = service.metrics_address
    stop = threading.Event()
    fleet = threading.Thread(target=run_fleet, args=(server.grpc_endpoint, f"127.0.0.1:{service.http.port}", stop),
                             kwargs={"pace": 0.02, "seed": 7, "delay_ms": 200}, daemon=True)
    fleet.start()
    try:
        with prometheus_process(tmp_path, {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules.write(service.config, tmp_path / "rules"))],
                "alerting": {"alertmanagers": [{"static_configs": [{"targets": [address]}]}]},
                "scrape_configs": [{"job_name": "mastwatch", "static_configs": [{"targets": [f"{host}:{port}"]}]}]}):
            deadline = time.monotonic() + 90
            while not any(a["labels"]["alertname"] == "MastRepeatedStepSpendOverBudget" for _, a in _notified(hooks)):
                assert time.monotonic() < deadline, "no page within 90 s: " + \
                    (tmp_path / "prometheus.log").read_text()[-1500:] + \
                    (tmp_path / "alertmanager.log").read_text()[-1500:]
                time.sleep(0.5)
    finally:
        stop.set()
        fleet.join(30)
    receiver, alert = next((r, a) for r, a in _notified(hooks)
                           if a["labels"]["alertname"] == "MastRepeatedStepSpendOverBudget")
    assert receiver == "oncall" and alert["status"] == "firing"
    assert alert["labels"]["severity"] == "warning" and alert["labels"]["team"] == "agents-sre"
    assert alert["labels"]["agent"]  # one notification per agent, named
    assert alert["annotations"]["runbook_url"].endswith("#mastrepeatedstepspendoverbudget")
