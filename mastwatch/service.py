"""The running server: OTLP receivers -> processor -> Prometheus and store exporters."""

from __future__ import annotations

import errno
import functools
import gc
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from mastwatch import remote
from mastwatch.collector.judge.stage import Judge
from mastwatch.collector.model.modes import MODES
from mastwatch.collector.processor import GC_THRESHOLDS, Exporter, LiveListener, Processor
from mastwatch.collector.receiver.grpc_server import GrpcReceiver
from mastwatch.collector.receiver.http_server import OtlpHttpServer
from mastwatch.config import Config
from mastwatch.dashboards import runbooks, trace_page
from mastwatch.dashboards.slo import watched_modes
from mastwatch.exporter import recent
from mastwatch.exporter.evaluations import EvaluationEventsExporter
from mastwatch.exporter.prometheus import JudgeMetrics, PrometheusExporter
from mastwatch.exporter.recent import RecentFindings
from mastwatch.exporter.releases import ReleaseComparison
from mastwatch.exporter.signatures import NewSignatures, SignatureRefresh
from mastwatch.exporter.store import StoreExporter
from mastwatch.exporter.store.mutes import MUTES_PATH, Mute, muted_signatures
from mastwatch.exporter.store.queries import Filters, run
from mastwatch.exporter.store.resolutions import RESOLUTIONS_PATH, Resolution, resolved_signatures
from mastwatch.exporter.store.reviews import REVIEWS_PATH
from mastwatch.exporter.webhook import WebhookNotifier

log = logging.getLogger(__name__)


def occupied_endpoints(config: Config) -> list[str]:
    """The configured listening endpoints another process already listens on, each with what it is for: asked
    before anything starts, so that every one is told at once (and the store is not opened in vain)."""
    r = config.receiver
    wanted = [("OTLP/gRPC", r.grpc.endpoint, r.grpc.enabled), ("OTLP/HTTP", r.http.endpoint, r.http.enabled),
              ("metrics", config.exporters.prometheus.endpoint, True)]
    occupied = []
    for what, endpoint, enabled in wanted:
        host, _, port = endpoint.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
        if not enabled or not port.isdigit() or int(port) == 0:
            continue
        try:
            socket.create_server((host, int(port)), family=socket.AF_INET6 if ":" in host else socket.AF_INET).close()
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                occupied.append(f"{what} on {endpoint}")
    return occupied


class Service:
    def __init__(self, config: Config) -> None:
        occupied = occupied_endpoints(config)
        if occupied:
            raise OSError(f"cannot listen for {', '.join(occupied)}: address already in use (another mastwatch, "
                          "or another server; change the endpoints with --grpc-endpoint, --http-endpoint, "
                          "--metrics-endpoint)")
        self.config = config
        self.recent = RecentFindings()  # asked by agents about their own run (mastwatch.guard)
        # the modes alerts compute each agent's rate of: the rising one, and those the failure budgets count
        watched = [MODES[code] for code in dict.fromkeys([config.rules.rising.failure_mode, *watched_modes(config)])]
        self.prometheus = PrometheusExporter(config.exporters.prometheus, pages={runbooks.PATH: runbooks.page()},
                                             api={recent.PATH: self.recent.answer},
                                             views={trace_page.PATH: self._trace_page},
                                             queries={remote.TOP_PATH: self._query, remote.RUN_PATH: self._query},
                                             posts={path: functools.partial(self._write, what) for path, what in
                                                    ((REVIEWS_PATH, "review"), (MUTES_PATH, "mute"),
                                                     (RESOLUTIONS_PATH, "resolution"))},
                                             watched_modes=tuple((m.code, m.category) for m in watched))
        self.webhooks = WebhookNotifier(config.exporters.webhooks, self.prometheus.registry) \
            if config.exporters.webhooks else None
        telemetry = self.prometheus.self_metrics
        telemetry.queue_capacity.labels("spans").set(config.processor.queue_spans)
        telemetry.queue_capacity.labels("bytes").set(config.processor.queue_mib << 20)
        self.store = StoreExporter(config.exporters.store, telemetry) if config.exporters.store.enabled else None
        store = config.exporters.store
        self._answers = remote.answers(self.store.engine, store.database, store.steps,
                                       store.path if store.engine == "chdb" else None) if self.store else {}
        # what each POST writes to the store (reviews, mutes, resolutions), from the CLI's JSON or the run page's forms
        self._takes: dict[str, Callable[[str, Mapping[str, str], bytes, Mapping[str, str]], remote.Reply]] = {}
        if self.store is not None:
            engine, held = self.store.engine, store.path if store.engine == "chdb" else None
            self._takes = {
                "review": remote.take_review(engine, store.database, held,
                                             trace_page.review_form(engine, store.database)),
                "mute": remote.take_decision(
                    held, "mute", Mute.from_json, functools.partial(remote.write_mute, engine, store.database),
                    self.read_decisions, trace_page.mute_form(engine, store.database, self.read_decisions)),
                "resolution": remote.take_decision(
                    held, "resolution", Resolution.from_json,
                    functools.partial(remote.write_resolution, engine, store.database), self.read_decisions,
                    trace_page.resolution_form(engine, store.database, self.read_decisions))}
        self._trace_view = trace_page.view(self.store.engine, config.exporters.store.database,
                                           config.exporters.store.steps, config.dashboards.trace_url) \
            if self.store is not None else None
        exporters: list[Exporter] = [self.prometheus] + ([self.store] if self.store else [])
        self.new_signatures = new_signatures = NewSignatures(
            self.prometheus.registry, self.prometheus.limit, config.exporters.prometheus.signature_min_runs,
            self.store.known_signatures() if self.store else ())
        exporters.append(new_signatures)
        self.releases = ReleaseComparison(self.prometheus.registry, self.prometheus.limit) \
            if self.store is not None and config.exporters.prometheus.release_window > 0 else None
        refresh = config.exporters.prometheus.signature_refresh
        self.signature_refresh = None
        if self.store is not None and refresh > 0:
            # a run's rows land at most its trace's age limit, the quiet time and a flush after it started: a
            # signature seen longer ago than that and two refreshes has no run the last read did not count
            window = 2 * refresh + config.processor.max_trace_age + config.processor.decision_wait + 60
            self.signature_refresh = SignatureRefresh(
                new_signatures, functools.partial(self.store.known_signatures, seen_within=window), refresh,
                also=self.read_store_views)
        if config.exporters.evaluations.enabled:
            exporters.append(EvaluationEventsExporter(config.exporters.evaluations))
        self.judge = None
        if config.judge.enabled:
            judge_metrics = JudgeMetrics(self.prometheus)
            self.judge = Judge(config.judge, [judge_metrics] + ([self.store] if self.store else []), judge_metrics)
        processor = config.processor
        if self.store is not None:  # what survives a restart lives beside the store's data
            base = config.exporters.store.path
            processor = processor.model_copy(update={
                "late_span_memory_path": processor.late_span_memory_path or os.path.join(base, "classified-traces"),
                "journal_path": (processor.journal_path or os.path.join(base, "journal")) if processor.journal
                else None})
        listeners: list[LiveListener] = [self.recent, *([self.webhooks] if self.webhooks else [])]
        self.processor = Processor(processor, exporters, telemetry, self.judge, listeners)
        self.read_store_views()
        # what the previous process had acknowledged and not classified, but for traces the store has rows of
        self.processor.recover(self.store.holding if self.store is not None else None)
        r = config.receiver
        self.grpc = self.http = None
        try:
            if r.grpc.enabled:
                self.grpc = GrpcReceiver(r.grpc, self.processor, telemetry, r.retry_after)
            if r.http.enabled:
                self.http = OtlpHttpServer(r.http, self.processor, telemetry, r.retry_after)
        except OSError:  # a port in use: release what was opened, the caller reports it
            if self.grpc:
                self.grpc.stop(0)
            if self.store:
                self.store.shutdown()
            raise
        self.metrics_address: tuple[str, int] | None = None
        self._stopped = threading.Event()

    def read_store_views(self) -> None:
        """What the processor and the series take from the store, every replica's: the decisions on failure
        signatures, and the comparison of releases."""
        self.read_decisions()
        self.read_releases()

    def read_releases(self) -> None:
        """mast_release_failure_zscore from the store's comparison of each agent's releases over the last
        release_window (a store that cannot answer changes nothing)."""
        if self.store is None or self.releases is None:
            return
        now = time.time_ns()
        since = now - int(self.config.exporters.prometheus.release_window * 1e9)
        try:
            rows = run(self.store.engine, self.config.exporters.store.database, "versions",
                       Filters(since, now, limit=10_000))
        except Exception as e:
            log.warning("store: cannot compare the agents' releases (%s)", e)
            return
        self.releases.update(rows, now / 1e9)

    def read_decisions(self) -> None:
        """Give the processor the signatures muted now in the store, and the signature counter those resolved (a
        store that cannot answer changes nothing)."""
        if self.store is None:
            return
        database = self.config.exporters.store.database
        try:
            muted = muted_signatures(self.store.engine, database)
            resolved = resolved_signatures(self.store.engine, database)
        except Exception as e:
            log.warning("store: cannot read the muted and resolved failure signatures (%s)", e)
            return
        self.processor.muted = muted
        self.new_signatures.resolved = resolved
        self.prometheus.self_metrics.muted_signatures.set(len(muted))

    def _trace_page(self, path: str) -> tuple[int, str]:
        """GET /traces/<trace id>: the run's page, read from the store (on a thread of the metrics server)."""
        if self._trace_view is None:
            return 404, trace_page.error_page("This mastwatch keeps no store (exporters.store.enabled is false).")
        return self._trace_view(path)

    def _query(self, path: str, query: Mapping[str, str]) -> tuple[int, Any]:
        """GET /v1/top/..., /v1/runs/...: what `mastwatch top` and `show` ask while this process holds the store."""
        for prefix, answer in self._answers.items():
            if path.startswith(prefix):
                try:
                    return answer(path, query)
                except Exception as e:  # the store not reachable, or not migrated yet
                    log.warning("cannot answer %s from the store (%s)", path, e)
                    return 503, {"error": f"the store cannot be read now: {e}"}
        return 404, {"error": "this mastwatch keeps no store (exporters.store.enabled is false)"}

    def _write(self, what: str, path: str, query: Mapping[str, str], data: bytes,
               headers: Mapping[str, str]) -> remote.Reply:
        """POST /v1/reviews, /v1/mutes, /v1/resolutions: what `mastwatch review`, `mute`, `resolve` (and their
        undoing) send while this process holds the store, and the run page's forms."""
        take = self._takes.get(what)
        if take is None:
            return 404, {"error": "this mastwatch keeps no store (exporters.store.enabled is false)"}, {}
        try:
            return take(path, query, data, headers)
        except Exception as e:  # the store not reachable
            log.warning("cannot write a %s to the store (%s)", what, e)
            return 503, {"error": f"the store cannot be written now: {e}"}, {}

    def start(self) -> None:
        gc.set_threshold(*GC_THRESHOLDS)
        gc.freeze()  # what start-up created is left out of every collection
        self.metrics_address = self.prometheus.start()
        if self.judge:
            self.judge.start()
        self.processor.start()
        if self.signature_refresh:
            self.signature_refresh.start()
        if self.grpc:
            self.grpc.start()
        if self.http:
            self.http.start()
        log.info("mastwatch listening: OTLP gRPC %s, OTLP HTTP %s, metrics http://%s:%d/metrics",
                 f"{self.config.receiver.grpc.endpoint.rpartition(':')[0]}:{self.grpc.port}" if self.grpc else "off",
                 f"{self.config.receiver.http.endpoint.rpartition(':')[0]}:{self.http.port}" if self.http else "off",
                 *self.metrics_address)

    def stop(self) -> None:
        """Graceful: stop receiving, classify everything buffered, flush the store, stop serving metrics."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.grpc:
            self.grpc.stop()
        if self.http:
            self.http.stop()
        if self.signature_refresh:
            self.signature_refresh.stop()
        self.processor.shutdown()
        if self.webhooks:
            self.webhooks.shutdown()
        log.info("mastwatch stopped")
