"""Instructions the processor's thread executes per span, counted by valgrind (steady where timings on a shared
machine are not).

  python benchmarks/instructions.py [--spans 20000] [--content] [--detectors FM-1.3,...] [--semconv]

Runs itself under `valgrind --tool=cachegrind` once per stage over the requests of benchmarks/traffic.py
(10-span agent runs, without content or with `--content` 20 kB tool results; decoded up front, ticked as a live
server ticks at 40,000 spans/s, with throughput.py's server settings: a trace completes 20 ms after its root, so
traces complete all through the run, as in a live server, and new ones reuse their detectors): decoding alone (the
baseline), then the processor, then with its Prometheus exporter, then with the store's share of the processor's
thread too (each verdict's rows encoded and appended to the durable queue; chDB's inserts, on the store's own
thread, are not counted). Prints decoding's instructions
per span (beyond a run that decodes only the warm-up's requests) and each later stage's beyond the stage before.
`--detectors` runs those failure modes' detectors only (as throughput.py's: what the others cost shows against a
default run). Spans carry only the attributes mastwatch reads (throughput.py's `--minimal`); with `--semconv` also
those GenAI instrumentations record besides, as throughput.py sends by default.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import re
import subprocess
import sys
import tempfile

STAGES = ("startup", "decode", "processor", "prometheus", "store")
WARM_BATCHES = 4  # decoded in every stage, the startup one too: the warm-up processor's traffic


def _run(stage: str, spans: int, content: bool, detectors: list[str] | None = None, semconv: bool = False) -> None:
    """One stage, in this process (what valgrind counts)."""
    from mastwatch.collector.classify.detectors import load_detectors
    from mastwatch.collector.config import ProcessorConfig
    from mastwatch.collector.processor import GC_THRESHOLDS, Processor
    from mastwatch.collector.receiver.decode import decode
    from mastwatch.exporter.prometheus import PrometheusExporter, PrometheusExporterConfig
    from mastwatch.exporter.store.queue import DurableQueue
    from mastwatch.exporter.store.records import encode

    from traffic import SERVER_PROCESSOR, requests

    class QueuedRows:
        """The store exporter's work on the processor's thread: rows encoded, appended to the durable queue."""

        def __init__(self, path: str) -> None:
            self.queue = DurableQueue(path, 10**8, 1 << 30, batch_rows=50_000, on_batch=lambda: None)

        def export_increments(self, increments) -> None:
            pass

        def export_verdicts(self, verdicts, increments) -> None:  # as StoreExporter's
            if self.queue.append(*encode(verdicts)):
                raise AssertionError("the queue is large enough for every row")

        def shutdown(self) -> None:
            self.queue.close()

    def processor(path: str) -> Processor:
        exporters: list = []
        telemetry = None
        if STAGES.index(stage) >= STAGES.index("prometheus"):
            prometheus = PrometheusExporter(PrometheusExporterConfig())
            exporters.append(prometheus)
            telemetry = prometheus.self_metrics
        if stage == "store":
            exporters.append(QueuedRows(path))
        enabled = {} if detectors is None else {code: {"enabled": code in detectors} for code in load_detectors()}
        return Processor(ProcessorConfig(detectors=enabled, **SERVER_PROCESSOR), exporters, telemetry)

    bodies = requests(spans, 500, content=content, semconv=semconv)
    batches = [decode(body).spans for body in (bodies[:WARM_BATCHES] if stage == "startup" else bodies)]
    with tempfile.TemporaryDirectory() as warm_path, tempfile.TemporaryDirectory() as path:
        warm = processor(warm_path)  # prices looked up, modules loaded: one-time costs left out of every stage
        for spans_ in batches[:WARM_BATCHES]:
            warm.process(spans_, now=0.0)
        warm.drain()
        gc.collect()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        if stage not in ("startup", "decode"):
            measured = processor(path)
            now = 0.0
            for spans_ in batches:
                measured.process(spans_, now=now)
                now += len(spans_) / 40_000
                measured.tick(now)
            measured.drain()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--content", action="store_true", help="tool results captured (20 kB each)")
    parser.add_argument("--detectors", help="the failure modes whose detectors run, comma-separated (FM-1.3); "
                                            "default: those enabled by default")
    parser.add_argument("--semconv", action="store_true", help="spans with the attributes instrumentations record "
                        "besides those mastwatch reads (throughput.py's default)")
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)  # the run valgrind counts
    args = parser.parse_args()
    detectors = args.detectors.split(",") if args.detectors else None
    if args.stage:
        _run(args.stage, args.spans, args.content, detectors, args.semconv)
        return
    counts = {}
    for stage in STAGES:
        with tempfile.NamedTemporaryFile() as out:
            done = subprocess.run(
                ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out.name}",
                 sys.executable, __file__, "--stage", stage, "--spans", str(args.spans),
                 *(["--content"] if args.content else []), *(["--detectors", args.detectors] if detectors else []),
                 *(["--semconv"] if args.semconv else [])],
                capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=True)
        counts[stage] = int(re.search(r"I\s+refs:\s+([\d,]+)", done.stderr).group(1).replace(",", ""))
    decoding = (counts["decode"] - counts["startup"]) / (args.spans - WARM_BATCHES * 500)
    total = (counts["store"] - counts["decode"]) / args.spans
    print(f"instructions per span over {args.spans} spans (10-span traces, content {'on' if args.content else 'off'}, "
          f"detectors: {args.detectors or 'the defaults'}; attributes: "
          f"{'as instrumentations send' if args.semconv else 'minimal'}):")
    print(f"  {'decode':>10}: {decoding:9,.0f}  (the baseline: protobuf to span records, no gRPC)")
    for before, stage in itertools.pairwise(STAGES[1:]):
        print(f"  {stage:>10}: {(counts[stage] - counts[before]) / args.spans:9,.0f}")
    print(f"  {'in all':>10}: {total:9,.0f}  ({total / decoding:.1f}x decoding)")


if __name__ == "__main__":
    main()
