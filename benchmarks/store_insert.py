"""Sustained insert rate of finding rows into the embedded chDB store, on one core (CPU affinity).

  python benchmarks/store_insert.py [--rows 500000] [--batch 5000]

Each measurement runs in its own process on an empty store, pinned to the same core:
- raw chDB: the finding rows, already encoded, inserted with plain `INSERT ... FORMAT JSONCompactEachRow`
  queries in batches: the baseline, no exporter at all;
- store engine: the same rows through the exporter's insert path (streamed, with deduplication tokens);
- exporter: verdicts (one finding each, so a trace row too) through `export_verdict`: rows built and
  encoded, appended to the durable on-disk queue, then batched and inserted by the writer thread, until
  all are in the store.
Prints finding rows/s for each, by wall time and per CPU-second of the process (all its threads run on the
one core: on a busy machine the second is the rate a dedicated core gives), and the ratios to the baseline.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time

CPU = max(os.sched_getaffinity(0))


class Clock:
    """Wall time, and CPU time of the whole process (every thread, chDB's included, on the one core)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def _verdicts(n: int):
    """n verdicts with one finding each (a small pool, re-used with fresh trace ids)."""
    from mastwatch.collector.spend import Waste
    from mastwatch.collector.steps import Finding
    from mastwatch.collector.verdict import Verdict

    pool = []
    for i in range(1000):
        finding = Finding("FM-1.3", 0.9, [bytes([i % 256]) * 8, bytes([(i + 1) % 256]) * 8, b"\x07" * 8],
                          f'search called 3 times with equivalent arguments {{"q":"{i}"}}')
        pool.append(Verdict("", f"svc-{i % 5}", f"agent-{i % 40}", ["gpt-4.1-mini"],
                            1_767_225_600_000_000_000 + i * 1_000_000_000, 1_767_225_601_000_000_000 + i * 10**9,
                            10, 4, 5, 9000, 400, 0.004, {"FM-1.3": finding}, Waste()))
    for i in range(n):
        v = pool[i % len(pool)]
        v.trace_id = f"{i:032x}"
        yield v


def _finding_rows(n: int) -> list[bytes]:
    from mastwatch.exporter.store import _dumps, finding_rows

    return [_dumps(finding_rows(v)[0]).encode() for v in _verdicts(n)]


def _raw(path: str, n: int, batch: int) -> float:
    from chdb import session

    from mastwatch.exporter.store.schema import FINDINGS, TABLES, Layout, create_table

    rows = _finding_rows(n)
    s = session.Session(path)
    s.query("CREATE DATABASE mastwatch")
    for statement in create_table(TABLES[FINDINGS], Layout()):
        s.query(statement)
    clock = Clock()
    for i in range(0, n, batch):
        body = b"\n".join(rows[i:i + batch]).decode()
        s.query(f"INSERT INTO mastwatch.mast_findings FORMAT JSONCompactEachRow\n{body}")
    times = clock.stop()
    s.close()
    return times


def _engine(path: str, n: int, batch: int) -> float:
    from mastwatch.exporter.store.chdb_engine import ChdbEngine
    from mastwatch.exporter.store.schema import FINDINGS, TABLES, Layout, migrate

    rows = _finding_rows(n)
    engine = ChdbEngine(path)
    migrate(engine, Layout())
    clock = Clock()
    for i in range(0, n, batch):
        engine.insert("mastwatch.mast_findings", TABLES[FINDINGS].columns, rows[i:i + batch], f"bench-{i}")
    times = clock.stop()
    engine.close()
    return times


def _exporter(path: str, n: int, batch: int) -> float:
    from mastwatch.exporter.store import StoreConfig, StoreExporter

    store = StoreExporter(StoreConfig(path=path, batch_rows=batch, flush_interval=0.2))
    verdicts = _verdicts(n)
    clock = Clock()
    for v in verdicts:
        store.export_verdict(v, None)
    assert store.flush(600)
    times = clock.stop()
    (row,) = store.query("SELECT count() AS n FROM mastwatch.mast_findings")
    assert row["n"] == n, row
    store.shutdown()
    return times


def _run(target, n: int, batch: int, out) -> None:
    os.sched_setaffinity(0, {CPU})
    with tempfile.TemporaryDirectory(prefix="mastwatch-bench-") as path:
        out.put(target(path, n, batch))


def measure(target, n: int, batch: int) -> tuple[float, float]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_run, args=(target, n, batch, out))
    proc.start()
    times = out.get()
    proc.join()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--batch", type=int, default=5000)
    args = parser.parse_args()
    print(f"{args.rows:,} finding rows, batches of {args.batch}, one core (CPU {CPU})")
    results = {}
    for name, target in (("raw chDB INSERT (baseline)", _raw), ("store engine insert", _engine),
                         ("exporter: verdicts -> durable queue -> chDB", _exporter)):
        wall, cpu = measure(target, args.rows, args.batch)
        results[name] = (args.rows / wall, args.rows / cpu)
        print(f"  {name:44s} {results[name][0]:>9,.0f} finding rows/s  {results[name][1]:>9,.0f} per CPU-second"
              f"  ({wall:.2f} s wall, {cpu:.2f} s CPU)", flush=True)
    baseline = results["raw chDB INSERT (baseline)"]
    for name, (wall_rate, cpu_rate) in list(results.items())[1:]:
        print(f"  {name} / baseline: {wall_rate / baseline[0]:.2f} (wall), {cpu_rate / baseline[1]:.2f} (CPU)")


if __name__ == "__main__":
    main()
