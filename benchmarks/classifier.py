"""Classifier CPU per trace: the detector engine over 50-step agent runs.

  python benchmarks/classifier.py [--traces 2000] [--passes 5]
  python benchmarks/classifier.py --traces 200 --one normalise|all   (under cachegrind: instructions)
  python benchmarks/classifier.py --recorded    (the 278 recorded tau2 runs of tests/data, run from a checkout)

Runs are generated (with tests/scenarios of the checkout): 25 model calls each asking for one tool, 25 tool calls,
read-only and state-changing tools, some failing; without content attributes (the instrumentations' default), then
with them (the costlier case: arguments are compared, results and outputs read). `--recorded` classifies the
recorded customer-service runs instead (their users' turns, instructions and records read too), and gives the
figure per 50 steps.
Every pass normalises fresh steps (content is reduced on first use, as it is live), so the classifier's figure
is (normalise + classify) minus normalise alone, in process CPU time, best of five passes (the machine may be
busy); with all default detectors and with FM-1.3 alone in the same run. Each run has its own ids in its
arguments and results, and the cache of small values already reduced is emptied before every pass: a live
server meets a run's arguments for the first time. A finished trace's classifier state is dropped as the
processor drops it. The generated input is frozen out of garbage collection, and the collector runs with the
server's thresholds (`mastwatch.collector.processor.GC_THRESHOLDS`).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

from mastwatch.collector.classify.detectors import load_detectors
from mastwatch.collector.classify.engine import ClassifierEngine
from mastwatch.collector.model import content as content_cache
from mastwatch.collector.model.trace import Trace
from mastwatch.collector.normalize import normalize_span
from mastwatch.collector.processor import GC_THRESHOLDS
from mastwatch.collector.receiver.decode import SpanRecord, records
from mastwatch.evaluate import without_content

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.scenarios import Run  # the checkout's, as the recorded runs

TOOLS = ["get_order", "search_products", "update_order", "get_order_status", "send_email"]


def traces(n: int, content: bool) -> list[list[SpanRecord]]:
    out = []
    for t in range(n):
        run = Run(f"bench-{t}")
        for i in range(25):
            tool = TOOLS[(i + t) % len(TOOLS)]
            failed = i % 9 == 4
            ref = t * 7 + i % 7  # the run's own records
            run.llm(f"Step {i}: I will call {tool} next.", [(tool, {"id": ref, "n": i})])
            run.tool(tool, {"id": ref, "n": i}, "error: locked" if failed else {"id": ref, "ok": True},
                     error="LockedError" if failed else None)
        spans = records(run.request()).spans[1:]  # the root is left out: 50 steps
        out.append(spans if content else without_content(spans))
    return out


def recorded(content: bool) -> list[list[SpanRecord]]:
    """The recorded runs with an outcome in tests/data (tau2-bench and tau2), their root spans left out."""
    from tests.otlp_corpus import outcome_corpus

    out = []
    for _, _, request, _ in outcome_corpus():
        spans = [s for s in records(request).spans if s.parent_span_id]
        out.append(spans if content else without_content(spans))
    return out


def measure(engine: ClassifierEngine | None, runs: list[list[SpanRecord]]) -> float:
    """Process CPU seconds per trace: normalising its spans, and classifying them when an engine is given."""
    content_cache._reduced_raw.cache_clear()
    started = time.process_time()
    for spans in runs:
        trace = Trace(spans[0].trace_id, 0.0, 0.0)
        for record in spans:
            step = normalize_span(record)
            trace.add(step, 0.0)
            if engine is not None:
                engine.observe(trace, step)
        if engine is not None:
            engine.finish(trace)
            trace.classifier = None  # as the processor does: the detectors point back at the trace
    return (time.process_time() - started) / len(runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--recorded", action="store_true", help="the recorded tau2 runs instead of generated ones")
    parser.add_argument("--one", choices=("normalise", "all"), help="one pass of one case with content on, printing "
                        "nothing: run it under `valgrind --tool=cachegrind` for both cases, the difference over "
                        "--traces is the classifier's instructions per trace")
    args = parser.parse_args()
    gc.set_threshold(*GC_THRESHOLDS)
    everything = ClassifierEngine()
    if args.one:
        runs = traces(args.traces, True)
        gc.collect()
        gc.freeze()
        measure(everything if args.one == "all" else None, runs)
        return
    alone = ClassifierEngine({code: {"enabled": False} for code in load_detectors() if code != "FM-1.3"})
    for content in (False, True):
        runs = recorded(content) if args.recorded else traces(args.traces, content)
        steps = 50 if args.recorded else len(runs[0])
        scale = 50 * len(runs) / sum(map(len, runs)) if args.recorded else 1.0  # per trace -> per 50 steps
        best = {"normalise": float("inf"), "all": float("inf"), "alone": float("inf")}
        gc.collect()
        gc.freeze()  # the generated runs are not garbage: collections would walk them again and again
        for _ in range(args.passes):
            for name, engine in (("normalise", None), ("all", everything), ("alone", alone)):
                best[name] = min(best[name], measure(engine, runs))
        gc.unfreeze()
        all_s, one_s = (best["all"] - best["normalise"]) * scale, (best["alone"] - best["normalise"]) * scale
        n = len(everything.detectors)
        print(f"content {'on' if content else 'off'}: classifier CPU per trace of {steps} steps ({len(runs)} "
              f"{'recorded runs' if args.recorded else 'traces'}; normalisation, "
              f"{best['normalise'] * scale * 1e6:.0f} µs per {steps} steps, not included):")
        print(f"  all {n} default detectors: {all_s * 1e6:7.1f} µs per trace, {all_s * 1e6 / steps:5.2f} µs per step")
        print(f"  FM-1.3 alone:            {one_s * 1e6:7.1f} µs per trace, {one_s * 1e6 / steps:5.2f} µs per step")
        print(f"  ratio all / FM-1.3 alone: {all_s / one_s:.2f}")


if __name__ == "__main__":
    main()
