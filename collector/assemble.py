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
from typing import Final

from .model.steps import Step
from .model.trace import Trace

COMPLETE: Final = "complete"
MAX_SPANS: Final = "max_spans"
MAX_AGE: Final = "max_age"
EVICTED: Final = "evicted"
SHUTDOWN: Final = "shutdown"
END_OF_INPUT: Final = "end_of_input"
COMPLETION_BATCH: Final = 256  # traces handed on at once, at most (bounds what a batch holds)


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
