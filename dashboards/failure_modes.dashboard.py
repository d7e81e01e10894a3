"""Agent failure modes: the failure mix over time, who fails most, the rising-mode alert's view, and the
latest findings with links to their traces."""

from grafanalib.core import Dashboard

from mastwatch.config import Config
from mastwatch.dashboards import sections
from mastwatch.dashboards.clickhouse import FLEET
from mastwatch.dashboards.panels import Grid, variable
from mastwatch.dashboards.panels import dashboard as make_dashboard

UID = "mastwatch-failure-modes"


def build(config: Config) -> Dashboard:
    sel = 'service=~"$service"'
    grid = Grid()
    sections.failure_overview(grid, config, sel, ', service=~"$service"')
    sections.agents(grid, sel)
    sections.failure_store(grid, config, FLEET, fleet=True)
    return make_dashboard("mastwatch / Agent failure modes", UID, "MAST failure modes of agent runs, live from "
                     "Prometheus and in detail from the ClickHouse store.", grid,
                     [variable("service", "Service", "label_values(mast_traces_total, service)")])


dashboard = build(Config())  # grafanalib's generate-dashboard reads this
