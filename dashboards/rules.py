"""`mastwatch rules --out DIR`: Prometheus recording and alerting rules (DIR/mastwatch-rules.yaml), or with
`--prometheus-rule` the same groups as a Prometheus Operator PrometheusRule (DIR/mastwatch-prometheusrule.yaml).

Recording rules follow the level:metric:operations naming; alerts are made as `alerting` says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mastwatch.collector.model.modes import MODES
from mastwatch.config import Config

from . import slo
from .alerting import agent_dashboard_link, alert
from .promql import duration, group, growth, mode_baseline, mode_ratio, mode_runs, run_calls_quantile

FILENAME = "mastwatch-rules.yaml"
PROMETHEUS_RULE = "mastwatch-prometheusrule.yaml"


def recording(config: Config) -> list[dict[str, Any]]:
    """Rates per agent, per deployment: the topology labels (cluster, namespace, job) are kept, so that two
    deployments running the same agent are told apart; where the scrape adds none, they group nothing."""
    rising, spend, length = config.rules.rising, config.rules.wasted_spend, config.rules.run_length
    code = rising.failure_mode.replace("-", "").replace(".", "").lower()  # FM-3.3 -> fm33
    w, sw = duration(rising.window), duration(spend.window)
    topology = config.dashboards.topology_labels
    per_agent = group(*topology, "service", "agent")
    per_mode = group(*topology, "service", "agent", "failure_mode", "category")
    fleet, fleet_mode = group(*topology), group(*topology, "failure_mode", "category")
    spender = group(*topology, "agent")
    rules = [
        {"record": "service_agent:mast_traces:rate5m",
         "expr": f"sum by ({per_agent}) (rate(mast_traces_total[5m]))"},
        {"record": "service_agent_failure_mode:mast_failure_mode_traces:rate5m",
         "expr": f"sum by ({per_mode}) (rate(mast_failure_mode_traces_total[5m]))"},
        {"record": "service_agent_failure_mode:mast_failure_mode_traces:ratio_rate5m",
         "expr": "service_agent_failure_mode:mast_failure_mode_traces:rate5m\n"
                 "/ ignoring (failure_mode, category) group_left service_agent:mast_traces:rate5m"},
        {"record": "failure_mode:mast_failure_mode_traces:ratio_rate5m",
         "expr": f"sum by ({fleet_mode}) (rate(mast_failure_mode_traces_total[5m]))\n"
                 f"/ ignoring (failure_mode, category) group_left sum by ({fleet}) (rate(mast_traces_total[5m]))"},
        {"record": "service_agent:mast_failing_traces:ratio_rate5m",
         "expr": f"sum by ({per_agent}) (rate(mast_failing_traces_total[5m]))\n"
                 "/ service_agent:mast_traces:rate5m"},
        {"record": "service_agent:mast_wasted_cost_usd:ratio_rate5m",
         "expr": f"sum by ({per_agent}) (rate(mast_wasted_cost_usd_total[5m]))\n"
                 f"/ sum by ({per_agent}) (rate(mast_cost_usd_total[5m]))"},
        {"record": "service_agent:mast_wasted_seconds:ratio_rate5m",
         "expr": f"sum by ({per_agent}) (rate(mast_wasted_seconds_total[5m]))\n"
                 f"/ sum by ({per_agent}) (rate(mast_run_duration_seconds_sum[5m]))"},
        {"record": f"service_agent:mast_traces:increase{w}", "expr": mode_runs(rising, by=per_agent)},
        {"record": f"service_agent:mast_{code}_traces:ratio_increase{w}", "expr": mode_ratio(rising, by=per_agent)},
        {"record": f"service_agent:mast_{code}_traces:ratio_baseline{duration(rising.baseline)}",
         "expr": mode_baseline(rising, by=per_agent)},
        {"record": run_length_series(config, "current"), "expr": run_calls_quantile(length, per_agent)},
        {"record": run_length_series(config, "baseline"), "expr": run_calls_quantile(length, per_agent, baseline=True)},
        {"record": run_length_series(config, "runs"),
         "expr": f"sum by ({per_agent}) ({growth('mast_run_model_calls_count', duration(length.window))})"},
        {"record": f"agent:mast_wasted_cost_usd:increase{sw}",
         "expr": f"sum by ({spender}) ({growth('mast_wasted_cost_usd_total', sw)})"},
    ]
    rules += [{"record": f"agent:mast_wasted_cost_usd:budget{sw}", "expr": f"vector({usd:g})",
               "labels": {"agent": agent}} for agent, usd in sorted(spend.budgets.items())]
    return rules


def run_length_series(config: Config, which: str) -> str:
    """The recorded series of rules.run_length: its quantile over the window (`current`), over the baseline before
    it (`baseline`), or the runs in the window (`runs`)."""
    rule = config.rules.run_length
    q, w = f"p{rule.quantile * 100:g}".replace(".", "_"), duration(rule.window)
    return {"current": f"service_agent:mast_run_model_calls:{q}_{w}",
            "baseline": f"service_agent:mast_run_model_calls:{q}_baseline{duration(rule.baseline)}",
            "runs": f"service_agent:mast_run_model_calls:count_increase{w}"}[which]


def alerts(config: Config) -> list[dict[str, Any]]:
    rising, spend, health = config.rules.rising, config.rules.wasted_spend, config.rules.health
    length = config.rules.run_length
    topology = config.dashboards.topology_labels
    nw = duration(config.rules.new_signature.window)
    regressed, worse = config.rules.regressed_signature, config.rules.worse_release
    rw = duration(regressed.window)
    mode = MODES[rising.failure_mode]
    code = rising.failure_mode.replace("-", "").replace(".", "").lower()
    w, base, sw = duration(rising.window), duration(rising.baseline), duration(spend.window)
    ratio = f"service_agent:mast_{code}_traces:ratio_increase{w}"
    baseline = f"service_agent:mast_{code}_traces:ratio_baseline{base}"
    job = f'job="{health.job}"'
    instance = group(*config.dashboards.topology_labels, "job", "instance")
    spent = f"agent:mast_wasted_cost_usd:increase{sw}"
    return [
        alert(config, "MastFailureModeRateRising",
               f"{ratio} > {rising.factor:g} * {baseline}\nand {ratio} >= {rising.min_rate:g}\n"
               f"and service_agent:mast_traces:increase{w} >= {rising.min_traces}",
               rising.hold, rising.severity,
               f"{mode.code} {mode.name} rising for {{{{ $labels.agent }}}} ({{{{ $labels.service }}}})",
               f"{{{{ $value | humanizePercentage }}}} of the runs of {{{{ $labels.agent }}}} over the last {w} showed "
               f"{mode.code} {mode.name}, more than {rising.factor:g}x its rate over the {base} before and at least "
               f"{rising.min_rate:.0%}, with at least {rising.min_traces} runs.",
               {"failure_mode": mode.code}, rising.keep_firing_for, agent_dashboard_link(config)),
        alert(config, "MastRunsGettingLonger",
               f"{run_length_series(config, 'current')}\n> {length.factor:g} * {run_length_series(config, 'baseline')}"
               f"\nand {run_length_series(config, 'runs')} >= {length.min_runs}", length.hold, length.severity,
               "Runs of {{ $labels.agent }} ({{ $labels.service }}) take more model calls",
               f"The {length.quantile:.0%} quantile of model calls per run of {{{{ $labels.agent }}}} over the last "
               f"{duration(length.window)} is {{{{ $value | printf \"%.0f\" }}}}, more than {length.factor:g}x its own "
               f"over the {duration(length.baseline)} before, with at least {length.min_runs} runs: its runs go round "
               "longer before they end (a loop, a failing tool, a changed prompt or model), whether or not a "
               "detector names it.", dashboard=agent_dashboard_link(config)),
        alert(config, "MastRepeatedStepSpendOverBudget",
               f"{spent}\n> on (agent) group_left ()\n(agent:mast_wasted_cost_usd:budget{sw} "
               f"or on (agent) (max by (agent) (0 * {spent}) + {spend.budget_usd:g}))",
               spend.hold, "warning",
               "{{ $labels.agent }} burnt {{ $value | printf \"%.2f\" }} USD on repeated steps in the last " + sw,
               f"Model calls that produced repeated steps (FM-1.3, or calls redone after a reset, FM-2.1) of "
               f"{{{{ $labels.agent }}}} cost "
               f"{{{{ $value | printf \"%.2f\" }}}} USD over the last {sw}, over its budget (rules.wasted_spend: "
               f"{spend.budget_usd:g} USD unless the agent has its own).",
               dashboard=agent_dashboard_link(config, service=False)),
        alert(config, "MastNewFailureSignature",
               f"sum by ({group(*topology, 'service', 'agent', 'failure_mode')}) "
               f"({growth('mast_new_failure_signatures_total', nw)}) > 0", 0, "info",
               "New recurring failure of {{ $labels.agent }}: {{ $labels.failure_mode }}",
               f"A failure signature of {{{{ $labels.agent }}}} ({{{{ $labels.service }}}}) showing "
               f"{{{{ $labels.failure_mode }}}}, not seen before, has recurred in "
               f"{config.exporters.prometheus.signature_min_runs} runs within the last {nw}. "
               f"`mastwatch top signatures --new-since {nw}` names it, with an example trace.",
               dashboard=agent_dashboard_link(config)),
        alert(config, "MastFailureSignatureRegressed",
               f"sum by ({group(*topology, 'service', 'agent', 'failure_mode')}) "
               f"({growth('mast_regressed_failure_signatures_total', rw)}) > 0", 0, regressed.severity,
               "A fixed failure of {{ $labels.agent }} is back: {{ $labels.failure_mode }}",
               f"A failure signature of {{{{ $labels.agent }}}} ({{{{ $labels.service }}}}) showing "
               f"{{{{ $labels.failure_mode }}}}, marked fixed (`mastwatch resolve`), has shown again in a run within "
               f"the last {rw}. `mastwatch top signatures` says which (`resolved`: regressed), with an example "
               "trace.", dashboard=agent_dashboard_link(config)),
        alert(config, "MastReleaseWorse",
               f"max by ({group(*topology, 'service', 'agent', 'environment', 'version', 'previous_version')}) "
               f"(mast_release_failure_zscore) >= {worse.min_zscore:g}", worse.hold, worse.severity,
               "{{ $labels.agent }} {{ $labels.version }} fails more often than {{ $labels.previous_version }}",
               "The newest release of {{ $labels.agent }} ({{ $labels.service }}{{ if $labels.environment }}, "
               "{{ $labels.environment }}{{ end }}), {{ $labels.version }}, shows failure modes in a larger share of "
               "its runs than {{ $labels.previous_version }} before it: {{ $value | printf \"%.1f\" }} standard "
               f"errors over the last {duration(config.exporters.prometheus.release_window)}, rarely chance. "
               "`mastwatch top versions --agent {{ $labels.agent }}` gives both shares and the modes seen most.",
               dashboard=agent_dashboard_link(config)),
        alert(config, "MastwatchDown", f"up{{{job}}} == 0", 300, "critical",
               "mastwatch {{ $labels.instance }} cannot be scraped",
               "Prometheus cannot scrape this mastwatch: its runs' failure modes and spend are not counted, and the "
               "failure-mode alerts cannot fire for the agents it serves."),
        alert(config, "MastwatchAbsent", f"absent(up{{{job}}})", 600, "critical",
               f"no mastwatch target is scraped (job {health.job})",
               f"Prometheus scrapes no target of job {health.job}: every mast_* series is gone, so the failure-mode "
               "and spend alerts have no data and stay silent. The replicas were removed, or the scrape config or "
               "ServiceMonitor no longer matches them (rules.health.job must name the job that scrapes them)."),
        alert(config, "MastwatchRejectingSpans",
               f"sum by ({instance}) (rate(mastwatch_spans_rejected_total{{{job}}}[5m]))\n"
               f"/ sum by ({instance}) (rate(mastwatch_spans_received_total{{{job}}}[5m])) > "
               f"{health.rejected_ratio:g}", 600, "warning",
               "mastwatch {{ $labels.instance }} rejects {{ $value | humanizePercentage }} of spans",
               "Spans are rejected for invalid ids (bad clients) or queue_full (backpressure: clients retry, "
               "but the instance is saturated). See mastwatch_spans_rejected_total by reason."),
        alert(config, "MastwatchRejectingRequests",
               f"sum by ({instance}, reason) (rate(mastwatch_requests_rejected_total{{{job}}}[5m])) > 0",
               900, "info",
               "mastwatch {{ $labels.instance }} refuses OTLP requests ({{ $labels.reason }})",
               "Whole OTLP requests are refused as {{ $labels.reason }}: malformed bodies, or bodies over "
               "receiver.*.max_*_mib. Their spans are lost unless the client retries."),
        alert(config, "MastwatchLateSpans",
               f"sum by ({instance}) (rate(mastwatch_late_spans_total{{{job}}}[10m]))\n"
               f"/ sum by ({instance}) (rate(mastwatch_spans_received_total{{{job}}}[10m])) > "
               f"{health.late_ratio:g}", 900, "warning",
               "mastwatch {{ $labels.instance }} drops {{ $value | humanizePercentage }} of spans as late",
               "Spans arrive after their trace was classified and are dropped: processor.decision_wait is shorter "
               "than the clients' export delay, or traces are evicted early."),
        alert(config, "MastwatchEvictingTraces",
               f"sum by ({instance}) (rate(mastwatch_traces_evicted_total{{{job}}}[10m])) > 0", 900, "warning",
               "mastwatch {{ $labels.instance }} evicts traces before they complete",
               "processor.max_traces traces, or processor.max_buffered_spans spans, are in flight, so the oldest "
               "traces are classified before they end; their later spans are dropped as late. Raise the limit (and "
               "the memory limit with it) or add replicas."),
        alert(config, "MastwatchStoreFailing",
               f"sum by ({instance}) (increase(mastwatch_store_errors_total{{{job}}}[5m])) > 0\n"
               f"and sum by ({instance}) (mastwatch_store_queue_rows{{{job}}}) > 0", 600, "warning",
               "mastwatch {{ $labels.instance }} cannot write to its store",
               "Inserts into the store have failed for 10 minutes. Verdict rows wait in the durable queue "
               "(mastwatch_store_queue_rows) and are written once the store is back; past "
               "exporters.store.max_queued_rows or max_queued_mib the oldest are dropped "
               "(MastwatchStoreDroppingRows). The logs say why."),
        alert(config, "MastwatchStoreDroppingRows",
               f"sum by ({instance}) (increase(mastwatch_store_rows_dropped_total{{{job}}}[10m])) > 0", 0,
               "critical", "mastwatch {{ $labels.instance }} dropped {{ $value | printf \"%.0f\" }} store rows",
               "The store has been failing long enough for exporters.store.max_queued_rows rows to wait; the "
               "oldest are dropped. See mastwatch_store_errors_total and the logs."),
    ]


def gateway_alerts(config: Config) -> list[dict[str, Any]]:
    """The gateway Collectors' own metrics (their `service.telemetry` Prometheus reader): what they drop, refuse or
    hold back before mastwatch sees it."""
    health = config.rules.health
    job = f'job="{health.gateway_job}"'
    instance = group(*config.dashboards.topology_labels, "job", "instance")
    return [
        alert(config, "MastwatchGatewayDown", f"up{{{job}}} == 0", 300, "critical",
               "gateway Collector {{ $labels.instance }} is down",
               "Prometheus cannot scrape the gateway Collector: agents sending to it may be failing."),
        alert(config, "MastwatchGatewayDroppingSpans",
               f"sum by ({instance}, exporter) (rate(otelcol_exporter_send_failed_spans_total{{{job}}}[5m])) > 0"
               f"\nor sum by ({instance}, exporter) "
               f"(rate(otelcol_exporter_enqueue_failed_spans_total{{{job}}}[5m])) > 0",
               0, "critical", "gateway {{ $labels.instance }} drops spans bound for mastwatch ({{ $labels.exporter }})",
               "The gateway's exporter gave up on spans (retries exhausted, or its queue refused them): those runs "
               "are missing or incomplete in mastwatch. See the Collector's logs."),
        alert(config, "MastwatchGatewayQueueFilling",
               f"max by ({instance}, exporter) (otelcol_exporter_queue_size{{{job}}}\n"
               f"/ otelcol_exporter_queue_capacity{{{job}}}) > {health.gateway_queue_ratio:g}",
               600, "warning", "gateway {{ $labels.instance }} sending queue {{ $value | humanizePercentage }} full",
               "mastwatch accepts spans more slowly than agents send them (its queue pushes back, or replicas are "
               "down); once the gateway's queue is full the agents are held back."),
        alert(config, "MastwatchGatewayRefusingSpans",
               f"sum by ({instance}, receiver) (rate(otelcol_receiver_refused_spans_total{{{job}}}[5m])) > 0",
               600, "warning", "gateway {{ $labels.instance }} refuses agents' spans ({{ $labels.receiver }})",
               "The gateway's receiver refuses spans (its memory limiter, or a full queue): agents retry, or drop "
               "them when their own queues fill."),
    ]


def slo_rules(config: Config) -> list[dict[str, Any]]:
    """The failure budgets' recorded ratios and burn alerts (rules.slos; none by default)."""
    return slo.recording(config) + slo.alerts(config)


def rules(config: Config) -> dict[str, Any]:
    groups = [{"name": "mastwatch.recording", "rules": recording(config)},
              {"name": "mastwatch.alerts", "rules": alerts(config)},
              {"name": "mastwatch.gateway", "rules": gateway_alerts(config)}]
    if config.rules.slos:
        groups.append({"name": "mastwatch.slo", "rules": slo_rules(config)})
    return {"groups": groups}


class _Dumper(yaml.SafeDumper):
    pass


def _literal(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _literal)


def prometheus_rule(config: Config) -> dict[str, Any]:
    """The rules as a Prometheus Operator object; the Operator's ruleSelector must match its labels."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "mastwatch", "labels": {"app.kubernetes.io/name": "mastwatch"}},
            "spec": rules(config)}


def write(config: Config, out: Path, operator: bool = False) -> Path:
    """The rules file (`operator`: the PrometheusRule) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / (PROMETHEUS_RULE if operator else FILENAME)
    header = ("# Generated by `mastwatch rules --prometheus-rule --out DIR`: the rules of `mastwatch rules` for the "
              "Prometheus Operator.\n" if operator else "")
    text = yaml.dump(prometheus_rule(config) if operator else rules(config), Dumper=_Dumper, sort_keys=False,
                     width=120)
    path.write_text(header + text, encoding="utf-8")
    return path
