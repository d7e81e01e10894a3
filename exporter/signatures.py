"""mast_new_failure_signatures_total: failure signatures (see `collector.signature`) new to this deployment, counted
once they recur in `min_runs` runs, per service, agent and failure mode. The signature itself is no label (its
values are unbounded); `mastwatch top signatures` and the dashboards' signature table name them. What this instance
has seen is seeded from the store at start, so a restart does not make every known signature new again, and read
from it again every `signature_refresh` (`refresh`): the runs of a signature then count those every replica
writing to the store saw, so one that recurs spread over replicas is counted too. A signature that reaches
`min_runs` is counted by each replica that learns it (at least once in all: alert on an increase, count them in
the store).

mast_regressed_failure_signatures_total: signatures people marked fixed (`mastwatch resolve`) shown again by a run
that started after, counted once per resolution by each process that sees such a run (`resolved`, set from the
store with the mutes)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter

from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.published import Increment
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.signature import finding_signature
from mastwatch.collector.threads import name_os_thread

from .totals import LabelLimiter

log = logging.getLogger(__name__)
MEMORY = 100_000  # signatures remembered; the least recently seen are forgotten past it


class NewSignatures:
    """Implements the processor's Exporter protocol."""

    def __init__(self, registry: CollectorRegistry, limit: LabelLimiter, min_runs: int,
                 known: Iterable[tuple[str, int]] = ()) -> None:
        """`known`: (signature, runs) pairs, the most recently seen last (a store's `known_signatures`)."""
        self.min_runs, self.limit = min_runs, limit
        self.counter = Counter("mast_new_failure_signatures", "Failure signatures new to this deployment, counted "
                               "when they reach min_runs runs", ["service", "agent", "failure_mode", "category"],
                               registry=registry)
        self._runs: OrderedDict[str, int] = OrderedDict((k[0], k[1]) for k in known)
        self._lock = threading.Lock()  # verdicts come on the processor's thread, the store's runs on another
        self.regressed = Counter("mast_regressed_failure_signatures", "Failure signatures marked fixed (mastwatch "
                                 "resolve) shown again by a run started after", ["service", "agent", "failure_mode",
                                                                                 "category"], registry=registry)
        # signature -> when it was resolved (ns), replaced whole by whoever reads the store
        self.resolved: dict[str, int] = {}
        self._regressions: dict[str, int] = {}  # signature -> the resolution whose regression was counted

    def learn(self, known: Iterable[tuple[str, int, str, str, str]]) -> None:
        """The runs the store counts per signature (signature, runs, service, agent, failure mode), every replica's:
        a signature they take to `min_runs` is counted now."""
        with self._lock:
            runs = self._runs
            for key, stored, service, agent, code in known:
                seen = runs.get(key, 0)
                if stored <= seen:
                    continue
                runs[key] = stored
                runs.move_to_end(key)
                if seen < self.min_runs <= stored and code in MODES:
                    self.counter.labels(self.limit("service", service), self.limit("agent", agent), code,
                                        MODES[code].category).inc()
            while len(runs) > MEMORY:
                runs.popitem(last=False)

    def export_increments(self, increments: list[Increment]) -> None:
        pass

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        with self._lock:
            self._count(verdicts)

    def _count(self, verdicts: list[Verdict]) -> None:
        runs, limit = self._runs, self.limit
        for verdict in verdicts:
            for code, finding in verdict.findings.items():
                key = finding_signature(verdict.agent, code, finding)
                if not key:  # the judge's
                    continue
                if self.resolved:
                    self._regression(key, verdict, code)
                seen = runs.pop(key, 0) + 1  # once per run: a verdict has one finding per mode
                runs[key] = seen
                if seen == self.min_runs:
                    self.counter.labels(limit("service", verdict.service), limit("agent", verdict.agent), code,
                                        MODES[code].category).inc()
            while len(runs) > MEMORY:
                runs.popitem(last=False)

    def _regression(self, key: str, verdict: Verdict, code: str) -> None:
        """Count a resolved signature's first run since its resolution."""
        resolved_ns = self.resolved.get(key)
        if resolved_ns is None or verdict.started_at_ns < resolved_ns or self._regressions.get(key) == resolved_ns:
            return
        self._regressions[key] = resolved_ns
        self.regressed.labels(self.limit("service", verdict.service), self.limit("agent", verdict.agent), code,
                              MODES[code].category).inc()

    def shutdown(self) -> None:
        pass


class SignatureRefresh:
    """Reads the store's signatures into `NewSignatures` every `interval` seconds, on a thread of its own, and
    calls `also` then (the muted signatures read again)."""

    def __init__(self, signatures: NewSignatures, read: Callable[[], Iterable[tuple[str, int, str, str, str]]],
                 interval: float, also: Callable[[], object] | None = None) -> None:
        self.signatures, self.read, self.interval, self.also = signatures, read, interval, also
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mastwatch-signatures", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        name_os_thread()
        while not self._stop.wait(self.interval):
            try:
                self.signatures.learn(self.read())
            except Exception:  # the next round tries again; counting from this replica's own runs goes on
                log.exception("reading the store's failure signatures failed")
            if self.also is not None:
                self.also()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
