"""Prometheus exporter: the mast_* series (failure modes, tokens, spend, waste) and mastwatch_* self-metrics,
served in the Prometheus exposition format by prometheus-client.

Label values that come from spans (service, agent, model, tool) are untrusted: each label keeps at most
`max_label_values` distinct values, later ones are reported as `other` (and counted).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from pydantic import BaseModel, ConfigDict, Field

from mastwatch.collector.classify.modes import MODES
from mastwatch.collector.judge.stage import Judgement
from mastwatch.collector.processor import Increment
from mastwatch.collector.verdict import Verdict

OVERFLOW = "other"


class PrometheusExporterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: str = Field("127.0.0.1:9464", description="host:port serving /metrics")
    max_label_values: int = Field(200, ge=1, description="distinct values per span-derived label")


class LabelLimiter:
    """First come, first kept: at most `limit` distinct values per label name."""

    def __init__(self, limit: int, on_overflow) -> None:
        self.limit = limit
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self._on_overflow = on_overflow

    def __call__(self, label: str, value: str) -> str:
        seen = self._seen.get(label)
        if seen is not None and value in seen:
            return value
        with self._lock:
            seen = self._seen.setdefault(label, set())
            if value in seen:
                return value
            if len(seen) < self.limit:
                seen.add(value)
                return value
        self._on_overflow(label)
        return OVERFLOW


class Totals(Collector):
    """A counter family the processor's thread adds to per trace: a dict update, where a prometheus-client
    Counter child takes a lock and several calls (a fifth of the exporter's time per verdict). One thread
    adds; scrapes read a copy (the GIL makes the copy atomic)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], registry: CollectorRegistry) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.values: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def add(self, labels: tuple[str, ...], amount: float = 1) -> None:
        values = self.values
        values[labels] = values.get(labels, 0) + amount

    def get(self, *labels: str) -> float:
        return self.values.get(labels, 0)

    def describe(self) -> list[CounterMetricFamily]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in list(self.values.items()):
            family.add_metric(labels, value)
        return [family]


class LatencyHistogram(Collector):
    """A histogram observed by one thread, as `Totals` (prometheus-client's Histogram locks and loops over
    its buckets in Python on every observation)."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...], registry: CollectorRegistry) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last: above every bound
        self.sum = 0.0
        registry.register(self)

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def describe(self) -> list[HistogramMetricFamily]:
        return [HistogramMetricFamily(self.name, self.documentation)]

    def collect(self) -> list[HistogramMetricFamily]:
        counts, total = list(self.counts), self.sum
        buckets, cumulative = [], 0
        for bound, n in zip((*self.bounds, float("inf")), counts, strict=True):
            cumulative += n
            buckets.append((floatToGoString(bound), cumulative))
        return [HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=total)]


class SelfMetrics:
    """mastwatch_*: what the pipeline itself is doing."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.received = Counter("mastwatch_spans_received", "Spans received by the OTLP receivers",
                                ["protocol"], registry=r)
        self.rejected = Counter("mastwatch_spans_rejected", "Spans rejected, by reason (invalid_id, queue_full)",
                                ["reason"], registry=r)
        self.requests_rejected = Counter("mastwatch_requests_rejected", "Whole OTLP requests refused, by reason "
                                         "(malformed, too_large)", ["reason"], registry=r)
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
        self.latency = LatencyHistogram("mastwatch_classification_latency_seconds", "Time to classify a "
                                        "completed trace and hand it to the exporters",
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
        self.limit = lambda label, value: value  # replaced by the exporter's LabelLimiter

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

    def trace_completed(self, reason: str, seconds: float) -> None:
        self.completed.add((reason,))
        if reason == "evicted":
            self.evicted.inc()
        self.latency.observe(seconds)

    def detector_failed(self, code: str) -> None:
        self.detector_errors.labels(code).inc()

    def unpriced_calls(self, model: str, n: int) -> None:
        self.unpriced.labels(self.limit("model", model)).inc(n)

    def state(self, traces: int, spans: int, queued: int) -> None:
        self.in_flight.set(traces)
        self.buffered.set(spans)
        self.queued.set(queued)

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

    def __init__(self, config: PrometheusExporterConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.registry = registry = registry or CollectorRegistry()
        self.self_metrics = SelfMetrics(registry)
        self.limit = LabelLimiter(config.max_label_values, lambda label: self.self_metrics.label_overflow.labels(
            label).inc())
        self.self_metrics.limit = self.limit
        r = registry
        self.traces = Totals("mast_traces", "Agent traces classified", ("service", "agent"), r)
        self.failing = Totals("mast_failing_traces", "Traces showing at least one MAST failure mode (counted when "
                              "classified, as mast_traces)", ("service", "agent"), r)
        self.mode_traces = Totals("mast_failure_mode_traces", "Traces showing a MAST failure mode (counted once "
                                  "per trace, when first detected, possibly while the run goes on)",
                                  ("service", "agent", "failure_mode", "category"), r)
        self.tokens = Totals("mast_tokens", "Tokens of inference calls, by type (input excludes cached input; "
                             "input+output+cache_read+cache_write is the total)", ("service", "agent", "model", "type"),
                             r)
        self.cost = Totals("mast_cost_usd", "Inference spend in USD (genai-prices)", ("service", "agent", "model"), r)
        self.repeated = Totals("mast_repeated_steps", "Steps that repeated an already completed step (FM-1.3)",
                               ("service", "agent", "tool"), r)
        self.wasted_tokens = Totals("mast_wasted_tokens", "Tokens of the model calls that produced repeated steps, "
                                    "by type", ("service", "agent", "model", "type"), r)
        self.wasted_cost = Totals("mast_wasted_cost_usd", "USD spent on the model calls that produced repeated "
                                  "steps", ("service", "agent", "model"), r)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> tuple[str, int]:
        host, _, port = self.config.endpoint.rpartition(":")
        try:
            self._server, self._thread = start_http_server(int(port), addr=host or "127.0.0.1", registry=self.registry)
        except OSError as e:
            raise OSError(f"cannot serve metrics on {self.config.endpoint}: {e.strerror}") from None
        return self._server.server_address[:2]

    def export_increment(self, inc: Increment) -> None:
        limit = self.limit
        service, agent = limit("service", inc.service), limit("agent", inc.agent)
        for mode in inc.modes:
            self.mode_traces.add((service, agent, mode.code, mode.category))
        for tool, n in inc.repeated_by_tool.items():
            self.repeated.add((service, agent, limit("tool", tool)), n)
        for (model, kind), n in inc.wasted_tokens.items():
            self.wasted_tokens.add((service, agent, limit("model", model), kind), n)
        for model, usd in inc.wasted_cost.items():
            self.wasted_cost.add((service, agent, limit("model", model)), usd)

    def export_verdict(self, verdict: Verdict, inc: Increment) -> None:
        if inc.modes or inc.repeated_by_tool or inc.wasted_tokens or inc.wasted_cost:
            self.export_increment(inc)
        limit = self.limit
        service, agent = limit("service", verdict.service), limit("agent", verdict.agent)
        self.traces.add((service, agent))
        if verdict.findings:
            self.failing.add((service, agent))
        tokens, cost = self.tokens.add, self.cost.add
        for (model, kind), n in verdict.tokens.items():
            tokens((service, agent, limit("model", model), kind), n)
        for model, usd in verdict.cost.items():
            cost((service, agent, limit("model", model)), usd)

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
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

    def judge_rejected(self, reason: str) -> None:
        self.rejected.labels(reason).inc()

    def judge_skipped(self, reason: str) -> None:
        self.skipped.labels(reason).inc()

    def judge_retry(self) -> None:
        self.retries.inc()

    def judge_queue(self, depth: int) -> None:
        self.queue.set(depth)
