"""Failure budgets (`rules.slos`): for each objective on the share of an agent's runs without a failure, the error
ratio over the windows of multiwindow, multi-burn-rate alerting, the budget left over the objective's period, and
two alerts: MastFailureBudgetBurnFast (a page) and MastFailureBudgetBurnSlow (a ticket).

The windows and burn rates are those of the Site Reliability Workbook ("Alerting on SLOs") for a 30-day period,
scaled to the objective's own: a page when the budget burns 14.4 times faster than the period allows over an hour
(and still over the last 5 minutes), or 6 times over six hours (and 30 minutes); a ticket at 3 times over a day (and
2 hours) or once over three days (and 6 hours). The short window lets an alert stop soon after the burning does."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mastwatch.collector.model.modes import MODES
from mastwatch.config import Config

from .alerting import agent_dashboard_link, alert
from .panels import series
from .promql import duration, group, growth
from .settings import FailureObjective

MONTH = 30 * 86400
MIN_WINDOW = 300  # a shorter window holds too few scrapes for a rate


@dataclass(frozen=True)
class Burn:
    long: float  # seconds, for a 30-day period
    short: float
    rate: float  # how many times faster than the budget allows


PAGE = (Burn(3600, 300, 14.4), Burn(6 * 3600, 1800, 6))
TICKET = (Burn(86400, 7200, 3), Burn(3 * 86400, 6 * 3600, 1))
BUDGET = "mast_slo:error_budget:ratio"  # 1 - objective, one series per objective
REMAINING = "service_agent:mast_slo_budget:ratio_remaining"


def window(slo: FailureObjective, seconds: float) -> str:
    """A window of the 30-day table, scaled to the objective's period."""
    return duration(max(round(seconds * slo.period / MONTH), MIN_WINDOW))


def errors(w: str) -> str:
    return f"service_agent:mast_slo_errors:ratio_increase{w}"


def _selector(slo: FailureObjective) -> str:
    """The objective's agents as a label matcher: their names matched whole, as a PromQL string."""
    if not slo.agents:
        return ""
    pattern = "|".join(re.escape(agent) for agent in slo.agents)
    return 'agent=~"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ratio(slo: FailureObjective, w: str, by: str) -> str:
    """The share of the runs of each agent the objective holds for that showed the failure over `w`."""
    sel = _selector(slo)
    runs = f"sum by ({by}) ({growth(series('mast_traces_total', sel), w)})"
    failing = series("mast_failing_traces_total", sel) if slo.failure_mode == "any" else \
        series("mast_failure_mode_traces_total", f'failure_mode="{slo.failure_mode}"', sel)
    # an agent whose mode counter does not exist yet has shown the mode in none of its runs
    return f"(sum by ({by}) ({growth(failing, w)})\n or on ({by}) 0 * {runs})\n/ {runs}"


def windows(slo: FailureObjective) -> list[str]:
    """Every window the objective's rules read, shortest first."""
    seconds = sorted({s for burn in (*PAGE, *TICKET) for s in (burn.long, burn.short)})
    return list(dict.fromkeys(window(slo, s) for s in seconds))


def recording(config: Config) -> list[dict[str, Any]]:
    by = group(*config.dashboards.topology_labels, "service", "agent")
    rules: list[dict[str, Any]] = []
    for slo in config.rules.slos:
        rules.append({"record": BUDGET, "expr": f"vector({1 - slo.objective:.6g})", "labels": {"slo": slo.name}})
        rules += [{"record": errors(w), "expr": _ratio(slo, w, by), "labels": {"slo": slo.name}}
                  for w in windows(slo)]
        rules.append({"record": REMAINING,
                      "expr": f"1 - {_ratio(slo, duration(slo.period), by)}\n/ {1 - slo.objective:.6g}",
                      "labels": {"slo": slo.name}})
    return rules


def _burning(slo: FailureObjective, burns: tuple[Burn, ...], by: str) -> str:
    """Whether an agent burns its budget at one of `burns`, over both of its windows, with enough runs. The value is
    the burn rate over the long window."""
    sel = f'{{slo="{slo.name}"}}'
    allowed = f"{1 - slo.objective:.6g}"
    conditions = []
    for burn in burns:
        long, short = window(slo, burn.long), window(slo, burn.short)
        runs = growth(series("mast_traces_total", _selector(slo)), long)
        conditions.append(f"(\n  {errors(long)}{sel} / {allowed} > {burn.rate:g}\n"
                          f"  and {errors(short)}{sel} / {allowed} > {burn.rate:g}\n"
                          f"  and on ({by}) sum by ({by}) ({runs}) >= {slo.min_runs}\n)")
    return "\nor\n".join(conditions)


def alerts(config: Config) -> list[dict[str, Any]]:
    """The burn alerts of every objective."""
    link = agent_dashboard_link(config)
    by = group(*config.dashboards.topology_labels, "service", "agent")
    rules = []
    for slo in config.rules.slos:
        what = "any failure mode" if slo.failure_mode == "any" else \
            f"{slo.failure_mode} {MODES[slo.failure_mode].name}"
        period = duration(slo.period)
        allowed = f"{(1 - slo.objective) * 100:.4g}%"
        for name, burns, severity, hold, pace in (
                ("MastFailureBudgetBurnFast", PAGE, slo.page_severity, 120, "in hours or days"),
                ("MastFailureBudgetBurnSlow", TICKET, slo.ticket_severity, 900, "by the period's end")):
            rules.append(alert(
                config, name, _burning(slo, burns, by), hold, severity,
                f"{{{{ $labels.agent }}}} spends its {slo.name} failure budget "
                "{{ $value | printf \"%.1f\" }}x too fast",
                f"Objective {slo.name}: at most {allowed} of the runs of each agent show {what}, over {period}. "
                f"Runs of {{{{ $labels.agent }}}} "
                f"({{{{ $labels.service }}}}) have shown it {{{{ $value | printf \"%.1f\" }}}} times as often as that "
                f"lately, over a long and a short window both: at this rate its budget for the {period} is spent "
                f"{pace}.", {"slo": slo.name}, dashboard=link))
    return rules


def watched_modes(config: Config) -> list[str]:
    """The modes the objectives count: each agent's counter of them is made at its first run."""
    return [slo.failure_mode for slo in config.rules.slos if slo.failure_mode != "any"]
