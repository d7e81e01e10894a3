"""Trace assembly hands completed traces on in batches: each trace once, in completion order, a bounded number
at a time, an evicted trace before the step that evicted it is buffered."""

from __future__ import annotations

from mastwatch.collector.assemble import COMPLETE, COMPLETION_BATCH, EVICTED, SHUTDOWN, TraceAssembler
from mastwatch.collector.model.steps import Step, StepKind
from mastwatch.collector.model.trace import Trace

MS = 1_000_000


def root(trace: int) -> Step:
    """The root span of trace number `trace` (an agent invocation)."""
    return Step(trace_id=trace.to_bytes(16, "big"), span_id=trace.to_bytes(8, "big"), parent_span_id=b"",
                kind=StepKind.AGENT, name="invoke_agent", start_ns=trace * MS, end_ns=trace * MS + MS,
                service="svc")


def assembler(batches: list[list[tuple[Trace, str]]], max_traces: int = 100_000) -> TraceAssembler:
    return TraceAssembler(decision_wait=1.0, max_age=300.0, max_spans=1000, max_traces=max_traces,
                          max_buffered_spans=1_000_000, late_span_memory=1000, on_complete=batches.append)


def numbers(batch: list[tuple[Trace, str]]) -> list[tuple[int, str]]:
    return [(int.from_bytes(trace.trace_id, "big"), reason) for trace, reason in batch]


def test_traces_due_at_one_tick_are_handed_on_together() -> None:
    batches: list[list[tuple[Trace, str]]] = []
    traces = assembler(batches)
    for n in (1, 2, 3):
        traces.add(root(n), now=0.0)
    traces.add(root(4), now=0.5)
    traces.tick(0.9)
    assert batches == []
    traces.tick(1.2)
    assert [numbers(b) for b in batches] == [[(1, COMPLETE), (2, COMPLETE), (3, COMPLETE)]]
    traces.tick(1.6)
    assert [numbers(b) for b in batches][1:] == [[(4, COMPLETE)]]


def test_batches_are_bounded_and_keep_completion_order() -> None:
    batches: list[list[tuple[Trace, str]]] = []
    traces = assembler(batches)
    total = 2 * COMPLETION_BATCH + 10
    for n in range(1, total + 1):
        traces.add(root(n), now=0.0)
    traces.drain()
    assert [len(b) for b in batches] == [COMPLETION_BATCH, COMPLETION_BATCH, 10]
    assert [n for b in batches for n, _ in numbers(b)] == list(range(1, total + 1))
    assert {reason for b in batches for _, reason in numbers(b)} == {SHUTDOWN}


def test_an_evicted_trace_is_handed_on_before_the_step_that_evicted_it_is_buffered() -> None:
    batches: list[list[tuple[Trace, str]]] = []
    traces = assembler(batches, max_traces=2)
    traces.add(root(1), now=0.0)
    traces.add(root(2), now=0.0)
    assert batches == []
    trace = traces.add(root(3), now=0.0)
    assert [numbers(b) for b in batches] == [[(1, EVICTED)]]
    assert trace is not None and len(traces.traces) == 2
