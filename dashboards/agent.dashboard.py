"""Agent drill-down: everything of the fleet dashboards for one agent ($service, $agent), with its models
($model) and its recent traces."""

from grafanalib.core import Dashboard

from mastwatch.config import Config
from mastwatch.dashboards import sections
from mastwatch.dashboards.clickhouse import AGENT
from mastwatch.dashboards.panels import (
    AGENT_DASHBOARD_UID,
    Grid,
    marker,
    override,
    selector,
    series,
    sql,
    table,
    topology,
    trace_link,
    variable,
)
from mastwatch.dashboards.panels import dashboard as make_dashboard
from mastwatch.exporter.store import queries as q

UID = AGENT_DASHBOARD_UID


def build(config: Config) -> Dashboard:
    deployment, where = topology(config.dashboards.topology_labels, "mast_traces_total")
    sel = selector(where, 'service="$service", agent="$agent"')
    grid = Grid()
    sections.failure_overview(grid, config, sel, f", {sel}")
    sections.failure_budgets(grid, config, sel)
    sections.spend(grid, config, sel, ', model=~"$model"', "model", "model")
    sections.calls(grid, config, sel, ', model=~"$model"')
    sections.failure_store(grid, config, AGENT, fleet=False)
    grid.add(table("Recent traces", "Every run of the agent (with the selected models), failing or not. trace_id "
                   "opens the trace in the trace UI.",
                   [sql(q.RECENT_TRACES, config.exporters.store.database, AGENT)],
                   overrides=[override("time", unit="dateTimeAsIso", custom__width=170),
                              override("duration", unit="s"), override("cost_usd", unit="currencyUSD", decimals=4),
                              override("wasted_cost_usd", unit="currencyUSD", decimals=4),
                              override("wasted_seconds", unit="s", decimals=1), trace_link(config.dashboards)]),
             24, 10)
    sections.spend_store(grid, config, AGENT)
    of_service = series("mast_traces_total", where, 'service="$service"')
    variables = [
        *deployment,
        variable("service", "Service", f"label_values({series('mast_traces_total', where)}, service)", multi=False,
                 include_all=False),
        variable("agent", "Agent", f"label_values({of_service}, agent)", multi=False, include_all=False),
        variable("model", "Model", f"label_values(mast_tokens_total{{{sel}}}, model)"),
    ]
    releases = marker("Releases", sql(q.RELEASE_MARKERS, config.exporters.store.database, AGENT))
    return make_dashboard("mastwatch / Agent drill-down", UID, "One agent: its failure modes, spend and repeated "
                          "steps, its tool and model calls, and its recent traces; a marker where each release "
                          "first ran.", grid, variables, markers=[releases])


dashboard = build(Config())  # grafanalib's generate-dashboard reads this
