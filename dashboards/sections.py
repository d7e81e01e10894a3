"""Rows of panels shared by the fleet dashboards and the agent drill-down: the same panels, filtered by the
dashboard's variables (`sel`: PromQL label matchers, `scope`: the ClickHouse dialect that writes their filters)."""

from __future__ import annotations

from mastwatch.collector.model.modes import CATEGORIES, MODES
from mastwatch.config import Config
from mastwatch.exporter.store import queries as q
from mastwatch.exporter.store.queries import Dialect

from . import slo
from .panels import (
    Grid,
    PromTarget,
    bargauge,
    override,
    prom,
    regex_override,
    series,
    sql,
    stat,
    table,
    timeseries,
    trace_link,
)
from .promql import duration, growth, mode_baseline, mode_ratio, run_calls_quantile

RUNS_PER_MIN = "suffix: runs/min"
TOKENS_PER_MIN = "suffix: tokens/min"
USD_PER_HOUR = "currencyUSD"
SHARE_STEPS = (("green", None), ("orange", 0.1), ("red", 0.25))
AGENT_LEGEND = "{{agent}} ({{service}})"


def _range(metric: str, sel: str, by: str = "") -> str:
    group = f" by ({by})" if by else ""
    return f"sum{group} ({growth(f'{metric}{{{sel}}}', '$__range')})"


def _rate(metric: str, sel: str, by: str, per: int = 1) -> str:
    scale = f"{per} * " if per != 1 else ""
    return f"{scale}sum by ({by}) (rate({metric}{{{sel}}}[$__rate_interval]))"


def failure_overview(grid: Grid, config: Config, sel: str, alert_sel: str) -> None:
    rule = config.rules.rising
    mode = MODES[rule.failure_mode]
    window = duration(rule.window)
    grid.row("Failure modes")
    grid.add(stat("Agent runs", "Agent runs (traces) classified in the time range.",
                  [prom(_range("mast_traces_total", sel), instant=True)], "short", decimals=0), 5, 4)
    grid.add(stat("Runs with a failure mode", "Share of runs showing at least one MAST failure mode in the time "
                  "range.", [prom(f'{_range("mast_failing_traces_total", sel)}\n/ '
                                  f'{_range("mast_traces_total", sel)}', instant=True)],
                  "percentunit", SHARE_STEPS, decimals=1), 5, 4)
    watched = f'mast_failure_mode_traces_total{{failure_mode="{mode.code}", {sel}}}'
    runs = f"mast_traces_total{{{sel}}}"
    grid.add(stat(f"{mode.code} rate, last {window}", f"Share of runs showing {mode.code} {mode.name} over the "
                  f"last {window}. Red from {rule.min_rate:.0%}, the alert's floor: the alert also needs "
                  f"{rule.factor:g}x the agent's own baseline and {rule.min_traces} runs.",
                  [prom(f"sum({growth(watched, window)})\n/ sum({growth(runs, window)})", instant=True)],
                  "percentunit", (("green", None), ("red", rule.min_rate)), decimals=1), 5, 4)
    grid.add(stat("Failure modes seen", "Distinct MAST failure modes found in the time range.",
                  [prom(f"count({_range('mast_failure_mode_traces_total', sel, 'failure_mode')} > 0)", instant=True)],
                  "short", decimals=0), 4, 4)
    grid.add(stat("Firing mastwatch alerts", "Alerts from `mastwatch rules` firing now (needs the rules loaded "
                  "in Prometheus).", [prom(f'count(ALERTS{{alertname=~"Mast.*", alertstate="firing"{alert_sel}}})'
                                           " or vector(0)", instant=True)],
                  "short", (("green", None), ("red", 1)), decimals=0, color_mode="background"), 5, 4)
    grid.add(timeseries("Failure mix by mode", "Runs showing each failure mode, per minute, stacked. A run is "
                        "counted once per mode, when the mode is first detected (loops: while the run goes on).",
                        [prom(_rate("mast_failure_mode_traces_total", sel, "failure_mode", 60), "{{failure_mode}}")],
                        RUNS_PER_MIN, stack=True, bars=True, calcs=("sum", "max"), legend_right=True,
                        overrides=[override(code, displayName=f"{code} {m.name}") for code, m in MODES.items()]),
             14, 9)
    grid.add(timeseries("Failure mix by category", "The same runs by MAST category: FC1 system design, FC2 "
                        "inter-agent misalignment, FC3 task verification.",
                        [prom(_rate("mast_failure_mode_traces_total", sel, "category", 60), "{{category}}")],
                        RUNS_PER_MIN, stack=True, bars=True, calcs=("sum",),
                        overrides=[override(c, displayName=f"{c} {n}") for c, n in CATEGORIES.items()]), 10, 9)
    ratio = mode_ratio(rule, sel)
    grid.add(timeseries(
        f"{mode.code} {mode.name}: rate against its alert threshold",
        f"Share of each agent's runs showing {mode.code} over {window} (solid) and the alert threshold, "
        f"{rule.factor:g}x the agent's own rate over the {duration(rule.baseline)} before (dashed). "
        f"MastFailureModeRateRising fires when the rate stays above both the dashed line and {rule.min_rate:.0%} "
        f"(red line) for {duration(rule.hold)}, with at least {rule.min_traces} runs in the window.",
        [prom(ratio, AGENT_LEGEND), prom(f"{rule.factor:g} * (\n{mode_baseline(rule, sel)}\n)",
                                         "{{agent}} ({{service}}) threshold", ref="B")],
        "percentunit", thresholds=(("green", None), ("red", rule.min_rate)), threshold_style="dashed",
        overrides=[regex_override(".* threshold", custom__lineStyle={"fill": "dash", "dash": [10, 10]})]), 24, 8)


def agents(grid: Grid, sel: str) -> None:
    grid.row("Agents")
    grid.add(timeseries("Share of runs failing, per agent", "Runs with at least one failure mode / all runs, per "
                        "agent.", [prom(f'{_rate("mast_failing_traces_total", sel, "service, agent")}\n/ '
                                        f'{_rate("mast_traces_total", sel, "service, agent")}', AGENT_LEGEND)],
                        "percentunit", thresholds=SHARE_STEPS, threshold_style="dashed", max_value=1), 14, 9)
    runs = _range("mast_traces_total", sel, "service, agent")
    grid.add(bargauge("Top agents by failure rate", "Agents with the largest share of failing runs in the time "
                      "range (at least 10 runs).",
                      [prom(f'topk(10,\n  {_range("mast_failing_traces_total", sel, "service, agent")}\n  / {runs}\n'
                            f'  and on (service, agent) {runs} >= 10\n)', AGENT_LEGEND, instant=True)],
                      "percentunit", SHARE_STEPS, max_value=1), 10, 9)
    by_tool = "service, agent, tool"
    tool_legend = "{{tool}} · {{agent}} ({{service}})"
    calls = _range("mast_tool_calls_total", sel, by_tool)
    grid.add(bargauge("Tools failing most", "Tools with the most failed calls in the time range (span status error, "
                      "or an error type recorded), per agent.",
                      [prom(f'topk(10, {_range("mast_tool_call_errors_total", sel, by_tool)} > 0)', tool_legend,
                            instant=True)], "short"), 12, 8)
    grid.add(bargauge("Slowest tools", "Mean seconds per call in the time range, per agent, for tools called at least "
                      "10 times.",
                      [prom(f'topk(10,\n  {_range("mast_tool_call_seconds_total", sel, by_tool)}\n  / {calls}\n'
                            f'  and on ({by_tool}) {calls} >= 10\n)', tool_legend, instant=True)], "s"), 12, 8)


def failure_store(grid: Grid, config: Config, scope: Dialect, fleet: bool) -> None:
    db = config.exporters.store.database
    grid.row("Findings (ClickHouse store)")
    grid.add(timeseries("Findings over time", "Findings per interval by failure mode, from the store "
                        "(mast_findings).", [sql(q.FINDINGS_OVER_TIME, db, scope)], "short", stack=True, bars=True,
                        calcs=("sum",)), 12, 8)
    grid.add(table("Findings by mode", "Per failure mode: traces and their share of all runs, agents, mean "
                   "confidence, the basis most findings rest on, and the latest reason.",
                   [sql(q.FAILURES, db, scope)],
                   overrides=[override("share", unit="percentunit", decimals=1),
                              override("confidence", unit="percentunit", decimals=0),
                              override("latest_reason", custom__width=420)], sort_by="traces"), 12, 8)
    if fleet:
        grid.add(table("Agents by failure rate (store)", "Exact share of failing runs per agent, with the modes "
                       "seen most, for agents with at least 10 runs in the range.",
                       [sql(q.AGENTS_BY_FAILURE_RATE, db, scope)],
                       overrides=[override("share", unit="percentunit", decimals=1,
                                           custom__cellOptions={"type": "color-background", "mode": "gradient"},
                                           thresholds={"mode": "absolute", "steps": [
                                               {"color": c, "value": v} for c, v in SHARE_STEPS]})],
                       sort_by="share"), 12, 7)
        grid.add(table("Judge verdicts by mode (sampled)", "Only the traces the optional judge read (judge."
                       "sample_rate, and those with unsure findings): per mode, traces judged, structural findings "
                       "confirmed or rejected, modes found that no detector saw, and agreement = confirmed / "
                       "(confirmed + rejected). Empty without the judge.", [sql(q.JUDGE_VERDICTS, db, scope)],
                       overrides=[override("agreement", unit="percentunit", decimals=0)]), 12, 7)
    grid.add(table("Reviews by mode (store)", "People's word on the findings (`mastwatch review`), each run's latest "
                   "per mode: runs found, findings reviewed and the share confirmed, misses reported and the share "
                   "of the runs reviewed as showing the mode that it was found in, the reviewed runs the judge read "
                   "and the share where it said what the reviewer did, and the latest dismissal's note. "
                   "A mode found and not reviewed shows reviewed 0: what is left to look at.",
                   [sql(q.REVIEWS, db, scope)],
                   overrides=[override("confirmed_share", unit="percentunit", decimals=0),
                              override("found_share", unit="percentunit", decimals=0),
                              override("judge_agreement", unit="percentunit", decimals=0),
                              override("latest_dismissal", custom__width=360)], sort_by="reviewed"), 24, 7)
    # every dashboard: on an agent's drill-down, its own recurring problems, where on-call mutes or resolves one
    grid.add(table("Failure signatures", "Recurring problems: findings grouped by agent, mode, tools and reason "
                   "with its values masked. Runs in the range against all time (a new problem has both equal), "
                   "the releases whose runs showed it, first and last seen, waste, models, an example trace "
                   "(trace_id opens it), its reviews, whether it is muted, and whether it was marked fixed (and has "
                   "regressed since).",
                   [sql(q.SIGNATURES, db, scope)],
                   overrides=[override("first_seen_at", custom__width=190),
                              override("last_seen_at", custom__width=190),
                              override("wasted_usd", unit="currencyUSD", decimals=4),
                              override("latest_reason", custom__width=420),
                              trace_link(config.dashboards)], sort_by="runs_in_range"), 24, 9)
    grid.add(table("Releases", "Each release of an agent (its resource's service.version; empty for runs that named "
                   "none) in each environment (deployment.environment.name), newest first: runs, the share with a "
                   "finding and the modes seen most, cost per run and waste, against the release before it: the "
                   "change in that share, its z statistic (standard errors; MastReleaseWorse fires on the newest "
                   "release's), and whether it is beyond chance (worse, better, same; too few runs under 10 on either "
                   "side).", [sql(q.RELEASES, db, scope)],
                   overrides=[override("failing_share", unit="percentunit", decimals=1),
                              override("share_change", unit="percentunit", decimals=1),
                              override("cost_per_run", unit="currencyUSD", decimals=4),
                              override("wasted_usd", unit="currencyUSD", decimals=4),
                              override("against_previous", custom__cellOptions={"type": "color-text"},
                                       mappings=[{"type": "value", "options": {
                                           "worse": {"color": "red", "index": 0},
                                           "better": {"color": "green", "index": 1}}}])]), 24, 7)
    if fleet:  # mutes are not of an agent's time range: the fleet's list
        grid.add(table("Muted problems", "Failure signatures muted now (`mastwatch mute`, or the run page): known "
                       "problems kept out of the alerting series, whatever the time range. Who muted each, until "
                       "when, why, and the runs it has shown in since, which are stored and counted in "
                       "mast_muted_failure_mode_traces_total instead.", [sql(q.MUTES, db, scope)],
                       overrides=[override("note", custom__width=420)], sort_by="runs_since"), 12, 6)
        grid.add(table("Fixed problems", "Failure signatures marked fixed (`mastwatch resolve`, or the run page), "
                       "whatever the time range: who marked each, when, why, and the runs that showed it since (0: "
                       "the fix holds; more: a regression, which MastFailureSignatureRegressed alerts on), the "
                       "regressed first.", [sql(q.RESOLUTIONS, db, scope)],
                       overrides=[override("note", custom__width=300)]), 12, 6)
    grid.add(table("Recent traces with findings", "The latest traces with findings: their modes, each mode's "
                   "basis and reason, the highest confidence, and the evidence span ids. trace_id opens the trace "
                   "in the trace UI (dashboards.trace_url).", [sql(q.RECENT_FAILING_TRACES, db, scope)],
                   overrides=[override("time", unit="dateTimeAsIso", custom__width=170),
                              override("top_confidence", unit="percentunit", decimals=0, custom__width=95),
                              override("reasons", custom__width=520), trace_link(config.dashboards)]),
             24, 10)


def failure_budgets(grid: Grid, config: Config, sel: str) -> None:
    """What each agent has left of each objective's failure budget (rules.slos), and how fast it burns."""
    if not config.rules.slos:
        return
    grid.row("Failure budgets")
    legend = "{{slo}}: {{agent}} ({{service}})"
    grid.add(bargauge("Failure budget left", "Per objective (rules.slos) and agent: the share of its error budget "
                      "left over the objective's period (1: whole; 0: spent; below 0: overspent). The budget is the "
                      "share of runs the objective lets show the failure.",
                      [prom(f"min by (slo, service, agent) ({series(slo.REMAINING, sel)})", legend, instant=True)],
                      "percentunit", (("red", None), ("orange", 0), ("green", 0.25)), max_value=1), 12, 8)
    burns = []
    for objective in config.rules.slos:
        ratio = series(slo.errors(slo.window(objective, slo.PAGE[0].long)), f'slo="{objective.name}"', sel)
        burns.append(prom(f"{ratio}\n/ {1 - objective.objective:.6g}", legend))
    grid.add(timeseries("Failure budget burn rate", "How many times faster than its objective allows each agent "
                        "spends its budget, over the fast page's long window (an hour for a 30-day period). 1 "
                        "spends it exactly over the period; MastFailureBudgetBurnFast pages above 14.4 (red).",
                        burns, "suffix:x", thresholds=(("green", None), ("orange", 1), ("red", 14.4)),
                        threshold_style="dashed"), 12, 8)


def spend(grid: Grid, config: Config, sel: str, model_sel: str, by: str, legend: str) -> None:
    """Repeated-step spend; `by` is the grouping of the per-series panels (agents, or one agent's models)."""
    budget = config.rules.wasted_spend
    per_hour = budget.budget_usd * 3600 / budget.window
    msel = f"{sel}{model_sel}"
    grid.row("Repeated-step spend")
    grid.add(stat("Spend", "Inference spend in the time range, priced by genai-prices.",
                  [prom(_range("mast_cost_usd_total", msel), instant=True)], "currencyUSD", decimals=2), 4, 4)
    grid.add(stat("Burnt on repeated steps", "Spend of the model calls that produced repeated steps.",
                  [prom(_range("mast_wasted_cost_usd_total", msel), instant=True)], "currencyUSD", decimals=2), 4, 4)
    grid.add(stat("Share of spend on repeats", "Repeated-step spend / all spend in the time range.",
                  [prom(f'{_range("mast_wasted_cost_usd_total", msel)}\n/ {_range("mast_cost_usd_total", msel)}',
                        instant=True)], "percentunit", SHARE_STEPS, decimals=1), 4, 4)
    grid.add(stat("Wasted tokens", "Tokens (input, output, cache) of the model calls that produced repeated steps.",
                  [prom(_range("mast_wasted_tokens_total", msel), instant=True)], "short", decimals=0), 4, 4)
    grid.add(stat("Time on repeated steps", "The repeated steps' own time and that of the model calls that "
                  "produced them (each call once), summed over steps: time the agents' users waited for nothing.",
                  [prom(_range("mast_wasted_seconds_total", sel), instant=True)], "s", decimals=0), 4, 4)
    grid.add(stat("Repeated steps", "Steps that redid a completed step.",
                  [prom(_range("mast_repeated_steps_total", sel), instant=True)], "short", decimals=0), 4, 4)
    grid.add(timeseries(f"Wasted spend per {legend}", f"USD per hour burnt on repeated steps. Dashed: the "
                        f"default budget, {budget.budget_usd:g} USD per {duration(budget.window)} per agent "
                        "(rules.wasted_spend).",
                        [prom(_rate("mast_wasted_cost_usd_total", msel, by, 3600), _legend(by))], USD_PER_HOUR,
                        # not stacked: each line is held to the per-agent budget line, not their sum
                        thresholds=(("green", None), ("red", per_hour)), threshold_style="dashed",
                        axis_label="USD / hour"), 12, 8)
    if by != "model":
        grid.add(timeseries("Wasted spend per model", "USD per hour burnt on repeated steps, by model.",
                            [prom(_rate("mast_wasted_cost_usd_total", msel, "model", 3600), "{{model}}")],
                            USD_PER_HOUR, stack=True, axis_label="USD / hour"), 12, 8)
    grid.add(timeseries("Share of spend burnt on repeats", "Repeated-step spend / all spend.",
                        [prom(f'{_rate("mast_wasted_cost_usd_total", msel, by)}\n/ '
                              f'{_rate("mast_cost_usd_total", msel, by)}', _legend(by))],
                        "percentunit", thresholds=SHARE_STEPS, threshold_style="dashed", max_value=1), 12, 8)
    grid.add(timeseries("Wasted tokens by type", "Tokens of the model calls that produced repeated steps, per "
                        "minute: input (uncached), output, cache reads and writes.",
                        [prom(_rate("mast_wasted_tokens_total", msel, f"{by}, type", 60),
                              _legend(by) + " {{type}}")], TOKENS_PER_MIN, stack=True), 12, 8)
    grid.add(timeseries("Time on repeated steps by tool", "Seconds per hour spent on repeated steps, by the "
                        "repeated step's tool: its own time and that of the model call that produced it "
                        "(`(model output)`: repeated model text).",
                        [prom(_rate("mast_wasted_seconds_total", sel, "tool", 3600), "{{tool}}")], "s",
                        stack=True, axis_label="seconds / hour"), 12, 8)
    grid.add(timeseries("Share of run time on repeats", "Time on repeated steps / the runs' durations, per agent. "
                        "Steps run in parallel can take more time than the run's wall time, so the share can pass "
                        "1 for an agent that repeats parallel calls.",
                        [prom(f'{_rate("mast_wasted_seconds_total", sel, "service, agent")}\n/ '
                              f'{_rate("mast_run_duration_seconds_sum", sel, "service, agent")}', AGENT_LEGEND)],
                        "percentunit", thresholds=SHARE_STEPS, threshold_style="dashed"), 12, 8)
    grid.add(bargauge("Tools repeated most", "Tools whose calls were repeated most in the time range "
                      "(`(model output)`: repeated model text).",
                      [prom(f'topk(10, {_range("mast_repeated_steps_total", sel, "tool")})', "{{tool}}",
                            instant=True)], "short"), 12, 8)
    grid.add(timeseries(f"Repeated-step spend over {duration(budget.window)} against the budget",
                        "What the MastRepeatedStepSpendOverBudget alert compares with each agent's budget "
                        f"(default {budget.budget_usd:g} USD, red line"
                        + (f"; own budgets: {', '.join(f'{a} {u:g}' for a, u in sorted(budget.budgets.items()))}"
                           if budget.budgets else "") + ").",
                        [prom(f"sum by (service, agent) "
                              f"({growth(f'mast_wasted_cost_usd_total{{{msel}}}', duration(budget.window))})",
                              AGENT_LEGEND)], "currencyUSD",
                        thresholds=(("green", None), ("red", budget.budget_usd)), threshold_style="line"), 12, 8)
    keys = "service, agent, model"
    grid.add(table("Wasted spend by agent and model", "Totals in the time range.", [
        prom(_range("mast_wasted_cost_usd_total", msel, keys), table=True, ref="A"),
        prom(_range("mast_cost_usd_total", msel, keys), table=True, ref="B"),
        prom(_range("mast_wasted_tokens_total", msel, keys), table=True, ref="C")],
        transformations=[{"id": "merge", "options": {}},
                         {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": {
                             "Value #A": "wasted USD", "Value #B": "spend USD", "Value #C": "wasted tokens"}}}],
        overrides=[override("wasted USD", unit="currencyUSD", decimals=4),
                   override("spend USD", unit="currencyUSD", decimals=4),
                   override("wasted tokens", unit="short", decimals=0)], sort_by="wasted USD"), 24, 8)


def calls(grid: Grid, config: Config, sel: str, model_sel: str) -> None:
    """Tool and model calls: how many, how many failed, how long they took (counted when a run is classified)."""
    tools, errors, seconds = "mast_tool_calls_total", "mast_tool_call_errors_total", "mast_tool_call_seconds_total"
    msel, per_tool = f"{sel}{model_sel}", _rate(tools, sel, "tool")
    grid.row("Tool and model calls")
    grid.add(timeseries("Tool calls by tool", "Tool calls per minute, by tool.",
                        [prom(_rate(tools, sel, "tool", 60), "{{tool}}")], "suffix: calls/min", stack=True), 8, 8)
    grid.add(timeseries("Tool failures by tool", "Share of each tool's calls that failed (span status error, or an "
                        "error type recorded).",
                        [prom(f'{_rate(errors, sel, "tool")}\n/ {per_tool}', "{{tool}}")], "percentunit",
                        thresholds=SHARE_STEPS, threshold_style="dashed", max_value=1), 8, 8)
    grid.add(timeseries("Mean tool call time by tool", "Seconds per call, by tool.",
                        [prom(f'{_rate(seconds, sel, "tool")}\n/ {per_tool}', "{{tool}}")], "s"), 8, 8)
    grid.add(timeseries("Model calls by model", "Model (inference) calls per minute, by model.",
                        [prom(_rate("mast_model_calls_total", msel, "model", 60), "{{model}}")], "suffix: calls/min",
                        stack=True), 12, 8)
    grid.add(timeseries("Mean model call time by model", "Seconds per model call, by model.",
                        [prom(f'{_rate("mast_model_call_seconds_total", msel, "model")}\n/ '
                              f'{_rate("mast_model_calls_total", msel, "model")}', "{{model}}")], "s"), 12, 8)
    per_run(grid, config, sel)
    called, failed = _range(tools, sel, "tool"), _range(errors, sel, "tool")
    grid.add(table("Tools in the time range", "Per tool: calls, failed calls and their share, mean seconds per "
                   "call, and calls that repeated a completed step (FM-1.3).", [
                       prom(called, table=True, ref="A"), prom(failed, table=True, ref="B"),
                       prom(f"{failed}\n/ {called}", table=True, ref="C"),
                       prom(f'{_range(seconds, sel, "tool")}\n/ {called}', table=True, ref="D"),
                       prom(_range("mast_repeated_steps_total", sel, "tool"), table=True, ref="E")],
                   transformations=[{"id": "merge", "options": {}},
                                    {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": {
                                        "Value #A": "calls", "Value #B": "failed", "Value #C": "failed share",
                                        "Value #D": "mean seconds", "Value #E": "repeated"}}}],
                   overrides=[override("calls", unit="short", decimals=0), override("failed", unit="short", decimals=0),
                              override("failed share", unit="percentunit", decimals=1),
                              override("mean seconds", unit="s", decimals=3),
                              override("repeated", unit="short", decimals=0)], sort_by="calls"), 24, 8)


def _quantiles(metric: str, sel: str, what: str, refs: str = "AB") -> list[PromTarget]:
    """The median and 95th percentile of a per-run distribution over time."""
    return [prom(f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{{{sel}}}[$__rate_interval])))",
                 f"{what} p{round(q * 100)}", ref=ref) for q, ref in zip((0.5, 0.95), refs, strict=True)]


def per_run(grid: Grid, config: Config, sel: str) -> None:
    """How long runs go: calls, duration and cost per run (all the agent's runs, whatever models they called)."""
    rule = config.rules.run_length
    threshold = f"{rule.factor:g} * {run_calls_quantile(rule, 'service, agent', baseline=True, sel=sel)}"
    grid.add(timeseries("Calls per run", "Median and 95th percentile of model calls and tool calls per run, as the "
                        "GenAI conventions' gen_ai.invoke_agent.inference_calls and tool_calls count them. A rising "
                        f"p95 is runs going round longer before they end; dashed, MastRunsGettingLonger's threshold: "
                        f"{rule.factor:g}x the {rule.quantile:.0%} quantile of model calls per run over the "
                        f"{duration(rule.baseline)} before the last {duration(rule.window)}.",
                        _quantiles("mast_run_model_calls", sel, "model calls")
                        + _quantiles("mast_run_tool_calls", sel, "tool calls", "CD")
                        + [prom(threshold, "alert threshold", ref="E")], "short",
                        overrides=[regex_override("alert threshold",
                                                  custom__lineStyle={"fill": "dash", "dash": [10, 10]})]), 8, 8)
    grid.add(timeseries("Run duration", "Median and 95th percentile of a run's duration, from its first span's start "
                        "to its last span's end.", _quantiles("mast_run_duration_seconds", sel, "duration"), "s"),
             8, 8)
    grid.add(timeseries("Cost per run", "Median and 95th percentile of a run's inference spend (runs whose every "
                        "model has a price).", _quantiles("mast_run_cost_usd", sel, "cost"), "currencyUSD"), 8, 8)


def _legend(by: str) -> str:
    return " ".join(f"{{{{{label.strip()}}}}}" for label in by.split(","))


def spend_store(grid: Grid, config: Config, scope: Dialect) -> None:
    db = config.exporters.store.database
    usd = {"unit": "currencyUSD", "decimals": 4}
    grid.row("Spend and repeated-step spend (ClickHouse store)")
    grid.add(stat("Store totals", "Runs, share of runs failing, spend, repeated-step spend and its share, from the "
                  "store.", [sql(q.SPEND_SUMMARY, db, scope)], "short", no_value="-", text_mode="value_and_name",
                  overrides=[override("runs", decimals=0), override("failing_share", unit="percentunit", decimals=1),
                             override("spend_usd", unit="currencyUSD", decimals=2),
                             override("wasted_usd", unit="currencyUSD", decimals=2),
                             override("wasted_share", unit="percentunit", decimals=1)]), 24, 4)
    grid.add(timeseries("Spend by model (store)", "USD of every run's model calls per interval and model, from the "
                        "store: the long view of what each model costs.", [sql(q.SPEND_OVER_TIME, db, scope)],
                        "currencyUSD", stack=True, bars=True, calcs=("sum",)), 12, 8)
    grid.add(timeseries("Wasted spend trend", "USD burnt on repeated steps per interval and agent, from the "
                        "store: the long view.", [sql(q.WASTED_OVER_TIME, db, scope)], "currencyUSD", stack=True,
                        bars=True, calcs=("sum",)), 12, 8)
    grid.add(table("Spend and waste by agent and model (store)", "Every run's model calls per agent and model: runs, "
                   "calls, mean seconds per call, tokens, USD (unpriced_runs: runs whose model has no price, counted "
                   "as 0), and what repeated steps burnt of it, from mast_model_spend.",
                   [sql(q.SPEND_BY_MODEL, db, scope)],
                   overrides=[override("spend_usd", **usd), override("wasted_usd", **usd),
                              override("wasted_share", unit="percentunit", decimals=1)], sort_by="spend_usd"), 24, 8)
    grid.add(table("Wasted spend by agent (store)", "Runs, looping runs, repeated steps, wasted tokens and USD, and "
                   "the time the repeated steps took (with their model calls') and its share of the runs' time.",
                   [sql(q.WASTED_BY_AGENT, db, scope)],
                   overrides=[override("spend_usd", **usd), override("wasted_usd", **usd),
                              override("wasted_share", unit="percentunit", decimals=1),
                              override("wasted_seconds", unit="s", decimals=1), override("run_seconds", unit="s"),
                              override("wasted_time_share", unit="percentunit", decimals=1)],
                   sort_by="wasted_usd"), 12, 8)
    grid.add(table("Wasted tokens and USD by agent and model (store)", "Repeated steps per agent and the model "
                   "whose calls produced them: tokens by type (uncached input, output, cache reads and writes) and "
                   "USD, from mast_repeated_steps.", [sql(q.WASTE_BY_MODEL, db, scope)],
                   overrides=[override("wasted_cost_usd", **usd)], sort_by="wasted_cost_usd"), 12, 8)
    grid.add(table("Tools repeated most (store)", "Tools by repeated steps, with the traces and agents that "
                   "repeated them and what the repeats cost and took (`(model output)`: repeated model text).",
                   [sql(q.WASTE_BY_TOOL, db, scope)], overrides=[override("wasted_cost_usd", **usd),
                                                                 override("wasted_seconds", unit="s", decimals=1)],
                   sort_by="repeated_steps"), 24, 8)
    grid.add(table("Repeated steps by agent and tool (store)", "Each agent's repeated tools, agents by their total "
                   "waste (what `mastwatch top waste` prints).", [sql(q.WASTE, db, scope)],
                   overrides=[override("wasted_cost_usd", **usd), override("agent_wasted_cost_usd", **usd),
                              override("wasted_seconds", unit="s", decimals=1)]), 24, 8)
    grid.add(table("Costliest looping runs", "Runs with repeated steps, by wasted USD. trace_id opens the trace.",
                   [sql(q.COSTLIEST_LOOPS, db, scope)],
                   overrides=[override("time", unit="dateTimeAsIso", custom__width=170),
                              override("wasted_cost_usd", **usd), override("cost_usd", **usd),
                              override("wasted_seconds", unit="s", decimals=1), trace_link(config.dashboards)]), 24, 9)
