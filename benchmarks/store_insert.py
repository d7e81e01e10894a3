"""Sustained insert rate of finding rows into the embedded chDB store, on one core (CPU affinity).

  python benchmarks/store_insert.py [--rows 500000] [--batch 50000]

Each measurement runs in its own process on an empty store, pinned to the same core:
- raw chDB: finding rows, already encoded as the store encodes them (a Native block of `--batch` rows), each
  inserted with a plain streamed `INSERT` (no deduplication token, no settings): the baseline, no exporter at all;
- store engine: the same rows through the exporter's insert path (streamed, with deduplication tokens);
- exporter: verdicts through `export_verdicts`, 256 at a time as the processor hands them on (rows built and
  encoded, appended to the durable on-disk queue),
  batched (`batch_rows` = `--batch`, rows of every table) and inserted by the writer thread, until all are
  in the store. Two kinds of verdicts: one finding (FM-1.3: three evidence span ids, a 60-character
  reason) plus the trace row; and a looping run with three findings (FM-1.3, FM-1.5, FM-2.6) and two
  repeated steps, plus the trace row. Every verdict has its own trace id, times differ to the nanosecond.
Prints finding rows/s for each, by wall time and per CPU-second of the process (all its threads run on the
one core: on a busy machine the second is the rate a dedicated core gives), the ratios to the baseline, and
for the exporter the CPU per verdict on the calling (the processor's) thread alone: what `export_verdicts`
costs the span pipeline, the writer thread's work excluded.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import multiprocessing as mp
import os
import tempfile
import time

CPU = max(os.sched_getaffinity(0))
SIMPLE, LOOPING = ("FM-1.3",), ("FM-1.3", "FM-1.5", "FM-2.6")


class Clock:
    """Wall time, and CPU time of the whole process (every thread, chDB's included, on the one core)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def _pool(modes: tuple[str, ...], size: int = 1000) -> list:
    """Verdicts with a finding of each of `modes` (and two repeated steps when there are several)."""
    from mastwatch.collector.model.content import Content
    from mastwatch.collector.model.steps import Finding, Step, StepKind
    from mastwatch.collector.model.verdict import Verdict
    from mastwatch.collector.spend import RepeatedStep, Waste

    pool = []
    for i in range(size):
        start = 1_767_225_600_000_000_000 + i * 1_000_003_007
        evidence = [bytes([i % 256]) * 8, bytes([(i + 1) % 256]) * 8, b"\x07" * 8]
        findings = {code: Finding(code, 0.9, evidence, f'search called 3 times with equivalent arguments {{"q":"{i}"}}')
                    for code in modes}
        waste = Waste()
        if len(modes) > 1:
            steps = [Step(b"\x07" * 16, (i * 2 + k).to_bytes(8, "big"), b"\x01", StepKind.TOOL, "search",
                          start + k * 7_654_321, start + k * 7_654_321 + 900_000_000, f"svc-{i % 5}", tool="search",
                          args=Content({"q": str(i)})) for k in range(2)]
            charged = (("input", 900), ("output", 40), ("cache_read", 0), ("cache_write", 0))
            waste = Waste({"search": 2}, {("gpt-4.1-mini", "input"): 900, ("gpt-4.1-mini", "output"): 40},
                          {"gpt-4.1-mini": 0.0004},
                          steps=[RepeatedStep("FM-1.3", s, "search", "gpt-4.1-mini", charged, 0.0004) for s in steps])
        pool.append(Verdict("", f"svc-{i % 5}", f"agent-{i % 40}", ["gpt-4.1-mini"], start, start + 9_876_543_211,
                            10, 4, 5, 9000, 400, 0.004, findings, waste))
    return pool


def _verdicts(n: int, modes: tuple[str, ...] = SIMPLE):
    """n verdicts (a pool re-used with fresh trace ids)."""
    pool = _pool(modes)
    for i in range(n):
        v = pool[i % len(pool)]
        v.trace_id = f"{i:032x}"
        yield v


def _finding_bodies(n: int, batch: int) -> list[bytes]:
    """The finding rows of n one-finding verdicts as the store encodes them, `batch` rows to a body."""
    from mastwatch.exporter.store.queue import Batch
    from mastwatch.exporter.store.records import decode, encode
    from mastwatch.exporter.store.schema import FINDINGS

    records = [encode([v]) for v in _verdicts(n)]
    return [decode(Batch("", 0, 0, 0, [payload for _, payload in records[i:i + batch]]))[FINDINGS]
            for i in range(0, n, batch)]


def _raw(path: str, n: int, batch: int) -> tuple[float, float, float]:
    from chdb import session

    from mastwatch.exporter.store.schema import FINDINGS, TABLES, Layout, create_table

    bodies = _finding_bodies(n, batch)
    s = session.Session(path)
    s.query("CREATE DATABASE mastwatch")
    for statement in create_table(TABLES[FINDINGS], Layout()):
        s.query(statement)
    names = ", ".join(TABLES[FINDINGS].column_names)
    clock = Clock()
    for body in bodies:
        inserter = s.send_insert(f"INSERT INTO mastwatch.mast_findings ({names})", "Native")
        inserter.append(body)
        inserter.finish()
    times = clock.stop()
    s.close()
    return (*times, 0.0)


def _engine(path: str, n: int, batch: int) -> tuple[float, float, float]:
    from mastwatch.exporter.store.chdb_engine import ChdbEngine
    from mastwatch.exporter.store.schema import FINDINGS, TABLES, Layout, migrate

    bodies = _finding_bodies(n, batch)
    engine = ChdbEngine(path)
    migrate(engine, Layout())
    clock = Clock()
    for i, body in enumerate(bodies):
        engine.insert("mastwatch.mast_findings", TABLES[FINDINGS].columns, body, f"bench-{i}")
    times = clock.stop()
    engine.close()
    return (*times, 0.0)


def _exporter(path: str, n: int, batch: int, modes: tuple[str, ...]) -> tuple[float, float, float]:
    from mastwatch.collector.assemble import COMPLETION_BATCH
    from mastwatch.collector.processor import NO_INCREMENT
    from mastwatch.exporter.store import StoreConfig, StoreExporter

    store = StoreExporter(StoreConfig(path=path, batch_rows=batch))
    verdicts = _verdicts(n // len(modes), modes)
    clock = Clock()
    own = time.thread_time()
    while chunk := list(itertools.islice(verdicts, COMPLETION_BATCH)):
        store.export_verdicts(chunk, [NO_INCREMENT] * len(chunk))
    own = time.thread_time() - own
    assert store.flush(600)
    times = clock.stop()
    (row,) = store.query("SELECT count() AS n FROM mastwatch.mast_findings")
    assert row["n"] == n // len(modes) * len(modes), row
    store.shutdown()
    return (*times, own / (n // len(modes)))


def _exporter_simple(path: str, n: int, batch: int) -> tuple[float, float, float]:
    return _exporter(path, n, batch, SIMPLE)


def _exporter_looping(path: str, n: int, batch: int) -> tuple[float, float, float]:
    return _exporter(path, n, batch, LOOPING)


def _run(target, n: int, batch: int, out) -> None:
    from mastwatch.collector.processor import GC_THRESHOLDS

    os.sched_setaffinity(0, {CPU})
    gc.set_threshold(*GC_THRESHOLDS)  # as the server sets them
    with tempfile.TemporaryDirectory(prefix="mastwatch-bench-") as path:
        out.put(target(path, n, batch))


def measure(target, n: int, batch: int) -> tuple[float, float, float]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_run, args=(target, n, batch, out))
    proc.start()
    times = out.get()
    proc.join()
    return times


def main() -> None:
    from mastwatch.exporter.store import StoreConfig

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--batch", type=int, default=StoreConfig().batch_rows, help="rows per insert")
    args = parser.parse_args()
    print(f"{args.rows:,} finding rows, batches of {args.batch} rows, one core (CPU {CPU})")
    results = {}
    for name, target in (("raw chDB INSERT (baseline)", _raw), ("store engine insert", _engine),
                         ("exporter, 1 finding per verdict", _exporter_simple),
                         ("exporter, 3 findings + 2 steps per verdict", _exporter_looping)):
        wall, cpu, own = measure(target, args.rows, args.batch)
        results[name] = (args.rows / wall, args.rows / cpu)
        line = (f"  {name:43s} {results[name][0]:>9,.0f} finding rows/s  {results[name][1]:>9,.0f} per CPU-second"
                f"  ({wall:.2f} s wall, {cpu:.2f} s CPU)")
        if own:
            line += f"; export_verdicts {own * 1e6:.1f} µs CPU per verdict on the caller's thread"
        print(line, flush=True)
    baseline = results["raw chDB INSERT (baseline)"]
    for name, (wall_rate, cpu_rate) in list(results.items())[1:]:
        print(f"  {name} / baseline: {wall_rate / baseline[0]:.2f} (wall), {cpu_rate / baseline[1]:.2f} (CPU)")


if __name__ == "__main__":
    main()
