"""End-to-end throughput of the OTLP gRPC receiver against a decode-only receiver, in the same run.

The server side runs on one core (CPU affinity), the load generator on another, over loopback. Requests
are encoded once up front, so the client costs little, and the clock starts once the client's channel is
connected (a spawned client process takes a quarter of a second to start: counted in, it padded the fast mode's
short run the most and flattered the ratio). Each trace is an agent run: an invoke_agent root, and model calls and
tool calls (some looping), 10 spans in all; without content capture, or with `--content` with a 20 kB result on
every tool call (4 in 10 spans). Spans carry what GenAI instrumentations record (the conventions' recommended
attributes, an SDK's resource and scope), or with `--minimal` only the attributes mastwatch reads.

  python benchmarks/throughput.py [--spans 200000] [--batch 500] [--rounds 3] [--detectors FM-1.3,...] [--content]
                                  [--minimal] [--decode-repeat 3] [--stop-signal] [--set key.path=value ...]

Prints spans/s (by wall clock, and per CPU second of the server process: the steadier figure on a shared machine)
end to end (decoded, normalised, assembled, classified, priced, counted in Prometheus and written to the chDB
store), the same without the store, spans/s of the decode-only receiver (the same gRPC receiver and decoder,
dropping what it decodes; sent the requests `--decode-repeat` times, 3 by default: it decodes about three times as
fast, so that its run lasts about as long as the other modes', each run's seconds printed), the share of the
server's CPU time spent collecting garbage (timed with gc.callbacks), the server's CPU per span by thread (from
/proc: the processor, the store's writer, the gRPC workers, chDB's threads) and its minor page faults per span
(memory touched for the first time: the kernel zeroes each page), and the ratios. The modes take turns for
`--rounds` rounds, each in a fresh server process; the ratios are of each mode's best round (a shared machine only
ever slows a run down; the best of short runs is the higher where the machine's speed drifts from second to second,
so the modes' runs are made about as long), and within each round (modes run seconds apart: where the machine's
speed drifts over minutes, the best rounds of two modes may come from different phases of it). `--detectors` runs
those failure modes' detectors only (what the others cost shows against a default run).
`--stop-signal` has the server (both modes) also tell a webhook of every run's findings as they come (every mode,
to a sink in its own process on the client's CPU), and keep them for `GET /v1/findings`, as a server acting as a
stop signal does. `--set` changes a setting of the server (both modes), as `mastwatch serve --set` does (e.g.
`exporters.store.steps=off`). BENCH_WORKERS sets the gRPC server threads of both receivers (default 4).
"""

from __future__ import annotations

import argparse
import collections
import gc
import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
import threading
import time

import grpc

from traffic import SERVER_PROCESSOR, requests

WORKERS = int(os.environ.get("BENCH_WORKERS", "4"))
METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _webhook_sink(cpu: int | None, port, stop) -> None:
    """Accept webhook POSTs on loopback until `stop` is set (the port it listens on is put in `port`)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    if cpu is not None:
        os.sched_setaffinity(0, {cpu})

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    port.value = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop.wait()
    server.shutdown()


def _client(endpoint: str, bodies: list[bytes], cpu: int | None, concurrency: int, ready, refused) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    channel = grpc.insecure_channel(endpoint, options=[("grpc.max_send_message_length", 64 << 20)])
    call = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
    grpc.channel_ready_future(channel).result(timeout=30)
    ready.set()  # the server's clock starts here: not with the client process's start-up
    chunks = [bodies[i::concurrency] for i in range(concurrency)]

    def send(chunk: list[bytes]) -> None:
        for body in chunk:
            while True:
                try:
                    call(body, timeout=60)
                    break
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    with refused.get_lock():
                        refused.value += 1
                    time.sleep(0.005)

    threads = [threading.Thread(target=send, args=(c,)) for c in chunks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    channel.close()


class _DecodeOnly:
    """A sink that takes every decoded, validated request and drops it: the receiver's own cost."""

    def __init__(self) -> None:
        self.spans = 0

    def submit(self, spans: list, size: int, payload: bytes | None = None, kind: int = 0) -> bool:
        self.spans += len(spans)
        return True

    def admits(self, spans: int, size: int) -> bool:
        return True


def _stat(path: str) -> list[str]:
    """The fields of a /proc stat file after the command name (so field 3 of proc(5), the state, is [0])."""
    with open(path) as f:
        return f.read().rsplit(")", 1)[1].split()


def _thread_cpu() -> collections.Counter[str]:
    """CPU seconds of this process's threads by name (a trailing number dropped: the gRPC workers are one)."""
    cpu: collections.Counter[str] = collections.Counter()
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip().rstrip("0123456789").rstrip("_")
            fields = _stat(f"/proc/self/task/{tid}/stat")
        except OSError:  # the thread ended
            continue
        cpu[name] += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return cpu


def _minor_faults() -> int:
    """Minor page faults of this process so far (pages it touched for the first time, zeroed by the kernel)."""
    return int(_stat("/proc/self/stat")[7])


def run(mode: str, bodies: list[bytes], total: int, server_cpu: int | None, client_cpu: int | None,
        concurrency: int, detectors: list[str] | None, queue_spans: int | None,
        webhook: str | None = None,
        settings: dict | None = None) -> tuple[float, float, float, dict[str, float], int, float]:
    """(spans per wall second, spans per CPU second of the server process, share of its CPU time spent
    collecting garbage, CPU µs per span of its threads by name, requests refused and sent again, minor page faults
    per span)."""
    from mastwatch.collector.classify.detectors import load_detectors
    from mastwatch.collector.receiver import GrpcConfig
    from mastwatch.collector.receiver.grpc_server import GrpcReceiver
    from mastwatch.config import load, merge
    from mastwatch.service import GC_THRESHOLDS, Service

    if server_cpu is not None:
        os.sched_setaffinity(0, {server_cpu})
    store = tempfile.mkdtemp(prefix="mastwatch-bench-")
    if mode == "decode-only":
        gc.set_threshold(*GC_THRESHOLDS)  # as the server sets them: garbage collection costs both the same
        sink = _DecodeOnly()
        counters = type("C", (), {"spans_received": lambda *a: None, "spans_rejected": lambda *a: None,
                                  "request_rejected": lambda *a: None})()
        receiver = GrpcReceiver(GrpcConfig(endpoint="127.0.0.1:0", workers=WORKERS), sink, counters)
        receiver.start()
        port, done = receiver.port, lambda: sink.spans >= total
        stop, written = receiver.stop, lambda: True
    else:
        # the run ends when the last trace is classified (a short quiet time keeps the wait for it, latency, not
        # work, out of the throughput: 200 ms of it was a seventh of a 200,000-span run) and the store has written
        # every row (its writer's and chDB's work is counted whole, not only what fell before the last trace)
        processor: dict = dict(SERVER_PROCESSOR)
        if queue_spans is not None:
            processor["queue_spans"] = queue_spans
        if detectors is not None:
            processor["detectors"] = {code: {"enabled": code in detectors} for code in load_detectors()}
        exporters: dict = {"prometheus": {"endpoint": "127.0.0.1:0"},
                           "store": {"path": store, "enabled": mode == "end-to-end"}}
        if webhook is not None:
            exporters["webhooks"] = [{"url": webhook, "modes": ["*"], "queue_size": 100_000}]
        config = load(None, merge({"receiver": {"grpc": {"endpoint": "127.0.0.1:0", "workers": WORKERS},
                                                "http": {"enabled": False}},
                                   "processor": processor, "exporters": exporters}, settings or {}),
                      environ={})
        service = Service(config)
        service.start()
        port = service.grpc.port
        metrics = service.prometheus

        def done() -> bool:
            return metrics.series.traces.get("sre-agents", "sre-bot") * 10 >= total

        stop = service.stop
        written = service.store.flush if service.store is not None else (lambda: True)
    ctx = mp.get_context("spawn")
    ready, refused = ctx.Event(), ctx.Value("i", 0)
    client = ctx.Process(target=_client, args=(f"127.0.0.1:{port}", bodies, client_cpu, concurrency, ready,
                                               refused))
    collecting = [0.0, 0.0]  # seconds in collections; when the current one started

    def timed(phase: str, info: dict) -> None:
        if phase == "start":
            collecting[1] = time.perf_counter()
        else:
            collecting[0] += time.perf_counter() - collecting[1]

    client.start()
    ready.wait()
    gc.callbacks.append(timed)
    started, cpu_started, threads, faults = time.perf_counter(), time.process_time(), _thread_cpu(), _minor_faults()
    while not done():
        time.sleep(0.01)
    if not written():
        raise RuntimeError("the store did not write every row")
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    faults = _minor_faults() - faults
    by_thread = _thread_cpu()
    by_thread.subtract(threads)
    gc.callbacks.remove(timed)
    client.join()
    stop()
    shutil.rmtree(store, ignore_errors=True)
    return (total / elapsed, total / cpu, collecting[0] / cpu,
            {name: seconds / total * 1e6 for name, seconds in by_thread.most_common() if seconds > 0}, refused.value,
            faults / total)


def _serve(out, *args) -> None:
    out.put(run(*args))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=500, help="spans per OTLP request")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    parser.add_argument("--rounds", type=int, default=3, help="turns of the three modes; the best of each counts")
    parser.add_argument("--detectors", help="the failure modes whose detectors run, comma-separated (FM-1.3); "
                                            "default: those enabled by default")
    parser.add_argument("--queue-spans", type=int, help="the server's queue in spans (processor.queue_spans; "
                        "default 200,000, all of the client's burst): a smaller one overloads it, and it refuses "
                        "requests until the client's retries fit")
    parser.add_argument("--decode-repeat", type=int, default=3, help="times the decode-only receiver is sent the "
                        "requests (it decodes them about three times as fast: its run lasts about as long as the "
                        "others')")
    parser.add_argument("--content", action="store_true", help="tool results captured (20 kB each)")
    parser.add_argument("--minimal", action="store_true", help="spans with only the attributes mastwatch reads "
                        "(default: also those GenAI instrumentations record besides, see traffic.py)")
    parser.add_argument("--stop-signal", action="store_true", help="a webhook told of every finding as it comes")
    parser.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="a server setting, as mastwatch serve --set (repeatable)")
    args = parser.parse_args()
    from mastwatch.config import set_overrides

    settings = set_overrides(args.set)
    detectors = args.detectors.split(",") if args.detectors else None
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, client_cpu = (cpus[0], cpus[1]) if len(cpus) > 1 else (None, None)
    bodies = requests(args.spans, args.batch, content=args.content, semconv=not args.minimal)
    total = sum(1 for _ in range(0, args.spans, 10)) * 10
    print(f"{total} spans in {len(bodies)} requests of ~{args.batch} spans (decode-only: {args.decode_repeat} times "
          f"over); server on CPU {server_cpu}, "
          f"client on CPU {client_cpu}; detectors: {args.detectors or 'the defaults'}; content "
          f"{'on' if args.content else 'off'}; attributes: {'minimal' if args.minimal else 'as instrumentations send'}"
          f"{'; findings told to a webhook' if args.stop_signal else ''}"
          f"{'; settings ' + ' '.join(args.set) if args.set else ''}")
    modes = ("decode-only", "end-to-end", "no-store")
    results = dict.fromkeys(modes, (0.0, 0.0))
    rounds: list[dict[str, float]] = []  # server-CPU spans/s of each mode, round by round
    collecting = dict.fromkeys(modes, 0.0)  # of the best round by server CPU
    ctx = mp.get_context("spawn")
    webhook, sink_stop = None, ctx.Event()
    if args.stop_signal:
        sink_port = ctx.Value("i", 0)
        sink = ctx.Process(target=_webhook_sink, args=(client_cpu, sink_port, sink_stop), daemon=True)
        sink.start()
        while not sink_port.value:
            time.sleep(0.01)
        webhook = f"http://127.0.0.1:{sink_port.value}/hook"
    for round_ in range(1, args.rounds + 1):
        rounds.append({})
        for mode in modes:
            out = ctx.Queue()  # a fresh server process per mode: nothing warm is shared
            repeat = args.decode_repeat if mode == "decode-only" else 1
            server = ctx.Process(target=_serve, args=(out, mode, bodies * repeat, total * repeat, server_cpu,
                                                      client_cpu, args.concurrency, detectors, args.queue_spans,
                                                      webhook, settings))
            server.start()
            wall, cpu, gc_share, by_thread, refused, faults = out.get()
            server.join()
            if cpu > results[mode][1]:
                collecting[mode] = gc_share
            results[mode] = (max(results[mode][0], wall), max(results[mode][1], cpu))
            rounds[-1][mode] = cpu
            print(f"round {round_} {mode:>12}: {wall:>10,.0f} spans/s   {cpu:>10,.0f} spans per server CPU second"
                  f"   {total * repeat / wall:.1f} s"
                  f"   {gc_share:.1%} of it collecting garbage" + (f"   {refused} requests refused" if refused else ""))
            print(" " * 22 + "CPU µs per span by thread: " + ", ".join(
                f"{name} {us:.2f}" for name, us in by_thread.items() if us >= 0.05)
                + f"; page faults per span {faults:.3f}")
    print(f"best of {args.rounds} rounds:")
    for mode in modes:
        wall, cpu = results[mode]
        print(f"{mode:>12}: {wall:>10,.0f} spans/s   {cpu:>10,.0f} spans per server CPU second   "
              f"{collecting[mode]:.1%} of it collecting garbage")
    for mode, what in (("end-to-end", "end-to-end / decode-only"), ("no-store", "the same without the chDB store")):
        in_round = sorted(r[mode] / r["decode-only"] for r in rounds)
        print(f"{mode:>12}: ratio {results[mode][0] / results['decode-only'][0]:.2f} by wall clock, "
              f"{results[mode][1] / results['decode-only'][1]:.2f} by server CPU ({what}); by server CPU within "
              f"each round: median {statistics.median(in_round):.2f}, {', '.join(f'{r:.2f}' for r in in_round)}")
    sink_stop.set()


if __name__ == "__main__":
    main()
