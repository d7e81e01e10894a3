"""One alert rule as the generated rules write it: summary, description and runbook_url (dashboards/runbooks.md has
one section per alert), the routing labels of `rules.labels`, and for an alert about an agent, with
`dashboards.grafana_url`, a link to its drill-down dashboard."""

from __future__ import annotations

from typing import Any

from mastwatch.config import Config

from .panels import AGENT_DASHBOARD_UID
from .promql import duration


def agent_dashboard_link(config: Config, service: bool = True) -> str | None:
    """The agent drill-down of the alert's agent (and service), with the alert's labels as its variables; None
    without `dashboards.grafana_url`."""
    url = config.dashboards.grafana_url.rstrip("/")
    if not url:
        return None
    variables = ("var-service={{ $labels.service | urlquery }}&" if service else "") + \
        "var-agent={{ $labels.agent | urlquery }}"
    return f"{url}/d/{AGENT_DASHBOARD_UID}?{variables}"


def alert(config: Config, name: str, expr: str, hold: float, severity: str, summary: str, description: str,
          labels: dict[str, str] | None = None, keep_firing_for: float = 0,
          dashboard: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if hold:
        rule["for"] = duration(hold)
    if keep_firing_for:
        rule["keep_firing_for"] = duration(keep_firing_for)
    rule["labels"] = {**config.rules.labels, "severity": severity, **(labels or {})}
    rule["annotations"] = {"summary": summary, "description": description,
                           "runbook_url": config.rules.runbook_url.replace("{anchor}", name.lower()),
                           **({"dashboard": dashboard} if dashboard else {})}
    return rule
