"""mastwatch health: ingest, rejections, traces in flight and evicted, the processing queue, classification
latency, the store."""

from grafanalib.core import Dashboard

from mastwatch.config import Config
from mastwatch.dashboards.panels import (
    Grid,
    override,
    prom,
    regex_override,
    selector,
    series,
    stat,
    timeseries,
    topology,
    variable,
)
from mastwatch.dashboards.panels import dashboard as make_dashboard
from mastwatch.dashboards.promql import group

UID = "mastwatch-health"
SPANS_PER_S = "suffix: spans/s"


def _rate(metric: str, sel: str, by: str = "") -> str:
    group = f" by ({by})" if by else ""
    return f"sum{group} (rate({metric}{{{sel}}}[$__rate_interval]))"


def _quantile(q: float, sel: str) -> str:
    return (f"histogram_quantile({q}, sum by (le) (rate(mastwatch_classification_latency_seconds_bucket{{{sel}}}"
            "[$__rate_interval])))")


def build(config: Config) -> Dashboard:
    deployment, where = topology(config.dashboards.topology_labels, "mastwatch_spans_processed_total")
    sel = selector(where, 'instance=~"$instance"')
    per_instance = group(*config.dashboards.topology_labels, "instance")
    grid = Grid().row("Now")
    grid.add(stat("Ingest", "Spans received per second (gRPC and HTTP).",
                  [prom(_rate("mastwatch_spans_received_total", sel), instant=True)], SPANS_PER_S, decimals=1), 4, 4)
    grid.add(stat("Rejected", "Spans rejected per second: invalid ids, or backpressure (queue_full; clients retry).",
                  [prom(_rate("mastwatch_spans_rejected_total", sel), instant=True)], SPANS_PER_S,
                  (("green", None), ("red", 0.001)), decimals=2), 4, 4)
    grid.add(stat("Traces in flight", f"Traces being assembled (processor.max_traces: {config.processor.max_traces}; "
                  "beyond it the oldest is evicted).", [prom(f"sum(mastwatch_traces_in_flight{{{sel}}})",
                                                             instant=True)], "short",
                  (("green", None), ("orange", 0.8 * config.processor.max_traces)), decimals=0), 4, 4)
    grid.add(stat("Queue", "Spans waiting to be processed, of processor.queue_spans, and their requests' bytes, of "
                  "processor.queue_mib (each instance's own, mastwatch_queue_capacity); either full means "
                  "backpressure.",
                  [prom(f"max(mastwatch_queue_spans{{{sel}}} / on ({per_instance}) "
                        f"mastwatch_queue_capacity{{{sel}, unit=\"spans\"}})", "spans", instant=True),
                   prom(f"max(mastwatch_queue_bytes{{{sel}}} / on ({per_instance}) "
                        f"mastwatch_queue_capacity{{{sel}, unit=\"bytes\"}})", "bytes", ref="B", instant=True)],
                  "percentunit", (("green", None), ("orange", 0.5), ("red", 0.9)), decimals=1), 4, 4)
    grid.add(stat("Classification p99", "99th percentile of the time to classify a completed trace and hand it to "
                  "the exporters.", [prom(_quantile(0.99, sel), instant=True)], "s",
                  (("green", None), ("orange", 0.05), ("red", 0.25)), no_value="-"), 4, 4)
    grid.add(stat("Store rows dropped", "Rows dropped in the time range because max_queued_rows were waiting for a "
                  "failing store: data lost.", [prom(f"sum(increase(mastwatch_store_rows_dropped_total{{{sel}}}"
                                                     "[$__range]))", instant=True)], "short",
                  (("green", None), ("red", 1)), decimals=0, color_mode="background"), 4, 4)
    grid.row("Ingest")
    grid.add(timeseries("Spans received and processed", "Spans per second by protocol, and spans normalised and "
                        "classified.",
                        [prom(_rate("mastwatch_spans_received_total", sel, "protocol"), "received {{protocol}}"),
                                        prom(_rate("mastwatch_spans_processed_total", sel), "processed", ref="B")],
                        SPANS_PER_S), 12, 8)
    grid.add(timeseries("Rejections by reason", "Spans rejected (invalid_id, queue_full) and whole requests refused "
                        "(malformed, too_large), per second.",
                        [prom(_rate("mastwatch_spans_rejected_total", sel, "reason"), "spans: {{reason}}"),
                         prom(_rate("mastwatch_requests_rejected_total", sel, "reason"), "requests: {{reason}}",
                              ref="B")],
                        "suffix: /s", thresholds=(("green", None), ("red", 0.001)), threshold_style="dashed"), 12, 8)
    grid.row("Traces")
    grid.add(timeseries("Traces in flight and spans buffered", "Traces being assembled (left) and the spans they "
                        f"hold (right; processor.max_buffered_spans: {config.processor.max_buffered_spans}).",
                        [prom(f"sum(mastwatch_traces_in_flight{{{sel}}})", "traces in flight"),
                         prom(f"sum(mastwatch_spans_buffered{{{sel}}})", "spans buffered", ref="B")],
                        "short", overrides=[override("spans buffered", custom__axisPlacement="right")]), 12, 8)
    grid.add(timeseries("Traces released, by reason", "Why traces were classified: complete, max_spans, max_age, "
                        "evicted (max_traces or max_buffered_spans in flight) or shutdown; per second, stacked.",
                        [prom(_rate("mastwatch_traces_completed_total", sel, "reason"), "{{reason}}")],
                        "suffix: traces/s",
                        stack=True, overrides=[override("evicted", color={"mode": "fixed", "fixedColor": "red"})]),
             12, 8)
    grid.add(timeseries("Evicted traces and late spans", "Traces classified early because max_traces traces or "
                        "max_buffered_spans spans were in flight, "
                        "and spans that arrived after their trace was classified (dropped; raise decision_wait).",
                        [prom(_rate("mastwatch_traces_evicted_total", sel), "traces evicted"),
                         prom(_rate("mastwatch_late_spans_total", sel), "late spans", ref="B")], "suffix: /s",
                        thresholds=(("green", None), ("red", 0.001)), threshold_style="dashed"), 12, 8)
    grid.add(timeseries("Processing queue", "Spans accepted and waiting (left) and their requests' bytes "
                        "(right), with each instance's capacity (processor.queue_spans, processor.queue_mib): at "
                        "capacity the receivers push back.",
                        [prom(f"max by ({per_instance}) (mastwatch_queue_spans{{{sel}}})", "{{instance}} spans"),
                         prom(f"max by ({per_instance}) (mastwatch_queue_bytes{{{sel}}})", "{{instance}} bytes",
                              ref="B"),
                         prom(f"max by ({per_instance}, unit) (mastwatch_queue_capacity{{{sel}}})",
                              "{{instance}} capacity {{unit}}", ref="C")],
                        "short",
                        overrides=[regex_override(".* bytes$", unit="bytes", custom__axisPlacement="right"),
                                   regex_override(".* capacity .*", custom__lineStyle={"fill": "dash",
                                                                                       "dash": [10, 10]}),
                                   regex_override(".* capacity bytes$", unit="bytes",
                                                  custom__axisPlacement="right")]), 12, 8)
    grid.row("Classification and store")
    grid.add(timeseries("Classification latency", "Time to classify a completed trace and hand it to the exporters.",
                        [prom(_quantile(0.5, sel), "p50"), prom(_quantile(0.9, sel), "p90", ref="B"),
                         prom(_quantile(0.99, sel), "p99", ref="C")], "s", calcs=("mean", "max")), 12, 8)
    grid.add(timeseries("Store writes", "Rows written per second by table; failed inserts (retried) and rows "
                        "dropped; right: rows waiting in the durable queue (they grow while the store fails, and are "
                        "dropped past exporters.store.max_queued_rows).",
                        [prom(_rate("mastwatch_store_rows_written_total", sel, "table"), "written {{table}}"),
                         prom(_rate("mastwatch_store_errors_total", sel), "failed inserts", ref="B"),
                         prom(_rate("mastwatch_store_rows_dropped_total", sel), "dropped rows", ref="C"),
                         prom(f"sum(mastwatch_store_queue_rows{{{sel}}})", "queued rows", ref="D")],
                        "suffix: rows/s", overrides=[override("dropped rows", color={"mode": "fixed",
                                                                                     "fixedColor": "red"}),
                                                     override("queued rows", unit="short",
                                                              custom__axisPlacement="right")]), 12, 8)
    grid.add(timeseries("Data quality", "Detector failures by mode, calls of models without a price (cost counted "
                        "as 0), and label values replaced by `other` (exporters.prometheus.max_label_values).",
                        [prom(_rate("mastwatch_detector_errors_total", sel, "failure_mode"),
                              "detector error {{failure_mode}}"),
                         prom(_rate("mastwatch_unpriced_llm_calls_total", sel, "model"), "unpriced {{model}}", ref="B"),
                         prom(_rate("mastwatch_label_overflow_total", sel, "label"), "overflow {{label}}", ref="C")],
                        "suffix: /s"), 24, 8)
    return make_dashboard("mastwatch / Health", UID, "The mastwatch pipeline itself.", grid,
                          [*deployment, variable("instance", "Instance", "label_values("
                                                 f"{series('mastwatch_spans_processed_total', where)}, instance)")],
                          time_from="now-3h")


dashboard = build(Config())  # grafanalib's generate-dashboard reads this
