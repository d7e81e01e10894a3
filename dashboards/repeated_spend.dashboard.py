"""Repeated-step spend: tokens and dollars burnt on repeated steps, per agent and model, their share of all
spend, the tools repeated most, and the trend."""

from grafanalib.core import Dashboard

from mastwatch.config import Config
from mastwatch.dashboards import sections
from mastwatch.dashboards.clickhouse import FLEET
from mastwatch.dashboards.panels import Grid, selector, series, topology, variable
from mastwatch.dashboards.panels import dashboard as make_dashboard

UID = "mastwatch-repeated-spend"


def build(config: Config) -> Dashboard:
    deployment, where = topology(config.dashboards.topology_labels, "mast_traces_total")
    grid = Grid()
    sections.spend(grid, config, selector(where, 'service=~"$service"'), "", "service, agent", "agent")
    sections.spend_store(grid, config, FLEET)
    return make_dashboard("mastwatch / Repeated-step spend", UID, "Tokens and dollars burnt on repeated steps (MAST "
                     "FM-1.3), per agent and model.", grid,
                     [*deployment, variable("service", "Service",
                                           f"label_values({series('mast_traces_total', where)}, service)")])


dashboard = build(Config())  # grafanalib's generate-dashboard reads this
