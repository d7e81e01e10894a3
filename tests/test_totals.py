"""The Prometheus exporter's own counter and histogram families, as a scrape reads them, and the mast_* totals a
verdict adds to: label values capped (first come, first kept, the rest `other`, each replacement counted)."""

from __future__ import annotations

from collections import Counter

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.model.waste import Waste
from mastwatch.collector.processor import NO_INCREMENT
from mastwatch.exporter.totals import MAX_KEPT, LabelLimiter, LatencyHistogram, MastSeries, Totals


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


def verdict(agent: str, model: str, tokens: int = 10, usd: float = 0.5, service: str = "svc",
            failing: bool = False) -> Verdict:
    return Verdict("0" * 32, service, agent, [model], 0, 1, 2, 1, 1, tokens, tokens, usd,
                   {"FM-1.3": None} if failing else {}, Waste(),  # type: ignore[dict-item]
                   tokens={(model, "input"): tokens, (model, "output"): 2 * tokens}, cost={model: usd})


def series(limit: int, max_series: int = 0) -> tuple[MastSeries, Counter[str], CollectorRegistry]:
    replaced: Counter[str] = Counter()
    registry = CollectorRegistry()
    return MastSeries(registry, LabelLimiter(limit, lambda label: replaced.update([label])), max_series), replaced, \
        registry


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, ...], float]:
    return {tuple(s.labels.values()): s.value for metric in registry.collect() for s in metric.samples
            if s.name == name}


def test_labels_past_the_limit_are_other_and_every_replacement_is_counted() -> None:
    mast, replaced, registry = series(limit=2)
    runs = [("a1", "m1"), ("a2", "m2"), ("a3", "m3"), ("a1", "m3"), ("a3", "m1"), ("a4", "m2"), ("a3", "m3")]
    for agent, model in runs:
        mast.export_verdict(verdict(agent, model, failing=agent == "a3"), NO_INCREMENT)
    assert samples(registry, "mast_traces_total") == {("svc", "a1"): 2, ("svc", "a2"): 1, ("svc", "other"): 4}
    assert samples(registry, "mast_failing_traces_total") == {("svc", "a1"): 0, ("svc", "a2"): 0, ("svc", "other"): 3}
    assert samples(registry, "mast_tokens_total") == {
        ("svc", "a1", "m1", "input"): 10, ("svc", "a1", "m1", "output"): 20,
        ("svc", "a2", "m2", "input"): 10, ("svc", "a2", "m2", "output"): 20,
        ("svc", "other", "other", "input"): 20, ("svc", "other", "other", "output"): 40,
        ("svc", "a1", "other", "input"): 10, ("svc", "a1", "other", "output"): 20,
        ("svc", "other", "m1", "input"): 10, ("svc", "other", "m1", "output"): 20,
        ("svc", "other", "m2", "input"): 10, ("svc", "other", "m2", "output"): 20}
    assert samples(registry, "mast_cost_usd_total") == {
        ("svc", "a1", "m1"): 0.5, ("svc", "a2", "m2"): 0.5, ("svc", "other", "other"): 1.0,
        ("svc", "a1", "other"): 0.5, ("svc", "other", "m1"): 0.5, ("svc", "other", "m2"): 0.5}
    # each verdict counts what it replaced: an agent once, a model once per token type and once for its cost
    assert replaced == {"agent": 4, "model": 3 * 3}


def test_what_is_kept_to_find_the_cells_is_bounded_and_the_totals_stay() -> None:
    mast, _, registry = series(limit=MAX_KEPT * 2)
    for i in range(MAX_KEPT + 10):  # one pair, ever more models
        mast.export_verdict(verdict("a", f"m{i}"), NO_INCREMENT)
    for agent in ("a", "b"):
        mast.export_verdict(verdict(agent, "m0"), NO_INCREMENT)
    kept = sum(len(cells.tokens) + len(cells.cost) + 1 for by_agent in mast._cells.values()
               for cells in by_agent.values())
    assert kept <= MAX_KEPT
    traces = samples(registry, "mast_traces_total")
    assert traces == {("svc", "a"): MAX_KEPT + 11, ("svc", "b"): 1}
    assert samples(registry, "mast_tokens_total")[("svc", "a", "m0", "input")] == 20
    assert len(samples(registry, "mast_cost_usd_total")) == MAX_KEPT + 11


def test_label_sets_are_capped_per_family_and_nothing_is_lost() -> None:
    """10,000 distinct (service, agent, model) sets, each label within its own cap: every family stays at
    `max_series` label sets, the rest is counted with its span-derived labels `other`, and the totals still add
    up."""
    mast, replaced, registry = series(limit=200, max_series=500)
    for i in range(10_000):
        mast.export_verdict(verdict(f"a{i % 199}", f"m{i % 197}", service=f"s{i % 101}"), NO_INCREMENT)
    for name, others in (("mast_traces_total", 1), ("mast_tokens_total", 2), ("mast_cost_usd_total", 1)):
        assert len(samples(registry, name)) == 500 + others  # `other` once per token type
    traces = samples(registry, "mast_traces_total")
    assert sum(traces.values()) == 10_000 and traces[("other", "other")] > 0
    assert sum(samples(registry, "mast_cost_usd_total").values()) == 10_000 * 0.5
    assert replaced["series"] > 0


def test_the_watched_mode_is_counted_from_zero_from_an_agents_first_run() -> None:
    """A counter made at its first increment shows Prometheus no increase then: the mode an alert computes rates of
    (and the failing runs) start at 0 with the agent's first run, so its first failure counts."""
    registry = CollectorRegistry()
    mast = MastSeries(registry, LabelLimiter(10, lambda label: None), 0, (("FM-3.3", "FC3"),))
    mast.export_verdict(verdict("bot", "m"), NO_INCREMENT)
    assert samples(registry, "mast_failure_mode_traces_total") == {("svc", "bot", "FM-3.3", "FC3"): 0}
    assert samples(registry, "mast_failing_traces_total") == {("svc", "bot"): 0}
    mast.export_verdict(verdict("bot", "m", failing=True), NO_INCREMENT)
    assert samples(registry, "mast_failing_traces_total") == {("svc", "bot"): 1}
    unwatched, _, plain = series(limit=10)
    unwatched.export_verdict(verdict("bot", "m"), NO_INCREMENT)
    assert samples(plain, "mast_failure_mode_traces_total") == {}


def test_calls_by_tool_and_model_count_failures_from_zero_and_limit_their_labels() -> None:
    from mastwatch.collector.model.steps import LLM, TOOL, Step

    def run(*steps: tuple[str, str, bool]) -> Verdict:
        made = [Step(b"t" * 16, bytes([i]) * 8, b"", LLM if kind == "llm" else TOOL, name, 0, 2_000_000_000, "svc",
                     model=name if kind == "llm" else None, tool=name if kind == "tool" else None, error=error)
                for i, (kind, name, error) in enumerate(steps)]
        v = verdict("a", "m1")
        v.trace_steps = made
        for step in made:  # as the processor counts a run's model calls
            if step.kind is LLM and step.model is not None:
                n, seconds = v.model_calls.get(step.model, (0, 0.0))
                v.model_calls[step.model] = (n + 1, seconds + (step.end_ns - step.start_ns) / 1e9)
        return v

    mast, replaced, registry = series(limit=2)
    mast.export_verdict(run(("llm", "m1", False), ("tool", "t1", False), ("tool", "t1", True)), NO_INCREMENT)
    mast.export_verdict(run(("tool", "t2", False), ("tool", "t3", True), ("llm", "m1", False)), NO_INCREMENT)
    assert samples(registry, "mast_tool_calls_total") == {("svc", "a", "t1"): 2, ("svc", "a", "t2"): 1,
                                                          ("svc", "a", "other"): 1}
    assert samples(registry, "mast_tool_call_errors_total") == {("svc", "a", "t1"): 1, ("svc", "a", "t2"): 0,
                                                                ("svc", "a", "other"): 1}
    assert samples(registry, "mast_tool_call_seconds_total")[("svc", "a", "t1")] == 4.0
    assert samples(registry, "mast_model_calls_total") == {("svc", "a", "m1"): 2}
    assert samples(registry, "mast_model_call_seconds_total") == {("svc", "a", "m1"): 4.0}
    assert replaced["tool"] == 1  # t3, past the limit of two tools


def test_each_run_is_observed_in_the_per_run_distributions() -> None:
    """Model and tool calls, duration and cost per run, per service and agent, with the GenAI conventions' buckets;
    a run calling a model without a price is left out of the cost distribution (its 0 USD is not free)."""
    mast, _, registry = series(limit=10)
    priced = Verdict("0" * 32, "svc", "bot", ["m"], 0, 2_500_000_000, 9, 3, 5, 10, 10, 0.02, {}, Waste(),
                     cost={"m": 0.02}, model_calls={"m": (3, 1.0)})
    unpriced = Verdict("0" * 32, "svc", "bot", ["m", "ft"], 0, 500_000_000, 40, 20, 20, 10, 10, 0.02, {}, Waste(),
                       cost={"m": 0.02}, model_calls={"m": (1, 0.1), "ft": (19, 2.0)})
    for v in (priced, unpriced):
        mast.export_verdict(v, NO_INCREMENT)
    s = _samples(registry)

    def bucket(name: str, le: str) -> float:
        return s[(f"{name}_bucket", (("agent", "bot"), ("le", le), ("service", "svc")))]

    def count(name: str) -> tuple[float, float]:
        labels = (("agent", "bot"), ("service", "svc"))
        return s[(f"{name}_count", labels)], s[(f"{name}_sum", labels)]

    assert [bucket("mast_run_model_calls", le) for le in ("2.0", "4.0", "16.0", "32.0", "+Inf")] == [0, 1, 1, 2, 2]
    assert count("mast_run_model_calls") == (2, 23)
    assert [bucket("mast_run_tool_calls", le) for le in ("4.0", "8.0", "16.0", "32.0")] == [0, 1, 1, 2]
    assert [bucket("mast_run_duration_seconds", le) for le in ("0.4", "0.8", "1.6", "3.2")] == [0, 1, 1, 2]
    assert count("mast_run_duration_seconds") == (2, 3.0)
    assert [bucket("mast_run_cost_usd", le) for le in ("0.01", "0.03", "+Inf")] == [0, 1, 1]
    assert count("mast_run_cost_usd") == (1, 0.02)
