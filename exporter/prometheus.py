"""Prometheus exporter: the mast_* series (failure modes, tokens, spend, waste) and mastwatch_* self-metrics,
served in the Prometheus exposition format by prometheus-client.

Label values that come from spans (service, agent, model, tool) are untrusted: each label keeps at most
`max_label_values` distinct values, later ones are reported as `other` (and counted), and each mast_* family at
most `max_series` label sets, later ones counted with their span-derived labels `other`.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import platform
from collections.abc import Callable, Mapping
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder, gzip_accepted
from pydantic import BaseModel, ConfigDict, Field

from mastwatch import __version__
from mastwatch.collector.durations import Duration
from mastwatch.collector.http_serving import LoopServer
from mastwatch.collector.model.judgement import Judgement
from mastwatch.collector.model.modes import MODES
from mastwatch.collector.receiver.refusals import REASONS, SPAN_REASONS, Refusals
from mastwatch.collector.security import AuthConfig, BearerCheck, TLSConfig

from .totals import Completions, LabelLimiter, LatencyHistogram, MastSeries, Totals

# Liveness: answered while the server serves, without a token (a probe has none to send).
HEALTH_PATH: Final = "/healthz"
log = logging.getLogger(__name__)
METRICS_IDLE = 60.0  # seconds an idle scrape connection is kept (scrapers reuse theirs between scrapes)
METRICS_CONNECTIONS = 64
# The pages of stored data (views) run nothing and load nothing but their own style: what spans put in them (names,
# reasons, content where stored) is escaped, and even unescaped could not run.
VIEW_HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
                "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


class PrometheusExporterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: str = Field("127.0.0.1:9464", description="host:port serving /metrics")
    max_label_values: int = Field(200, ge=1, description="distinct values per span-derived label")
    max_series: int = Field(10_000, ge=10, description="label sets per mast_* family; past it new ones are counted "
                            "with their span-derived labels `other` (one such set per value of the other labels)")
    signature_min_runs: int = Field(3, ge=1, description="a failure signature counts in "
                                    "mast_new_failure_signatures_total once it has shown in this many runs")
    signature_refresh: Duration = Field(60.0, ge=0, description="how often the runs of each failure signature are "
                                        "read from the store, every replica's (0: never; each replica counts what "
                                        "it sees)")
    release_window: Duration = Field(86_400.0, ge=0, description="mast_release_failure_zscore compares each "
                                     "agent's newest release with the one before it over the runs of this last "
                                     "period, read from the store at each signature_refresh (0: no comparison)")
    tls: TLSConfig | None = Field(None, description="serve /metrics over HTTPS (configtls)")
    auth: AuthConfig | None = Field(None, description="require `Authorization: Bearer <token>` (bearertokenauth)")


class SelfMetrics:
    """mastwatch_*: what the pipeline itself is doing."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.received = Counter("mastwatch_spans_received", "Spans received by the OTLP receivers",
                                ["protocol"], registry=r)
        self.rejected = Counter("mastwatch_spans_rejected", "Spans rejected, by reason (invalid_id, queue_full)",
                                ["reason"], registry=r)
        self.requests_rejected = Counter("mastwatch_requests_rejected", "Whole OTLP requests refused, by reason "
                                         "(malformed, too_large, bad_http, timeout, ...)", ["reason"], registry=r)
        for reason in REASONS:
            self.requests_rejected.labels(reason)
        for reason in SPAN_REASONS:
            self.rejected.labels(reason)
        self.processed = Counter("mastwatch_spans_processed", "Spans normalised and classified", registry=r)
        self.late = Counter("mastwatch_late_spans", "Spans that arrived after their trace was classified "
                            "(dropped)", registry=r)
        self.completed = Totals("mastwatch_traces_completed", "Traces classified, by why they were "
                                "released (complete, max_spans, max_age, evicted, shutdown)", ("reason",), r)
        self.evicted = Counter("mastwatch_traces_evicted", "Traces classified early because max_traces were "
                               "in flight", registry=r)
        self.in_flight = Gauge("mastwatch_traces_in_flight", "Traces being assembled", registry=r)
        self.buffered = Gauge("mastwatch_spans_buffered", "Spans held in traces being assembled", registry=r)
        self.queued = Gauge("mastwatch_queue_spans", "Spans accepted and waiting to be processed", registry=r)
        self.queued_bytes = Gauge("mastwatch_queue_bytes", "Bytes of the requests accepted and waiting to be "
                                  "processed", registry=r)
        self.queue_capacity = Gauge("mastwatch_queue_capacity", "What the processing queue holds at most before "
                                    "it pushes back: spans (processor.queue_spans) and bytes (processor.queue_mib)",
                                    ["unit"], registry=r)
        build = Info("mastwatch_build", "The running mastwatch", registry=r)
        build.info({"version": __version__, "python": platform.python_version()})
        ProcessCollector(registry=r)  # process_cpu_seconds_total, process_resident_memory_bytes, open fds...
        PlatformCollector(registry=r)
        self.latency = LatencyHistogram("mastwatch_classification_latency_seconds", "Time to classify a "
                                        "completed trace and hand it to the exporters (with the others completed "
                                        "at the same time, up to 256)",
                                        (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                         0.25, 1.0), r)
        self.detector_errors = Counter("mastwatch_detector_errors", "Detector failures (the detector is "
                                       "switched off for that trace)", ["failure_mode"], registry=r)
        self.unpriced = Counter("mastwatch_unpriced_llm_calls", "Inference calls of models with no known "
                                "price (cost counted as 0)", ["model"], registry=r)
        self.label_overflow = Counter("mastwatch_label_overflow", "Label values replaced by 'other' "
                                      "(max_label_values reached)", ["label"], registry=r)
        self.store_rows = Counter("mastwatch_store_rows_written", "Rows written to the store", ["table"],
                                  registry=r)
        self.store_dropped = Counter("mastwatch_store_rows_dropped", "Rows dropped from the store queue because "
                                     "max_queued_rows or max_queued_mib were waiting", registry=r)
        self.store_errors = Counter("mastwatch_store_errors", "Failed store writes (retried)", registry=r)
        self.store_retries = Counter("mastwatch_store_retries", "Batches sent to the store again (after a failed "
                                     "write, or found in the queue at start)", registry=r)
        self.store_queue_rows = Gauge("mastwatch_store_queue_rows", "Rows in the durable store queue", registry=r)
        self.store_queue_bytes = Gauge("mastwatch_store_queue_bytes", "Bytes of the durable store queue on disk",
                                       registry=r)
        self.store_insert_latency = Histogram("mastwatch_store_insert_seconds", "Time of one insert into one "
                                              "store table", registry=r,
                                              buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                                                       2.5, 10.0))
        self.muted_signatures = Gauge("mastwatch_muted_signatures", "Failure signatures muted now, as this "
                                      "process last read them from the store (mastwatch mute)", registry=r)
        self.limit = lambda label, value: value  # replaced by the exporter's LabelLimiter
        # per trace, on the processor's thread: served by compiled code (no call through Python in between)
        self.trace_completed = Completions(self.completed, self.evicted, self.latency).trace_completed

    # the receiver's Counters and the processor's Telemetry protocols
    def spans_received(self, protocol: str, n: int) -> None:
        if n:
            self.received.labels(protocol).inc(n)

    def request_rejected(self, reason: str) -> None:
        self.requests_rejected.labels(reason).inc()

    def spans_processed(self, n: int) -> None:
        self.processed.inc(n)

    def spans_rejected(self, reason: str, n: int) -> None:
        self.rejected.labels(reason).inc(n)

    def late_spans(self, n: int) -> None:
        self.late.inc(n)

    def detector_failed(self, code: str) -> None:
        self.detector_errors.labels(code).inc()

    def unpriced_calls(self, model: str, n: int) -> None:
        self.unpriced.labels(self.limit("model", model)).inc(n)

    def state(self, traces: int, spans: int, queued: int, queued_bytes: int) -> None:
        self.in_flight.set(traces)
        self.buffered.set(spans)
        self.queued.set(queued)
        self.queued_bytes.set(queued_bytes)

    # the store's StoreTelemetry protocol
    def store_written(self, table: str, rows: int) -> None:
        self.store_rows.labels(table).inc(rows)

    def store_insert_seconds(self, seconds: float) -> None:
        self.store_insert_latency.observe(seconds)

    def store_failed(self) -> None:
        self.store_errors.inc()

    def store_retried(self) -> None:
        self.store_retries.inc()

    def store_dropped_rows(self, rows: int) -> None:
        self.store_dropped.inc(rows)

    def store_queue(self, depth: Callable[[], tuple[int, int]]) -> None:
        """The queue's gauges read `depth()` (rows, bytes) when scraped."""
        self.store_queue_rows.set_function(lambda: depth()[0])
        self.store_queue_bytes.set_function(lambda: depth()[1])


class PrometheusExporter:
    """mast_*: what the agents are doing. Implements the processor's Exporter protocol."""

    def __init__(self, config: PrometheusExporterConfig, registry: CollectorRegistry | None = None,
                 pages: Mapping[str, bytes] | None = None,
                 api: Mapping[str, Callable[[str], tuple[int, dict[str, Any]]]] | None = None,
                 views: Mapping[str, Callable[[str], tuple[int, str]]] | None = None,
                 queries: Mapping[str, Callable[[str, Mapping[str, str]], tuple[int, Any]]] | None = None,
                 posts: Mapping[str, Callable[[str, Mapping[str, str], bytes, Mapping[str, str]],
                                              tuple[int, Any, dict[str, str]]]] | None = None,
                 watched_modes: tuple[tuple[str, str], ...] = ()) -> None:
        """`watched_modes`: the (failure mode, category) pairs alert rules compute each agent's rate of."""
        self.config = config
        self.pages = dict(pages or {})  # path -> an HTML page served beside /metrics, without auth: static text
        self.api = dict(api or {})  # path prefix -> the JSON reply to a GET under it (with auth, as /metrics)
        # path prefix -> the HTML page of a GET under it (with auth: stored data), made on another thread (it may
        # query the store)
        self.views = dict(views or {})
        # path prefix -> the JSON reply to a GET under it, given its query parameters, made on another thread (it
        # queries the store: what `mastwatch top` and `show` ask a server holding the store's directory)
        self.queries = dict(queries or {})
        # path -> the reply to a POST, given its query parameters, body and headers, made on another thread (it writes
        # to the store: reviews): its status, its body (JSON, or an HTML page as text) and its headers
        self.posts = dict(posts or {})
        self.registry = registry = registry or CollectorRegistry()
        self.self_metrics = SelfMetrics(registry)
        self.limit = LabelLimiter(config.max_label_values, lambda label: self.self_metrics.label_overflow.labels(
            label).inc())
        self.self_metrics.limit = self.limit
        self.series = MastSeries(registry, self.limit, config.max_series, watched_modes)
        # the processor's Exporter protocol, served by the compiled series (no call through Python in between)
        self.export_increments = self.series.export_increments
        self.export_verdicts = self.series.export_verdicts
        self._server: LoopServer | None = None

    def start(self) -> tuple[str, int]:
        config = self.config
        self._refusals = Refusals(self.self_metrics, log, "/metrics")
        self._auth = BearerCheck(config.auth) if config.auth is not None else None
        self._server = LoopServer(config.endpoint, "metrics", self._serve, self._refusals.refuse, METRICS_IDLE,
                                  METRICS_CONNECTIONS, config.tls, thread_name="mw-metrics")
        self._server.start()
        return self._server.address

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        """GET /metrics: the registry in the format the scraper accepts (OpenMetrics or text), gzip if it may."""
        if request.path == HEALTH_PATH:  # probes (kubelet, Docker) send no token
            return web.Response(text="ok\n")
        page = self.pages.get(request.path)
        if page is not None:  # the shipped documents, which on-call opens from an alert, with no token to send
            return web.Response(body=page, content_type="text/html", charset="utf-8")
        if self._auth is not None and not self._auth.allows(request.headers.get("Authorization")):
            self._refusals.refuse("unauthenticated", "no valid bearer token", request.remote)
            return web.Response(status=401, text="send Authorization: Bearer <token>\n",
                                headers={"WWW-Authenticate": 'Bearer realm="mastwatch"'})
        post = self.posts.get(request.path)
        if post is not None:
            if request.method != "POST":
                return web.json_response({"error": f"{request.path} takes a POST"}, status=405,
                                         headers={"Allow": "POST"})
            data = await request.read()
            status, body, headers = await asyncio.get_running_loop().run_in_executor(
                None, post, request.path, dict(request.query), data, request.headers)
            if isinstance(body, str):
                return web.Response(status=status, text=body, content_type="text/html", charset="utf-8",
                                    headers={**VIEW_HEADERS, **headers})
            return web.json_response(body, status=status, headers=headers)
        if request.method != "GET" and request.method != "HEAD":
            return web.json_response({"error": f"{request.path} takes a GET"}, status=405, headers={"Allow": "GET"})
        for prefix, answer in self.api.items():
            if request.path.startswith(prefix):
                status, body = answer(request.path)
                return web.json_response(body, status=status)
        for prefix, query in self.queries.items():
            if request.path.startswith(prefix):
                status, body = await asyncio.get_running_loop().run_in_executor(None, query, request.path,
                                                                                dict(request.query))
                return web.json_response(body, status=status)
        for prefix, view in self.views.items():
            if request.path.startswith(prefix):
                status, page = await asyncio.get_running_loop().run_in_executor(None, view, request.path)
                return web.Response(status=status, text=page, content_type="text/html", charset="utf-8",
                                    headers=VIEW_HEADERS)
        if request.path not in ("/metrics", "/"):
            return web.Response(status=404, text="metrics are at /metrics\n")
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = await asyncio.get_running_loop().run_in_executor(None, encoder, self.registry)
        headers = {"Content-Type": content_type}
        if gzip_accepted(request.headers.get("Accept-Encoding", "")):
            body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
        return web.Response(body=body, headers=headers)

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


class JudgeMetrics:
    """The judge stage's series, on the exporter's registry: its verdicts (mast_judge_*, kept apart from the
    structural mast_failure_mode_traces_total so no trace is counted twice) and its self-metrics. Implements
    the judge's JudgeSink and JudgeTelemetry protocols."""

    def __init__(self, exporter: PrometheusExporter) -> None:
        r = exporter.registry
        self.limit = exporter.limit
        self._children: dict[tuple, Any] = {}  # bounded: every label value passes the limiter
        self.judged = Counter("mast_judged_traces", "Traces the judge assessed", ["service", "agent"], registry=r)
        self.findings = Counter("mast_judge_findings", "The judge's answer per assessed mode and trace: found "
                                "(yes, structure had not found it), confirmed (yes, structure had), rejected (no, "
                                "structure had), not_found (no)",
                                ["service", "agent", "failure_mode", "category", "verdict"], registry=r)
        self.requests = Counter("mastwatch_judge_requests", "Judge calls by outcome (ok, rejected, rate_limited, "
                                "http_error, unreachable, bad_response, stopped)", ["outcome"], registry=r)
        self.tokens = Counter("mastwatch_judge_tokens", "Tokens the judge's endpoint reported using", ["type"],
                              registry=r)
        self.cost = Counter("mastwatch_judge_cost_usd", "USD of those tokens, priced by genai-prices as the agents' "
                            "calls are (not counted while the judge's model has no known price)", registry=r)
        self.rejected = Counter("mastwatch_judge_answers_rejected", "Judge answers rejected by the strict parser, "
                                "by reason", ["reason"], registry=r)
        self.skipped = Counter("mastwatch_judge_skipped", "Sampled traces not judged: budget_calls, "
                               "budget_tokens, queue_full, shutdown", ["reason"], registry=r)
        self.retries = Counter("mastwatch_judge_retries", "Judge requests retried (429, 5xx, timeouts)", registry=r)
        self.queue = Gauge("mastwatch_judge_queue", "Transcripts waiting for the judge", registry=r)
        self.latency = Histogram("mastwatch_judge_latency_seconds", "Time of a judge call, retries included",
                                 registry=r, buckets=(0.5, 1, 2.5, 5, 10, 20, 40, 80, 160))

    def export_judgement(self, judgement: Judgement) -> None:
        limit, child = self.limit, self._child
        service, agent = limit("service", judgement.service), limit("agent", judgement.agent)
        child(self.judged, service, agent).inc()
        for code in judgement.assessments:
            child(self.findings, service, agent, code, MODES[code].category, judgement.verdict(code)).inc()

    def _child(self, metric: Counter, *labels: str):
        """metric.labels(*labels), cached: labels() validates and locks on every call."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def judge_request(self, outcome: str, seconds: float) -> None:
        self.requests.labels(outcome).inc()
        self.latency.observe(seconds)

    def judge_tokens(self, input_tokens: int, output_tokens: int) -> None:
        self.tokens.labels("input").inc(input_tokens)
        self.tokens.labels("output").inc(output_tokens)

    def judge_cost(self, usd: float) -> None:
        self.cost.inc(usd)

    def judge_rejected(self, reason: str) -> None:
        self.rejected.labels(reason).inc()

    def judge_skipped(self, reason: str) -> None:
        self.skipped.labels(reason).inc()

    def judge_retry(self) -> None:
        self.retries.inc()

    def judge_queue(self, depth: int) -> None:
        self.queue.set(depth)
