"""Resident memory per buffered span (traces whose root has not ended stay in the assembler), per queued span
(decoded requests waiting for the processor), and per detector set kept for reuse (the default detectors, reset
when their trace's verdict is out; the engine keeps up to SPARE_SETS per profile).

  python benchmarks/memory.py [--spans 200000]

Each figure comes from a fresh process: resident set size after buffering (or decoding and holding) N spans minus
before, over N. Without content attributes, and with 20 kB tool results and arguments on every tool span: a
buffered span keeps content as a fingerprint and a preview, a queued span whole (processor.queue_mib bounds the
queue's bytes).
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os

from traffic import requests


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure_queued(out, spans: int, content: bool) -> None:
    from mastwatch.collector.receiver.decode import decode

    bodies = requests(spans, 1000, content=content, roots=False)
    decode(bodies[0])
    gc.collect()
    before = _rss()
    queued = [decode(body).spans for body in bodies]
    gc.collect()
    n = sum(len(q) for q in queued)
    out.put((n, (_rss() - before) / n))


def measure(out, spans: int, content: bool) -> None:
    from mastwatch.collector.config import ProcessorConfig
    from mastwatch.collector.processor import Processor
    from mastwatch.collector.receiver.decode import decode

    bodies = requests(spans, 1000, content=content, roots=False)
    processor = Processor(ProcessorConfig(decision_wait=3600, max_trace_age=3600, max_traces=10**7), [])
    processor.process(decode(requests(1000, 1000, content, False)[0]).spans, now=0.0)
    gc.collect()
    before = _rss()
    for body in bodies:
        processor.process(decode(body).spans, now=0.0)
    gc.collect()
    buffered = processor.assembler.spans_buffered
    out.put((buffered, (_rss() - before) / (buffered - 900)))


def measure_kept(out) -> None:
    from mastwatch.collector.classify.engine import SPARE_SETS, ClassifierEngine
    from mastwatch.collector.model.trace import Trace

    engine = ClassifierEngine()
    traces = [Trace(i.to_bytes(16, "big"), 0.0, 0.0) for i in range(1, SPARE_SETS + 1)]
    gc.collect()
    before = _rss()
    for trace in traces:
        engine._new(trace, -1, True)
    for trace in traces:
        engine.release(trace)
    gc.collect()
    out.put((len(engine._spare[0]), (_rss() - before) / len(engine._spare[0])))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=200_000)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    for what, target in (("buffered", measure), ("queued", measure_queued)):
        for content in (False, True):
            out = ctx.Queue()
            p = ctx.Process(target=target, args=(out, args.spans, content))
            p.start()
            n, per_span = out.get()
            p.join()
            label = "with 20 kB content" if content else "without content"
            print(f"{label:>20}: {per_span:,.0f} bytes resident per {what} span ({n:,} spans {what})")
    out = ctx.Queue()
    p = ctx.Process(target=measure_kept, args=(out,))
    p.start()
    n, per_set = out.get()
    p.join()
    print(f"{'default detectors':>20}: {per_set:,.0f} bytes resident per detector set kept for reuse ({n:,} kept)")


if __name__ == "__main__":
    main()
