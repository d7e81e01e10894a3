"""The Prometheus exporter's per-trace work, compiled with the per-span modules (setup.py): counter and histogram
families that the processor's thread adds to with a dict update (a prometheus-client child takes a lock and
several calls, most of the exporter's work), read by the registry as collectors when scraped, and the
mast_* series of each verdict. One thread adds; a scrape reads a copy (the GIL makes the copy atomic)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from mastwatch.collector.model.published import Increment
from mastwatch.collector.model.steps import TOOL
from mastwatch.collector.model.verdict import Verdict

OVERFLOW: Final = "other"
SPAN_DERIVED: Final = frozenset({"service", "agent", "model", "tool"})  # labels whose values the spans decide


class LabelLimiter:
    """First come, first kept: at most `limit` distinct values per label name."""

    def __init__(self, limit: int, on_overflow: Callable[[str], Any]) -> None:
        self.limit = limit
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self._on_overflow = on_overflow

    def __call__(self, label: str, value: str) -> str:
        return self.value(label, value)

    def value(self, label: str, value: str) -> str:
        """`value`, or `other` when `label` has `limit` values already. (A method: compiled callers call it natively,
        where calling the instance goes through Python.)"""
        if self.admits(label, value):
            return value
        self._on_overflow(label)
        return OVERFLOW

    def admits(self, label: str, value: str) -> bool:
        """Whether `value` is kept for `label` (else it is replaced by `other`; this does not count it)."""
        seen = self._seen.get(label)
        if seen is not None and value in seen:
            return True
        with self._lock:
            seen = self._seen.setdefault(label, set())
            if value in seen:
                return True
            if len(seen) < self.limit:
                seen.add(value)
                return True
        return False

    def overflowed(self, label: str) -> None:
        """Count a replacement by `other` (of a value the caller found not admitted before)."""
        self._on_overflow(label)


class Totals:
    """A counter family (a prometheus-client collector). Past `max_series` label sets, a new one is counted in the
    set whose span-derived labels are all `other` (`on_overflow("series")` each time): one such set per value of the
    other labels (a token type, a failure mode), on top of `max_series`."""

    width = 1  # numbers in a label set's cell

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], registry: Any,
                 max_series: int = 0, on_overflow: Callable[[str], Any] | None = None) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        # a one-item list per label set, added to in place: the label tuple is hashed once per add, not twice
        self.values: dict[tuple[str, ...], list[float]] = {}
        self.max_series, self.on_overflow = max_series, on_overflow
        self._derived = [name in SPAN_DERIVED for name in labelnames]
        self._kept = 0  # label sets made as given (not `other`)
        registry.register(self)

    def add(self, labels: tuple[str, ...], amount: float = 1) -> None:
        self.cell(labels)[0] += amount

    def cell(self, labels: tuple[str, ...]) -> list[float]:
        """The label set's cell, made at 0 when new: a caller that keeps it adds to it in place."""
        cell = self.values.get(labels)
        if cell is None:
            if self.max_series and self._kept >= self.max_series:
                labels = tuple([OVERFLOW if derived else v for v, derived in zip(labels, self._derived, strict=True)])
                if self.on_overflow is not None:
                    self.on_overflow("series")
                cell = self.values.get(labels)
                if cell is not None:
                    return cell
            else:
                self._kept += 1
            cell = self.values[labels] = [0.0] * self.width
        return cell

    def get(self, *labels: str) -> float:
        cell = self.values.get(labels)
        return 0 if cell is None else cell[0]

    def describe(self) -> list[CounterMetricFamily]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, cell in list(self.values.items()):
            family.add_metric(labels, cell[0])
        return [family]


def bucket_of(bounds: tuple[float, ...], value: float) -> int:
    """The index of the first bound `value` does not exceed (len(bounds): above every bound): bisect_left over a
    dozen bounds, without a call through Python."""
    i = 0
    for bound in bounds:
        if bound >= value:
            break
        i += 1
    return i


def cumulative(bounds: tuple[float, ...], counts: list[Any]) -> list[tuple[str, float]]:
    """A histogram's buckets as a scrape shows them: each bound (then +Inf) with the count at or below it."""
    buckets: list[tuple[str, float]] = []
    total = 0.0
    for bound, n in zip((*bounds, float("inf")), counts, strict=True):
        total += n
        buckets.append((floatToGoString(bound), total))
    return buckets


class Distribution(Totals):
    """A histogram family by label set (a prometheus-client collector): a cell holds the count of each bucket (the
    last: above every bound), then the sum."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], buckets: tuple[float, ...],
                 registry: Any, max_series: int = 0, on_overflow: Callable[[str], Any] | None = None) -> None:
        self.bounds = buckets
        self.width = len(buckets) + 2
        super().__init__(name, documentation, labelnames, registry, max_series, on_overflow)

    def observe(self, cell: list[float], value: float) -> None:
        cell[bucket_of(self.bounds, value)] += 1
        cell[-1] += value

    def describe(self) -> list[HistogramMetricFamily]:  # type: ignore[override]
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[HistogramMetricFamily]:  # type: ignore[override]
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, cell in list(self.values.items()):
            counts = list(cell)
            family.add_metric(list(labels), cumulative(self.bounds, counts[:-1]), counts[-1])
        return [family]


class LatencyHistogram:
    """A histogram family (a prometheus-client collector)."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...], registry: Any) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last: above every bound
        self.sum = 0.0
        registry.register(self)

    def observe(self, seconds: float) -> None:
        self.counts[bucket_of(self.bounds, seconds)] += 1
        self.sum += seconds

    def describe(self) -> list[HistogramMetricFamily]:
        return [HistogramMetricFamily(self.name, self.documentation)]

    def collect(self) -> list[HistogramMetricFamily]:
        counts, total = list(self.counts), self.sum
        return [HistogramMetricFamily(self.name, self.documentation, buckets=cumulative(self.bounds, counts),
                                      sum_value=total)]


class Completions:
    """Traces completed by reason, evictions and the classification latency: the processor's thread reports each
    trace here (SelfMetrics.trace_completed is this class's method, compiled)."""

    def __init__(self, completed: Totals, evicted: Any, latency: LatencyHistogram) -> None:
        self.completed, self.evicted, self.latency = completed, evicted, latency

    def trace_completed(self, reason: str, seconds: float) -> None:
        self.completed.add((reason,))
        if reason == "evicted":
            self.evicted.inc()
        self.latency.observe(seconds)


CALL_BUCKETS: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
DURATION_BUCKETS: Final = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6)
COST_BUCKETS: Final = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
MAX_KEPT: Final = 10_000  # (service, agent) pairs and their cells kept at most (span-derived values: bounded)


class AgentCells:
    """The cells a (service, agent) pair's verdicts add to, found at its first verdict (and at a model's or token
    type's first): later verdicts add to them in place, without building, hashing and comparing label tuples."""

    def __init__(self, service: str, agent: str, replaced: list[str]) -> None:
        self.service, self.agent = service, agent  # as limited
        self.replaced = replaced  # names of the labels whose values became `other`: counted again at each verdict
        self.traces: list[float] | None = None
        self.failing: list[float] | None = None
        self.tokens: dict[tuple[str, str], list[float]] = {}  # by the verdict's key (model, type)
        self.cost: dict[str, list[float]] = {}  # by the verdict's model
        self.models: dict[str, CallCells] = {}  # model calls, by the step's model, as given
        self.tools: dict[str, CallCells] = {}  # tool calls, by the step's tool, as given
        self.runs: list[list[float]] | None = None  # the run distributions' cells, in MastSeries.runs' order
        self.replaced_models: set[str] | None = None  # the models whose label became `other` (made at the first)


class CallCells:
    """One tool's or model's cells for a (service, agent) pair: calls, seconds and (tools) failed calls, made
    together (each counted from 0 with the first call: a failure counter born at the first failure would show no
    increase); `replaced`: its label became `other` (counted at each call)."""

    def __init__(self, calls: list[float], seconds: list[float], errors: list[float] | None, replaced: bool) -> None:
        self.calls, self.seconds, self.errors, self.replaced = calls, seconds, errors, replaced


class MastSeries:
    """mast_*: what the agents are doing, counted per verdict and increment."""

    def __init__(self, registry: Any, limit: LabelLimiter, max_series: int = 0,
                 watched: tuple[tuple[str, str], ...] = ()) -> None:
        """`watched`: the (failure mode, category) pairs alerts compute rates of. Each is counted from 0 for an agent
        from its first run on: a counter made at its first increment would show Prometheus no increase then."""
        r = registry
        self.limit = limit
        self.watched = watched

        def totals(name: str, documentation: str, labelnames: tuple[str, ...]) -> Totals:
            return Totals(name, documentation, labelnames, r, max_series, limit.overflowed)

        self.traces = totals("mast_traces", "Agent traces classified", ("service", "agent"))
        self.failing = totals("mast_failing_traces", "Traces showing at least one MAST failure mode (counted when "
                              "classified, as mast_traces; not when every finding's signature is muted)",
                              ("service", "agent"))
        self.mode_traces = totals("mast_failure_mode_traces", "Traces showing a MAST failure mode (counted once "
                                  "per trace, when first detected, possibly while the run goes on; not when the "
                                  "finding's signature is muted)", ("service", "agent", "failure_mode", "category"))
        self.muted_traces = totals("mast_muted_failure_mode_traces", "Traces whose finding of a MAST failure mode "
                                   "has a muted signature: a known problem, counted here instead of in "
                                   "mast_failure_mode_traces", ("service", "agent", "failure_mode", "category"))
        self.tokens = totals("mast_tokens", "Tokens of inference calls, by type (input excludes cached input; "
                             "input+output+cache_read+cache_write is the total)", ("service", "agent", "model", "type"))
        self.cost = totals("mast_cost_usd", "Inference spend in USD (genai-prices)", ("service", "agent", "model"))
        self.repeated = totals("mast_repeated_steps", "Steps that repeated an already completed step (FM-1.3)",
                               ("service", "agent", "tool"))
        self.wasted_tokens = totals("mast_wasted_tokens", "Tokens of the model calls that produced repeated steps, "
                                    "by type", ("service", "agent", "model", "type"))
        self.wasted_cost = totals("mast_wasted_cost_usd", "USD spent on the model calls that produced repeated "
                                  "steps", ("service", "agent", "model"))
        self.wasted_seconds = totals("mast_wasted_seconds", "Time of repeated steps, by the repeated step's tool: "
                                     "their own and that of the model calls that produced them (each call once)",
                                     ("service", "agent", "tool"))
        self.model_calls = totals("mast_model_calls", "Model (inference) calls", ("service", "agent", "model"))
        self.model_seconds = totals("mast_model_call_seconds", "Time spent in model calls",
                                    ("service", "agent", "model"))
        self.tool_calls = totals("mast_tool_calls", "Tool calls", ("service", "agent", "tool"))
        self.tool_errors = totals("mast_tool_call_errors", "Tool calls that failed (the span's status is error, or it "
                                  "records an error type)", ("service", "agent", "tool"))
        self.tool_seconds = totals("mast_tool_call_seconds", "Time spent in tool calls", ("service", "agent", "tool"))

        def distribution(name: str, documentation: str, buckets: tuple[float, ...]) -> Distribution:
            return Distribution(name, documentation, ("service", "agent"), buckets, r, max_series, limit.overflowed)

        # per run, as the GenAI conventions' gen_ai.invoke_agent.inference_calls, .tool_calls and
        # gen_ai.invocation.duration would give them where instrumentations emit them (and with their buckets)
        self.run_model_calls = distribution("mast_run_model_calls", "Model (inference) calls per run", CALL_BUCKETS)
        self.run_tool_calls = distribution("mast_run_tool_calls", "Tool calls per run", CALL_BUCKETS)
        self.run_seconds = distribution("mast_run_duration_seconds", "Run duration, first span start to last span end",
                                        DURATION_BUCKETS)
        self.run_cost = distribution("mast_run_cost_usd", "Inference spend per run, USD (runs whose every model has a "
                                     "price)", COST_BUCKETS)
        self.runs = (self.run_model_calls, self.run_tool_calls, self.run_seconds, self.run_cost)
        self._cells: dict[str, dict[str, AgentCells]] = {}  # service -> agent -> cells (as given, not limited)
        self._kept = 0  # pairs and their cells

    def export_increments(self, increments: list[Increment]) -> None:
        for inc in increments:
            self.export_increment(inc)

    def export_increment(self, inc: Increment) -> None:
        limit = self.limit  # its method called natively, not the instance through Python
        service, agent = limit.value("service", inc.service), limit.value("agent", inc.agent)
        for mode in inc.modes:
            self.mode_traces.add((service, agent, mode.code, mode.category))
        for mode in inc.muted:
            self.muted_traces.add((service, agent, mode.code, mode.category))
        for tool, n in inc.repeated_by_tool.items():
            self.repeated.add((service, agent, limit.value("tool", tool)), n)
        for (model, kind), tokens in inc.wasted_tokens.items():
            self.wasted_tokens.add((service, agent, limit.value("model", model), kind), tokens)
        for model, usd in inc.wasted_cost.items():
            self.wasted_cost.add((service, agent, limit.value("model", model)), usd)
        for tool, seconds in inc.wasted_seconds.items():
            self.wasted_seconds.add((service, agent, limit.value("tool", tool)), seconds)

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        for i, verdict in enumerate(verdicts):
            self.export_verdict(verdict, increments[i])

    def export_verdict(self, verdict: Verdict, inc: Increment) -> None:
        if inc.modes or inc.muted or inc.repeated_by_tool or inc.wasted_tokens or inc.wasted_cost or \
                inc.wasted_seconds:
            self.export_increment(inc)
        limit = self.limit  # its method called natively, not the instance through Python
        cells = self._agent_cells(verdict.service, verdict.agent)
        for label in cells.replaced:
            limit.overflowed(label)
        cell = cells.traces
        if cell is None:
            cell = cells.traces = self.traces.cell((cells.service, cells.agent))
            if cells.failing is None:
                cells.failing = self.failing.cell((cells.service, cells.agent))
            for code, category in self.watched:
                self.mode_traces.cell((cells.service, cells.agent, code, category))
        cell[0] += 1
        if verdict.findings and verdict.failing:
            cell = cells.failing
            if cell is None:
                cell = cells.failing = self.failing.cell((cells.service, cells.agent))
            cell[0] += 1
        for key, n in verdict.tokens.items():
            self._model_cell(cells, cells.tokens, key, key[0], self.tokens, key[1])[0] += n
        for model, usd in verdict.cost.items():
            self._model_cell(cells, cells.cost, model, model, self.cost, None)[0] += usd
        self._count_calls(cells, verdict)
        self._observe_run(cells, verdict)

    def _observe_run(self, cells: AgentCells, verdict: Verdict) -> None:
        """The run's calls, duration and (when every model it called has a price) cost, in the distributions."""
        runs = cells.runs
        if runs is None:
            key = (cells.service, cells.agent)
            runs = cells.runs = [distribution.cell(key) for distribution in self.runs]
        self.run_model_calls.observe(runs[0], verdict.llm_calls)
        self.run_tool_calls.observe(runs[1], verdict.tool_calls)
        self.run_seconds.observe(runs[2], max(verdict.ended_at_ns - verdict.started_at_ns, 0) / 1e9)
        cost = verdict.cost
        if len(cost) == len(verdict.model_calls):  # an unpriced model's calls are absent from cost
            self.run_cost.observe(runs[3], verdict.cost_usd)

    def _count_calls(self, cells: AgentCells, verdict: Verdict) -> None:
        """Model and tool calls of the run, with their time, by model (as the verdict counted them) and by tool."""
        tools, models = cells.tools, cells.models
        for step in verdict.trace_steps:
            if step.kind is not TOOL:
                continue
            tool = step.tool or step.name
            found = tools.get(tool)
            if found is None:
                found = tools[tool] = self._call_cells(cells, "tool", tool)
            if step.error:
                errors = found.errors
                if errors is not None:
                    errors[0] += 1
            if found.replaced:
                self.limit.overflowed("tool")
            found.calls[0] += 1
            found.seconds[0] += step.seconds
        for model, (n, seconds) in verdict.model_calls.items():
            found = models.get(model)
            if found is None:
                found = models[model] = self._call_cells(cells, "model", model)
            if found.replaced:
                for _ in range(n):  # counted per call, as the tools' replacements are
                    self.limit.overflowed("model")
            found.calls[0] += n
            found.seconds[0] += seconds

    def _call_cells(self, cells: AgentCells, label: str, value: str) -> CallCells:
        """The cells of a tool's or model's first call by the pair, its label limited."""
        replaced = not self.limit.admits(label, value)
        key = (cells.service, cells.agent, OVERFLOW if replaced else value)
        self._count_kept(cells)
        if label == "tool":
            return CallCells(self.tool_calls.cell(key), self.tool_seconds.cell(key), self.tool_errors.cell(key),
                             replaced)
        return CallCells(self.model_calls.cell(key), self.model_seconds.cell(key), None, replaced)

    def _model_cell(self, cells: AgentCells, found: dict[Any, list[float]], key: object, model: str, totals: Totals,
                    kind: str | None) -> list[float]:
        """The cell of `key` (in `found`: a model's, or a model's and token type's) in `totals`, found at the key's
        first verdict, its labels the pair's, the model's as limited, and `kind` if any. A replacement of the model by
        `other` is counted at every verdict."""
        known = cells.replaced_models
        replaced = known is not None and model in known
        cell = found.get(key)
        if cell is None:
            if not replaced and not self.limit.admits("model", model):
                replaced = True
                if known is None:
                    known = cells.replaced_models = set()
                known.add(model)
            label = OVERFLOW if replaced else model
            cell = found[key] = totals.cell((cells.service, cells.agent, label) if kind is None else
                                            (cells.service, cells.agent, label, kind))
            self._count_kept(cells)
        if replaced:
            self.limit.overflowed("model")
        return cell

    def _agent_cells(self, service: str, agent: str) -> AgentCells:
        """The pair's cells, found or made."""
        by_agent = self._cells.get(service)
        if by_agent is None:
            by_agent = self._cells[service] = {}
        cells = by_agent.get(agent)
        if cells is None:
            replaced: list[str] = []
            cells = by_agent[agent] = AgentCells(self._pair_label("service", service, replaced),
                                                 self._pair_label("agent", agent, replaced), replaced)
            self._count_kept(cells)
        return cells

    def _pair_label(self, label: str, value: str, replaced: list[str]) -> str:
        """`value` as limited; when replaced by `other`, `label` is added to `replaced` (counted per verdict)."""
        if self.limit.admits(label, value):
            return value
        replaced.append(label)
        return OVERFLOW

    def _count_kept(self, cells: AgentCells) -> None:
        """One more pair or cell kept; past MAX_KEPT all are forgotten (`cells`' too), to be found again: the totals
        stay."""
        self._kept += 1
        if self._kept > MAX_KEPT:
            self._cells.clear()
            cells.tokens.clear()
            cells.cost.clear()
            cells.models.clear()
            cells.tools.clear()
            self._kept = 0
