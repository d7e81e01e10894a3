"""mast_new_failure_signatures_total: failure signatures (see `collector.signature`) new to this deployment, counted
once they recur in `min_runs` runs, per service, agent and failure mode. The signature itself is no label (its
values are unbounded); `mastwatch top signatures` and the dashboards' signature table name them. What this instance
has seen is seeded from the store at start, so a restart does not make every known signature new again; replicas
each count what they see (their store, shared, seeds them alike)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter

from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.published import Increment
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.signature import signature

from .totals import LabelLimiter

MEMORY = 100_000  # signatures remembered; the least recently seen are forgotten past it


class NewSignatures:
    """Implements the processor's Exporter protocol."""

    def __init__(self, registry: CollectorRegistry, limit: LabelLimiter, min_runs: int,
                 known: Iterable[tuple[str, int]] = ()) -> None:
        self.min_runs, self.limit = min_runs, limit
        self.counter = Counter("mast_new_failure_signatures", "Failure signatures new to this deployment, counted "
                               "when they reach min_runs runs", ["service", "agent", "failure_mode", "category"],
                               registry=registry)
        self._runs: OrderedDict[str, int] = OrderedDict((s, n) for s, n in known)

    def export_increments(self, increments: list[Increment]) -> None:
        pass

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        runs, limit = self._runs, self.limit
        for verdict in verdicts:
            for code, finding in verdict.findings.items():
                if finding.basis == "judge":
                    continue
                key = signature(verdict.agent, code, tuple(s.tool or "" for s in finding.repeated), finding.reason)
                seen = runs.pop(key, 0) + 1  # once per run: a verdict has one finding per mode
                runs[key] = seen
                if seen == self.min_runs:
                    self.counter.labels(limit("service", verdict.service), limit("agent", verdict.agent), code,
                                        MODES[code].category).inc()
            while len(runs) > MEMORY:
                runs.popitem(last=False)

    def shutdown(self) -> None:
        pass
