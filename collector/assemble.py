"""Trace assembly: spans grouped by trace across requests and in any order, released when complete.

A trace is complete when
- its root span has ended and nothing arrived for `decision_wait` (the normal case), or
- it reached `max_spans` spans, or it has been open for `max_age` (a root that never comes), or
- it is the oldest of `max_traces` traces in flight when a new one arrives, or the oldest when a new span would
  make `max_buffered_spans` spans in flight (eviction, counted; a span whose own trace that evicts is late).
Every completed trace is classified with what it has; none is dropped. The two limits bound memory whatever the
traces' sizes. Spans that arrive for a trace already completed are late: counted and dropped, so that a trace is
classified and counted exactly once. The ids of the last `late_span_memory` completed traces are remembered for
that.

Completed traces are handed on in batches (those one tick, one drain or one step completes, up to
`COMPLETION_BATCH`): each stage of their completion (classification, verdicts, each exporter) then runs over the
whole batch, its code staying in the processor's instruction cache instead of every stage evicting the next.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .steps import AGENT, LLM, TOOL, Step, ended_by

COMPLETE: Final = "complete"
MAX_SPANS: Final = "max_spans"
MAX_AGE: Final = "max_age"
EVICTED: Final = "evicted"
SHUTDOWN: Final = "shutdown"
END_OF_INPUT: Final = "end_of_input"
COMPLETION_BATCH: Final = 256  # traces handed on at once, at most (bounds what a batch holds)


class Trace:
    """The steps of one trace seen so far, plus what the classifier keeps for it."""

    def __init__(self, trace_id: bytes, first_seen: float, last_seen: float) -> None:
        self.trace_id = trace_id
        self.first_seen = first_seen
        self.last_seen = last_seen
        self.steps: list[Step] = []
        self.span_ids: set[bytes] = set()  # a span sent again (a retried request) is kept once
        self.llm_steps: list[Step] = []  # in end order
        self.root: Step | None = None
        self.in_order = True  # model, tool and agent steps arrived in `order_key` order
        self._last_key: tuple[int, int, bytes] | None = None
        self.tool_calls = 0
        self.started_ns = 0  # earliest start and latest end of any step
        self.ended_ns = 0
        self.classifier: Any = None  # per-trace classifier state, owned by the engine
        self.shared: dict[str, Any] | None = None  # state its detectors share, by name (made by the first)
        self.emitted: Any = None  # what the sinks were already told (live findings), owned by the processor
        self.observed = 0  # how many of `steps` the classifier was fed (they are fed in arrival order)
        self.completed = False  # handed on for its verdict

    def add(self, step: Step, now: float) -> None:
        steps = self.steps
        if not steps or step.start_ns < self.started_ns:
            self.started_ns = step.start_ns
        if step.end_ns > self.ended_ns:
            self.ended_ns = step.end_ns
        steps.append(step)
        kind = step.kind
        if kind is LLM or kind is TOOL or kind is AGENT:
            key = order_key(step)
            last = self._last_key
            if last is not None and key < last:
                self.in_order = False
            self._last_key = key
            if kind is TOOL:
                self.tool_calls += 1
        if kind is LLM:
            llm_steps = self.llm_steps
            if llm_steps and _end_key(step) < _end_key(llm_steps[-1]):
                i = ended_by(llm_steps, step.end_ns - 1)  # the first that ended at or after it
                while i < len(llm_steps) and _end_key(llm_steps[i]) < _end_key(step):
                    i += 1
                llm_steps.insert(i, step)
            else:
                llm_steps.append(step)
        if step.is_root:
            self.root = step
        self.last_seen = now

    def agent(self) -> str | None:
        """The run's agent as far as known: the root span's, else that of the first step (in `order_key` order)
        naming one, whatever order they came in."""
        root = self.root
        if root is not None and root.agent:
            return root.agent
        named = [s for s in self.steps if s.agent]
        return min(named, key=order_key).agent if named else None

    def first(self) -> Step:
        """The root, else the first step in `order_key` order."""
        return self.root if self.root is not None else min(self.steps, key=order_key)

    def ordered_steps(self) -> list[Step]:
        return self.steps if self.in_order else sorted(self.steps, key=order_key)


def order_key(step: Step) -> tuple[int, int, bytes]:
    """The order detectors see a trace's steps in, whatever order they arrived in: model and tool calls by start
    (they arrive as they end, which for one agent's calls is the same), an agent span by its end (it ends after
    the calls it made, and arrives after them); ties by end, then span id."""
    return (step.end_ns if step.kind is AGENT else step.start_ns, step.end_ns, step.span_id)


def _end_key(step: Step) -> tuple[int, int, bytes]:
    """The order of `Trace.llm_steps`: by end, ties by start, then span id (never by arrival)."""
    return (step.end_ns, step.start_ns, step.span_id)


@dataclass
class AssemblyStats:
    late_spans: int = 0
    duplicate_spans: int = 0  # spans of an open trace received again (a client retrying a request it had sent)


class TraceAssembler:
    def __init__(self, *, decision_wait: float, max_age: float, max_spans: int, max_traces: int,
                 max_buffered_spans: int, late_span_memory: int,
                 on_complete: Callable[[list[tuple[Trace, str]]], None]) -> None:
        self.decision_wait = decision_wait
        self.max_age = max_age
        self.max_spans = max_spans
        self.max_traces = max_traces
        self.max_buffered_spans = max_buffered_spans
        self.on_complete = on_complete  # given each batch of completed traces, with why each completed
        self._completed: list[tuple[Trace, str]] = []  # not handed on yet
        self.traces: OrderedDict[bytes, Trace] = OrderedDict()  # oldest first
        self.spans_buffered = 0
        self.stats = AssemblyStats()
        self._closed: OrderedDict[bytes, None] = OrderedDict()
        self._closed_max = late_span_memory
        self._due: deque[tuple[float, bytes]] = deque()  # (deadline, trace id), deadlines ascending

    def add(self, step: Step, now: float) -> Trace | None:
        """Buffer a step; returns its trace, or None for a late span."""
        trace = self.traces.get(step.trace_id)
        if trace is None:
            if step.trace_id in self._closed:
                self.stats.late_spans += 1
                return None
            if len(self.traces) >= self.max_traces:
                self._complete(self._oldest(), EVICTED)
                self._release()
            trace = self.traces[step.trace_id] = Trace(step.trace_id, now, now)
        if self.spans_buffered >= self.max_buffered_spans:
            while self.spans_buffered >= self.max_buffered_spans and self.traces:
                self._complete(self._oldest(), EVICTED)
            self._release()
            if step.trace_id not in self.traces:  # its own trace was the oldest: classified, the span comes late
                self.stats.late_spans += 1
                return None
        if step.span_id in trace.span_ids:
            self.stats.duplicate_spans += 1
            return trace
        trace.span_ids.add(step.span_id)
        trace.add(step, now)
        self.spans_buffered += 1
        if len(trace.steps) >= self.max_spans:
            self._complete(trace, MAX_SPANS)
            self._release()
        elif trace.root is not None:
            self._due.append((now + self.decision_wait, trace.trace_id))
        return trace

    def tick(self, now: float) -> None:
        """Complete what is due at `now`."""
        due = self._due
        while due and due[0][0] <= now:
            _, trace_id = due.popleft()
            trace = self.traces.get(trace_id)
            if trace is not None and trace.last_seen + self.decision_wait <= now:
                self._complete(trace, COMPLETE)
        while self.traces:
            oldest = self._oldest()
            if oldest.first_seen + self.max_age > now:
                break
            self._complete(oldest, MAX_AGE)
        self._release()

    def drain(self, reason: str = SHUTDOWN) -> None:
        """Complete everything (shutdown, end of replayed input)."""
        while self.traces:
            self._complete(self._oldest(), reason)
        self._release()

    def _oldest(self) -> Trace:
        for trace in self.traces.values():  # the first: a compiled loop, not next(iter()) through Python
            return trace
        raise LookupError("no trace is buffered")

    def remember(self, trace_ids: list[bytes]) -> None:
        """Trace ids completed before (by a previous process): their spans are late, not a new trace."""
        for trace_id in trace_ids[-self._closed_max:] if self._closed_max else ():
            self._closed[trace_id] = None

    def _complete(self, trace: Trace, reason: str) -> None:
        trace.completed = True
        del self.traces[trace.trace_id]
        self.spans_buffered -= len(trace.steps)
        self._closed[trace.trace_id] = None
        if len(self._closed) > self._closed_max:
            self._closed.popitem(last=False)
        self._completed.append((trace, reason))
        if len(self._completed) >= COMPLETION_BATCH:
            self._release()

    def _release(self) -> None:
        """Hand on the traces completed so far."""
        if self._completed:
            completed, self._completed = self._completed, []
            self.on_complete(completed)
