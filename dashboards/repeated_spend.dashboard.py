"""Repeated-step spend: tokens and dollars burnt on repeated steps, per agent and model, their share of all
spend, the tools repeated most, and the trend."""

from grafanalib.core import Dashboard

from mastwatch.config import Config
from mastwatch.dashboards import sections
from mastwatch.dashboards.clickhouse import FLEET
from mastwatch.dashboards.panels import Grid, variable
from mastwatch.dashboards.panels import dashboard as make_dashboard

UID = "mastwatch-repeated-spend"


def build(config: Config) -> Dashboard:
    grid = Grid()
    sections.spend(grid, config, 'service=~"$service"', "", "service, agent", "agent")
    sections.spend_store(grid, config, FLEET)
    return make_dashboard("mastwatch / Repeated-step spend", UID, "Tokens and dollars burnt on repeated steps (MAST "
                     "FM-1.3), per agent and model.", grid,
                     [variable("service", "Service", "label_values(mast_traces_total, service)")])


dashboard = build(Config())  # grafanalib's generate-dashboard reads this
