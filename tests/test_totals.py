"""The Prometheus exporter's own counter and histogram families, as a scrape reads them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mastwatch.exporter.totals import LatencyHistogram, Totals


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_totals_add_up_per_label_set() -> None:
    registry = CollectorRegistry()
    traces = Totals("mast_traces", "Agent traces classified", ("service", "agent"), registry)
    traces.add(("svc", "a"))
    traces.add(("svc", "a"), 2)
    traces.add(("svc", "b"), 0.5)
    samples = _samples(registry)
    assert samples[("mast_traces_total", (("agent", "a"), ("service", "svc")))] == 3
    assert samples[("mast_traces_total", (("agent", "b"), ("service", "svc")))] == 0.5
    assert traces.get("svc", "a") == 3 and traces.get("svc", "none") == 0


def test_latency_buckets_are_cumulative_and_inclusive() -> None:
    registry = CollectorRegistry()
    latency = LatencyHistogram("mastwatch_classification_latency_seconds", "Time to classify", (0.001, 0.01), registry)
    for seconds in (0.0005, 0.001, 0.005, 2.0):  # 0.001 sits on a bound: it counts in that bucket (le)
        latency.observe(seconds)
    samples = _samples(registry)
    bucket = "mastwatch_classification_latency_seconds_bucket"
    assert samples[(bucket, (("le", "0.001"),))] == 2
    assert samples[(bucket, (("le", "0.01"),))] == 3
    assert samples[(bucket, (("le", "+Inf"),))] == 4
    assert samples[("mastwatch_classification_latency_seconds_count", ())] == 4
    assert samples[("mastwatch_classification_latency_seconds_sum", ())] == 2.0065
