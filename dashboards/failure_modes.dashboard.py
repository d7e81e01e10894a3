"""Agent failure modes: the failure mix over time, who fails most, the rising-mode alert's view, and the
latest findings with links to their traces."""

from grafanalib.core import Dashboard

from mastwatch.config import Config
from mastwatch.dashboards import sections
from mastwatch.dashboards.clickhouse import FLEET
from mastwatch.dashboards.panels import Grid, selector, series, topology, variable
from mastwatch.dashboards.panels import dashboard as make_dashboard

UID = "mastwatch-failure-modes"


def build(config: Config) -> Dashboard:
    deployment, where = topology(config.dashboards.topology_labels, "mast_traces_total")
    sel = selector(where, 'service=~"$service"')
    grid = Grid()
    sections.failure_overview(grid, config, sel, f", {sel}")
    sections.failure_budgets(grid, config, sel)
    sections.agents(grid, sel)
    sections.failure_store(grid, config, FLEET, fleet=True)
    return make_dashboard("mastwatch / Agent failure modes", UID, "MAST failure modes of agent runs, live from "
                     "Prometheus and in detail from the ClickHouse store.", grid,
                     [*deployment, variable("service", "Service",
                                           f"label_values({series('mast_traces_total', where)}, service)")])


dashboard = build(Config())  # grafanalib's generate-dashboard reads this
