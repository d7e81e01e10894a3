"""Settings of the generated Grafana dashboards (`dashboards`) and Prometheus rules (`rules`)."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mastwatch.collector.durations import Duration
from mastwatch.collector.model.modes import MODES

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Labels mastwatch's own series carry; a deployment label of the same name would clash with them.
AGENT_LABELS = frozenset({"service", "agent", "model", "type", "tool", "failure_mode", "category", "instance"})
# Labels the alerts carry from their expressions, or set: `rules.labels` may not override them.
RESERVED_ALERT_LABELS = AGENT_LABELS | {"severity", "alertname", "job", "exporter", "reason", "receiver",
                                        "transport", "cluster", "namespace"}


class DashboardsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    trace_url: str = Field("http://localhost:16686/trace/{trace_id}",
                           description="link from a trace id to the trace UI; {trace_id} is replaced")
    trace_view_url: str = Field("http://localhost:9464/traces/{trace_id}",
                                description="second link from a trace id: the run's page mastwatch serves on its "
                                "metrics port (steps and findings, from the store); {trace_id} is replaced; empty: "
                                "no such link")
    grafana_url: str = Field("", description="Grafana's address as on-call's browser reaches it: each alert about "
                             "an agent then links to its drill-down dashboard (a `dashboard` annotation); empty: no "
                             "link")
    prometheus_url: str = Field("http://localhost:9090", description="the Prometheus data source's URL")
    clickhouse_host: str = Field("localhost", description="the ClickHouse data source's server")
    clickhouse_port: int = Field(9000, ge=1, le=65535)
    clickhouse_protocol: str = Field("native", pattern="^(native|http)$")
    clickhouse_username: str = "mastwatch"
    path: str = Field("/var/lib/grafana/dashboards/mastwatch", description="where Grafana reads the JSON files")
    folder: str = "mastwatch"
    topology_labels: list[str] = Field(["cluster", "namespace", "job"], description="labels the scrape adds that "
                                       "tell mastwatch deployments apart: a variable each on the dashboards; the "
                                       "rules aggregate by them, so alerts fire per deployment")

    @field_validator("topology_labels")
    @classmethod
    def _label_names(cls, value: list[str]) -> list[str]:
        for label in value:
            if not LABEL_NAME.fullmatch(label) or label.startswith("__"):
                raise ValueError(f"{label!r} is not a Prometheus label name")
            if label in AGENT_LABELS:
                raise ValueError(f"{label!r} is one of mastwatch's own labels ({', '.join(sorted(AGENT_LABELS))})")
        return list(dict.fromkeys(value))

    @field_validator("trace_url")
    @classmethod
    def _has_trace_id(cls, value: str) -> str:
        if "{trace_id}" not in value:
            raise ValueError("must contain {trace_id}, e.g. http://jaeger:16686/trace/{trace_id}")
        return value

    @field_validator("trace_view_url")
    @classmethod
    def _view_has_trace_id(cls, value: str) -> str:
        if value and "{trace_id}" not in value:
            raise ValueError("must contain {trace_id}, e.g. http://mastwatch:9464/traces/{trace_id} (or be empty)")
        return value


class RisingModeRule(BaseModel):
    """One failure mode's rate, compared with its own baseline."""

    model_config = ConfigDict(extra="forbid")
    failure_mode: str = "FM-3.3"
    window: Duration = Field(1800.0, ge=60, description="the current rate is measured over this window")
    baseline: Duration = Field(86400.0, ge=3600, description="the baseline: the window before the current one")
    factor: float = Field(2.0, gt=1, description="fire when the current rate exceeds the baseline by this factor")
    min_rate: float = Field(0.05, gt=0, le=1, description="and is at least this share of runs")
    min_traces: int = Field(20, ge=1, description="and the agent ran at least this many times in the window")
    hold: Duration = Field(600.0, ge=0, description="for this long (the rule's `for`)")
    keep_firing_for: Duration = Field(900.0, ge=0, description="once firing, go on firing this long after the "
                                      "condition clears (the rule's `keep_firing_for`): a rate near its threshold "
                                      "pages once, not at every crossing")
    severity: Literal["info", "warning", "critical"] = Field("warning", description="the alert's `severity` label")

    @field_validator("failure_mode")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in MODES:
            raise ValueError(f"{value!r} is not a MAST failure mode code ({', '.join(MODES)})")
        return value


class RunLengthRule(BaseModel):
    """An agent's runs taking more model calls than its own runs did before: a loop or a detour, named by a detector
    or not."""

    model_config = ConfigDict(extra="forbid")
    window: Duration = Field(1800.0, ge=60, description="the current runs are those ended within this window")
    baseline: Duration = Field(86400.0, ge=3600, description="the baseline: the window before the current one")
    quantile: float = Field(0.95, gt=0, lt=1, description="the quantile of model calls per run compared")
    factor: float = Field(2.0, gt=1, description="fire when the current quantile exceeds the baseline's by this "
                          "factor")
    min_runs: int = Field(50, ge=1, description="and the agent ran at least this many times in the window")
    hold: Duration = Field(900.0, ge=0, description="for this long (the rule's `for`)")
    severity: Literal["info", "warning", "critical"] = Field("warning", description="the alert's `severity` label")


class WastedSpendRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    window: Duration = Field(3600.0, ge=60, description="spend is summed over this window")
    budget_usd: float = Field(5.0, gt=0, description="per agent, per window")
    budgets: dict[str, float] = Field(default_factory=dict, description="agent name -> its own budget in USD")
    hold: Duration = Field(300.0, ge=0)


class NewSignatureRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    window: Duration = Field(3600.0, ge=60, description="fire while a new failure signature reached "
                             "exporters.prometheus.signature_min_runs runs within this window")


class RegressedSignatureRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    window: Duration = Field(3600.0, ge=60, description="fire while a failure signature marked fixed (mastwatch "
                             "resolve) has shown again in a run within this window")
    severity: Literal["info", "warning", "critical"] = Field("warning", description="the alert's `severity` label")


class WorseReleaseRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    min_zscore: float = Field(3.0, gt=0, description="fire when an agent's newest release fails more often than the "
                              "one before it by this many standard errors (mast_release_failure_zscore) or more")
    hold: Duration = Field(900.0, ge=0, description="for how long before it fires (the comparison is read again "
                           "every signature_refresh: a difference that holds is not a passing fluctuation)")
    severity: Literal["info", "warning", "critical"] = Field("warning", description="the alert's `severity` label")


class FailureObjective(BaseModel):
    """An objective on the share of an agent's runs that show no failure (`any`: no unmuted finding) or not one
    mode, alerted on by how fast each agent spends its error budget (multiwindow, multi-burn-rate)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="the `slo` label of its series and alerts")
    failure_mode: str = Field("any", description="a MAST mode code, or `any`: runs with any unmuted finding")
    objective: float = Field(0.95, gt=0, lt=1, description="the share of each agent's runs that must not show it; "
                             "the error budget is the rest")
    period: Duration = Field(30 * 86400.0, ge=86400, description="the budget is spent over this period; the "
                             "alerts' windows are scaled to it (those of a 30-day period: 5m to 3d)")
    agents: list[str] = Field(default_factory=list, description="the agents it holds for (empty: every agent, "
                              "each with its own budget)")
    min_runs: int = Field(10, ge=1, description="an alert needs at least this many runs in its long window")
    page_severity: Literal["info", "warning", "critical"] = Field("critical", description="of "
                                                                  "MastFailureBudgetBurnFast (a page)")
    ticket_severity: Literal["info", "warning", "critical"] = Field("info", description="of "
                                                                    "MastFailureBudgetBurnSlow (a ticket: the "
                                                                    "shipped Alertmanager routes info there)")

    @field_validator("failure_mode")
    @classmethod
    def _known(cls, value: str) -> str:
        if value != "any" and value not in MODES:
            raise ValueError(f"{value!r} is neither `any` nor a MAST failure mode code ({', '.join(MODES)})")
        return value


class HealthRules(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rejected_ratio: float = Field(0.01, gt=0, le=1, description="share of received spans rejected that alerts")
    late_ratio: float = Field(0.01, gt=0, le=1, description="share of received spans arriving late that alerts")
    job: str = Field("mastwatch", description="the Prometheus job that scrapes mastwatch")
    gateway_job: str = Field("otel-collector", description="the Prometheus job that scrapes the gateway Collectors' "
                             "own metrics (port 8888)")
    gateway_queue_ratio: float = Field(0.8, gt=0, le=1, description="share of the gateway's sending queue in use "
                                       "that alerts")


class RulesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    runbook_url: str = Field("http://localhost:9464/runbooks#{anchor}",
                             description="each alert's runbook link, absolute; {anchor} is the alert's name in lower "
                             "case. mastwatch serves the runbooks at /runbooks on its metrics port")
    rising: RisingModeRule = RisingModeRule()
    run_length: RunLengthRule = RunLengthRule()
    wasted_spend: WastedSpendRule = WastedSpendRule()
    new_signature: NewSignatureRule = NewSignatureRule()
    regressed_signature: RegressedSignatureRule = RegressedSignatureRule()
    worse_release: WorseReleaseRule = WorseReleaseRule()
    health: HealthRules = HealthRules()
    slos: list[FailureObjective] = Field(default_factory=list, description="objectives on the share of runs "
                                         "without a failure, with error-budget burn alerts (none by default)")
    labels: dict[str, str] = Field(default_factory=dict, description="labels added to every alert, for routing "
                                   "(e.g. {team: sre}); not `severity` or a label an alert sets itself")

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not LABEL_NAME.fullmatch(name) or name.startswith("__"):
                raise ValueError(f"{name!r} is not a Prometheus label name")
            if name in RESERVED_ALERT_LABELS:
                raise ValueError(f"{name!r} is set by the alerts themselves")
        return value

    @field_validator("slos")
    @classmethod
    def _unique(cls, value: list[FailureObjective]) -> list[FailureObjective]:
        names = [slo.name for slo in value]
        if len(set(names)) < len(names):
            raise ValueError(f"each objective needs its own name: {', '.join(sorted(names))}")
        return value

    @field_validator("runbook_url")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc:
            raise ValueError("must be an absolute http(s) URL (alerts are read away from this config), e.g. "
                             "https://wiki.example.com/mastwatch-runbooks#{anchor}")
        if "{anchor}" not in value:
            raise ValueError("must contain {anchor}, replaced by the alert's name in lower case")
        return value
