"""mast_release_failure_zscore: how far the newest release of each agent in each environment (its runs'
service.version, as `mastwatch top versions` compares them) fails more often than the release before it, over the
last `release_window`: the two-proportion z statistic of their shares of runs with a finding (positive: the newer
fails more; 3 or more is rarely chance). Only once both have 10 runs, and while the newest still runs (a run
within the last `LIVE` seconds: a rollback clears its series). Read from the store at start and again with the
failure signatures (`signature_refresh`), so every replica writing to the store counts. One series per agent and
environment at a time: a new release's replaces its predecessor's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily

from .totals import LabelLimiter

LABELS = ("service", "agent", "environment", "version", "previous_version")
LIVE = 3600.0


class ReleaseComparison:
    """A Prometheus collector of the store's latest comparison of releases (`update`)."""

    def __init__(self, registry: CollectorRegistry, limit: LabelLimiter) -> None:
        self.limit = limit
        self._series: list[tuple[list[str], float]] = []
        registry.register(self)

    def update(self, rows: list[dict[str, Any]], now: float) -> None:
        """`top versions` rows: within each agent and environment the newest release first. Groups whose newest
        runs name no version, or whose newest release has none before it in the window, too few runs, or no run
        since `now` - LIVE (epoch seconds), have no series."""
        newest: dict[tuple[str, str, str], dict[str, Any]] = {}
        for row in rows:
            newest.setdefault((row["service"], row["agent"], row["environment"]), row)
        limit = self.limit.value
        self._series = [([limit("service", r["service"]), limit("agent", r["agent"]), r["environment"],
                          r["version"], r["previous_version"]], float(r["zscore"]))
                        for r in newest.values() if r["version"] and r["against_previous"] not in ("", "too few runs")
                        and _seconds(r["last_run"]) >= now - LIVE]

    def describe(self) -> list[GaugeMetricFamily]:
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("mast_release_failure_zscore", "How far the newest release of an agent in an "
                                   "environment fails more often than the release before it: the two-proportion z "
                                   "statistic of their shares of runs with a finding", labels=LABELS)
        for labels, value in self._series:
            family.add_metric(labels, value)
        yield family


def _seconds(text: str) -> float:
    """Epoch seconds of a time as the query writes it (`2026-05-01 12:00:00.000`, UTC)."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()
