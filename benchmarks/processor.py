"""Processor CPU per span, in process and by stage, against decoding in the same run.

  python benchmarks/processor.py [--spans 50000] [--batch 500] [--passes 5] [--content]

The requests of benchmarks/traffic.py (10-span agent runs) are decoded with the receiver's decoder, then fed
through cumulative stages: normalise; + assemble into traces; + classify (the engine's observe and finish); the
whole processor (`Processor.process` for each request, then `drain`: classification, pricing, verdicts; no
exporters); then with its Prometheus exporter (not served); then with the store too (chDB in a temporary
directory, flushed at the end of each pass: the writer thread's and chDB's CPU count; measured after the others, as
chDB's threads run in the background once started). Each stage's figure is
process CPU time per span, best of `--passes` passes (the machine may be
busy); what a stage adds is its figure minus the previous one. Ratios are against decoding, measured in the
same run. The decoded input is frozen out of garbage collection, whose thresholds are the server's. Then what
counting a request's spans costs (how a full queue refuses it before decoding), against decoding it. Last, what
the Prometheus exporter's counting of tool and model calls costs per span: its verdicts exported with their steps
and model call counts, against the same verdicts without them, best of `--passes` passes each.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from mastwatch.collector.assemble import TraceAssembler
from mastwatch.collector.classify.engine import ClassifierEngine
from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.normalize import normalize_span
from mastwatch.collector.processor import GC_THRESHOLDS, NO_INCREMENT, Processor
from mastwatch.collector.receiver.decode import SpanRecord, count_spans, decode
from mastwatch.exporter.prometheus import PrometheusExporter, PrometheusExporterConfig
from mastwatch.exporter.store import StoreConfig, StoreExporter
from mastwatch.exporter.totals import LabelLimiter, MastSeries

from traffic import requests


def _decode(bodies: list[bytes]) -> Callable[[], None]:
    return lambda: [decode(body) for body in bodies]


def _normalise(batches: list[list[SpanRecord]]) -> Callable[[], None]:
    def run() -> None:
        for spans in batches:
            for record in spans:
                normalize_span(record)
    return run


def _assembler(on_complete) -> TraceAssembler:
    c = ProcessorConfig()
    return TraceAssembler(decision_wait=c.decision_wait, max_age=c.max_trace_age, max_spans=c.max_spans_per_trace,
                          max_buffered_spans=c.max_buffered_spans,
                          max_traces=c.max_traces, late_span_memory=c.late_span_memory, on_complete=on_complete)


def _assemble(batches: list[list[SpanRecord]], engine: ClassifierEngine | None) -> Callable[[], None]:
    def complete(completed: list) -> None:
        if engine is not None:
            for trace, _ in completed:
                engine.finish(trace)
                trace.classifier = None

    def run() -> None:
        assembler = _assembler(complete)
        for spans in batches:
            for record in spans:
                step = normalize_span(record)
                trace = assembler.add(step, 0.0)
                if engine is not None and trace is not None:
                    engine.observe(trace, step)
        assembler.drain()
    return run


def _process(batches: list[list[SpanRecord]], prometheus: PrometheusExporter | None = None,
             store: StoreExporter | None = None) -> Callable[[], None]:
    """The processor, with the exporters given (the store is flushed: its writer thread's CPU counts)."""
    def run() -> None:
        telemetry = prometheus.self_metrics if prometheus else None
        processor = Processor(ProcessorConfig(), [e for e in (prometheus, store) if e], telemetry)
        for spans in batches:
            processor.process(spans, now=0.0)
        processor.drain()
        if store is not None:
            store.flush()
    return run


class _Verdicts:
    """An exporter keeping the verdicts it is given."""

    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []

    def export_increments(self, increments: list) -> None:
        pass

    def export_verdicts(self, verdicts: list[Verdict], increments: list) -> None:
        self.verdicts.extend(verdicts)

    def shutdown(self) -> None:
        pass


def _call_counting(batches: list[list[SpanRecord]], passes: int) -> tuple[float, float]:
    """CPU seconds to count the verdicts of `batches` in the mast_* series, without their calls (steps and model call
    counts) and with them."""
    kept = _Verdicts()
    processor = Processor(ProcessorConfig(), [kept])
    for spans in batches:
        processor.process(spans, now=0.0)
    processor.drain()
    calls = [(v.trace_steps, v.model_calls) for v in kept.verdicts]
    best = [float("inf")] * 2
    for _ in range(passes):
        for with_steps in (False, True):
            for verdict, (steps, models) in zip(kept.verdicts, calls, strict=True):
                verdict.trace_steps, verdict.model_calls = (steps, models) if with_steps else ([], {})
            series = MastSeries(CollectorRegistry(), LabelLimiter(100, lambda label: None))
            started = time.process_time()
            for verdict in kept.verdicts:
                series.export_verdict(verdict, NO_INCREMENT)
            best[with_steps] = min(best[with_steps], time.process_time() - started)
    return best[0], best[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--content", action="store_true", help="tool results captured (20 kB each)")
    args = parser.parse_args()
    bodies = requests(args.spans, args.batch, content=args.content)
    batches = [decode(body).spans for body in bodies]
    n = sum(len(b) for b in batches)
    prometheus = PrometheusExporter(PrometheusExporterConfig())  # not served
    stages = {"decode": _decode(bodies), "normalise": _normalise(batches), "+ assemble": _assemble(batches, None),
              "+ classify": _assemble(batches, ClassifierEngine()), "processor": _process(batches),
              "+ prometheus": _process(batches, prometheus)}
    best = dict.fromkeys([*stages, "+ store"], float("inf"))
    counting = [float("inf")] * 2  # each request's spans counted from its framing (a full queue's refusal): cold, hot
    gc.collect()
    gc.freeze()  # the decoded input is not garbage: collections would walk it again and again
    thresholds = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    for _ in range(args.passes):
        for name, run in stages.items():
            started = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - started)
        started = time.process_time()
        for body in bodies:
            count_spans(body)
        counting[0] = min(counting[0], time.process_time() - started)
        hot = 0
        for body in bodies:
            count_spans(body)  # in cache, as a request just received is
            started_ns = time.perf_counter_ns()
            count_spans(body)
            hot += time.perf_counter_ns() - started_ns
        counting[1] = min(counting[1], hot / 1e9)
    without_steps, with_steps = _call_counting(batches, args.passes)
    # the store last: chDB's threads, once started, run in the background of whatever is measured after
    directory = tempfile.TemporaryDirectory(prefix="mastwatch-bench-")
    store = StoreExporter(StoreConfig(path=directory.name), prometheus.self_metrics)
    with_store = _process(batches, prometheus, store)
    for _ in range(args.passes):
        started = time.process_time()
        with_store()
        best["+ store"] = min(best["+ store"], time.process_time() - started)
    gc.set_threshold(*thresholds)
    gc.unfreeze()
    store.shutdown()
    directory.cleanup()
    per_span = {name: seconds * 1e6 / n for name, seconds in best.items()}
    print(f"CPU µs per span, {n} spans in {len(bodies)} requests (10-span traces, content "
          f"{'on' if args.content else 'off'}), best of {args.passes} passes:")
    previous = None
    for name, us in per_span.items():
        added = "" if previous is None or name == "normalise" else f"  (adds {us - per_span[previous]:5.2f})"
        print(f"  {name:>10}: {us:6.2f} µs per span, ratio to decode {us / per_span['decode']:5.2f}{added}")
        previous = name
    print(f"  processor ex. decode: {n / best['processor']:,.0f} spans per CPU second")
    cold, hot = (seconds * 1e6 / len(bodies) for seconds in counting)
    print(f"  a request's spans counted from its framing (a full queue's refusal, before decoding): {hot:.1f} µs "
          f"per request in cache ({cold:.1f} from memory), decoding it {best['decode'] * 1e6 / len(bodies):.0f}")
    print(f"  mast_* series per verdict: {without_steps * 1e6 / n:.3f} µs per span; counting tool and model calls "
          f"adds {(with_steps - without_steps) * 1e6 / n:.3f} (ratio to decode "
          f"{(with_steps - without_steps) / best['decode']:.3f})")


if __name__ == "__main__":
    main()
