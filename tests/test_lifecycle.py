"""Trace assembly limits, late spans, label caps, graceful shutdown, and the replay and demo commands."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from mastwatch.demo import BEHAVIOURS, FLEET, SimulatedAgent
from mastwatch.exporter.store.chdb_engine import ChdbEngine
from tests.conftest import free_port
from tests.otlp_corpus import corpus, to_otlp_json_line
from tests.scenarios import scenarios
from tests.sdk_agents import agent_run, chat, provider, step, tool
from tests.test_receiver import post, request_of

MASTWATCH = [sys.executable, "-m", "mastwatch.cli"]


def test_late_spans_are_counted_and_do_not_reclassify(server) -> None:
    assert post(server.http_url, request_of(2, trace=60).SerializeToString())[0] == 200
    server.wait_for(lambda: server.sample("mast_traces_total") == 1)
    late = request_of(3, trace=60)
    del late.resource_spans[0].scope_spans[0].spans[:2]
    assert post(server.http_url, late.SerializeToString())[0] == 200
    server.wait_for(lambda: server.sample("mastwatch_late_spans_total") == 1)
    time.sleep(0.5)
    assert server.sample("mast_traces_total") == 1


def test_oldest_trace_is_evicted_and_classified_when_too_many_are_in_flight(start_server) -> None:
    server = start_server(processor__max_traces=2, processor__decision_wait="60s")
    for trace in (70, 71, 72):  # no root ended: none of them is complete
        assert post(server.http_url, request_of(2, trace=trace, root=False).SerializeToString())[0] == 200
    server.wait_for(lambda: server.sample("mastwatch_traces_evicted_total") == 1)
    assert server.sample("mast_traces_total") == 1
    server.wait_for(lambda: server.sample("mastwatch_traces_in_flight") == 2)
    rows = server.rows("SELECT trace_id, completion FROM {db}.mast_traces")
    assert rows == [{"trace_id": (70).to_bytes(16, "big").hex(), "completion": "evicted"}]


def test_oldest_traces_are_evicted_to_stay_within_the_buffered_span_limit(start_server) -> None:
    """Memory stays bounded whatever the traces' sizes: a span that would make `max_buffered_spans` spans in flight
    first gets the oldest traces classified (evicted); when that is its own trace, it comes late."""
    server = start_server(processor__max_buffered_spans=4, processor__decision_wait="60s")
    for trace, spans in ((90, 3), (91, 2), (92, 6)):  # no root ended: none of them is complete
        assert post(server.http_url, request_of(spans, trace=trace, root=False).SerializeToString())[0] == 200
    server.wait_for(lambda: server.sample("mastwatch_traces_evicted_total") == 3)
    server.wait_for(lambda: server.sample("mastwatch_late_spans_total") == 2)  # the 5th and 6th span of trace 92
    assert server.sample("mastwatch_traces_in_flight") == 0 and server.sample("mast_traces_total") == 3
    rows = server.rows("SELECT trace_id, steps, completion FROM {db}.mast_traces ORDER BY trace_id")
    assert [(int(r["trace_id"], 16), r["steps"], r["completion"]) for r in rows] == [
        (90, 3, "evicted"), (91, 2, "evicted"), (92, 4, "evicted")]


def test_span_limit_and_age_limit_release_traces(start_server) -> None:
    server = start_server(processor__max_spans_per_trace=5, processor__max_trace_age="1s",
                          processor__decision_wait="60s")
    assert post(server.http_url, request_of(7, trace=80, root=False).SerializeToString())[0] == 200
    assert post(server.http_url, request_of(2, trace=81, root=False).SerializeToString())[0] == 200
    server.wait_for(lambda: server.sample("mast_traces_total") == 2)
    rows = server.rows("SELECT trace_id, steps, completion FROM {db}.mast_traces ORDER BY trace_id")
    assert [(r["steps"], r["completion"]) for r in rows] == [(5, "max_spans"), (2, "max_age")]
    assert server.sample("mastwatch_late_spans_total") == 2  # the two spans after the limit


def test_span_derived_labels_are_capped(start_server) -> None:
    server = start_server(exporters__prometheus__max_label_values=2)
    tp = provider("http", server.http_url)
    tracer = tp.get_tracer("test")
    for agent in ("a1", "a2", "a3", "a4"):
        with agent_run(tracer, agent):
            chat(tracer, text="hello there, all done with this one", agent=agent)
    server.wait_for(lambda: server.sample("mast_traces_total") == 4)
    assert server.sample("mast_traces_total", agent="other") == 2
    assert server.sample("mastwatch_label_overflow_total", label="agent") >= 2  # counts replacements
    assert {r["agent"] for r in server.rows("SELECT agent FROM {db}.mast_traces")} == {"a1", "a2", "a3", "a4"}
    tp.shutdown()


def _query_store(path: Path, sql: str) -> list[dict]:
    """Read a store a finished mastwatch process left behind."""
    engine = ChdbEngine(str(path))
    try:
        return engine.query(sql)
    finally:
        engine.close()


def _wait_http(url: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@dataclass
class _Serve:
    """`mastwatch serve` on free loopback ports, its store in a directory."""

    command: list[str]
    grpc: str  # host:port
    url: str  # OTLP/HTTP traces URL
    metrics: str  # /metrics URL


def _serve(store: Path, *settings: str) -> _Serve:
    grpc, http, metrics = (f"127.0.0.1:{free_port()}" for _ in range(3))
    command = [*MASTWATCH, "serve", "--grpc-endpoint", grpc, "--http-endpoint", http, "--metrics-endpoint", metrics,
               "--store-path", str(store)]
    for setting in settings:
        command += ["--set", setting]
    return _Serve(command, grpc, f"http://{http}/v1/traces", f"http://{metrics}/metrics")


def _stopped(proc: subprocess.Popen) -> str:
    """SIGTERM, as an orchestrator stops it; what it logged (killed if it does not stop)."""
    try:
        proc.send_signal(signal.SIGTERM)
        return proc.communicate(timeout=60)[1]
    finally:
        proc.kill()


def _wait_metrics(metrics: str, text: str, timeout: float = 15.0) -> None:
    """Until the metrics page shows `text` (a sample line)."""
    deadline = time.monotonic() + timeout
    while text not in _wait_http(metrics):
        assert time.monotonic() < deadline, text
        time.sleep(0.1)


def test_sigterm_classifies_buffered_traces_and_flushes_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = _serve(store, "processor.decision_wait=10m")
    proc = subprocess.Popen(server.command, stderr=subprocess.PIPE, text=True)
    try:
        _wait_http(server.metrics)
        tp = provider("grpc", server.grpc)
        tracer = tp.get_tracer("test")
        with agent_run(tracer):
            for _ in range(3):
                step(tracer, "get_deployment", {"name": "api"})
            chat(tracer, text="The api deployment is healthy.")
        with agent_run(tracer, "other-bot"):
            tool(tracer, "ping", {})
        tp.shutdown()
        _wait_metrics(server.metrics, "mastwatch_spans_buffered 10.0", timeout=10)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "classifying buffered traces" in stderr
    rows = _query_store(store, "SELECT agent, completion, failure_modes FROM mastwatch.mast_traces ORDER BY agent")
    assert rows == [{"agent": "other-bot", "completion": "shutdown", "failure_modes": []},
                    {"agent": "sre-bot", "completion": "shutdown", "failure_modes": ["FM-1.3"]}]


VERDICT_KEYS = {"trace_id": str, "service": str, "agent": str, "models": list, "started_at": str, "ended_at": str,
                "steps": int, "llm_calls": int, "tool_calls": int, "input_tokens": int, "output_tokens": int,
                "cost_usd": float, "failure_modes": dict, "repeated_steps": int, "wasted_input_tokens": int,
                "wasted_output_tokens": int, "wasted_cost_usd": float, "wasted_seconds": float, "not_assessed": list}


def test_replay_of_the_recorded_runs_prints_one_verdict_per_trace(tmp_path: Path) -> None:
    runs = corpus()
    lines = tmp_path / "traces.jsonl"
    lines.write_text("".join(to_otlp_json_line(request) + "\n" for _, _, request in runs))
    proto = tmp_path / "traces.binpb"  # the file exporter's proto format: 4-byte big-endian length, message
    proto.write_bytes(b"".join(struct.pack(">I", len(b)) + b for b in
                               (request.SerializeToString() for _, _, request in runs)))
    trace_ids = {span.trace_id.hex() for _, _, request in runs for rs in request.resource_spans
                 for ss in rs.scope_spans for span in ss.spans}
    outputs = []
    for path in (lines, proto):
        result = subprocess.run([*MASTWATCH, "replay", str(path)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        verdicts = [json.loads(line) for line in result.stdout.splitlines()]
        assert {v["trace_id"] for v in verdicts} == trace_ids and len(verdicts) == len(trace_ids)
        for v in verdicts:
            assert {k: type(v[k]) for k in VERDICT_KEYS} == VERDICT_KEYS
            assert len(v["trace_id"]) == 32 and v["started_at"].endswith("Z")
            for mode in v["failure_modes"].values():
                assert mode["evidence"] and all(len(e) == 16 for e in mode["evidence"])
                assert mode["basis"] in ("structure", "content", "judge")
        outputs.append(sorted(result.stdout.splitlines()))
    assert outputs[0] == outputs[1]
    by_agent = {}
    for v in map(json.loads, outputs[0]):
        by_agent.setdefault(v["agent"], []).append(v)
    # the SWE-agent CTF run that submits the same wrong flag again and again
    looping = [v for v in by_agent["swe-agent"] if "FM-1.3" in v["failure_modes"]]
    assert len(looping) == 1 and "submit" in looping[0]["failure_modes"]["FM-1.3"]["reason"]
    tau2 = [v for v in map(json.loads, outputs[0]) if v["service"].startswith("tau2")]
    assert len(tau2) == 18 and all(v["cost_usd"] > 0 and v["models"] == ["gpt-4.1-mini-2025-04-14"] for v in tau2)


def test_replay_reads_failures_recorded_only_as_exceptions(tmp_path: Path) -> None:
    """A LangGraph run stopped by GraphRecursionError and a run giving up after a write failed with a 503, each
    recorded only as the exception leaving the span (event and ERROR status, no error attribute)."""
    runs = {s.name: s.request for s in scenarios() if s.name in ("d0-langgraph-limit-raised",
                                                                 "d0-gives-up-after-unavailable-raised")}
    lines = tmp_path / "exceptions.jsonl"
    lines.write_text("".join(to_otlp_json_line(request) + "\n" for request in runs.values()))
    proto = tmp_path / "exceptions.binpb"
    proto.write_bytes(b"".join(struct.pack(">I", len(b)) + b for b in (r.SerializeToString() for r in runs.values())))
    for path in (lines, proto):
        result = subprocess.run([*MASTWATCH, "replay", str(path)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        verdicts = {v["trace_id"]: v["failure_modes"] for v in map(json.loads, result.stdout.splitlines())}
        limit, ending = (verdicts[r.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()] for r in runs.values())
        assert set(limit) == {"FM-1.5"} and "(langgraph.errors.GraphRecursionError)" in limit["FM-1.5"]["reason"]
        assert set(ending) == {"FM-3.1"} and "cancel_order failed" in ending["FM-3.1"]["reason"]


def test_replay_store_and_bad_input(tmp_path: Path) -> None:
    _, _, request = corpus()[0]
    path = tmp_path / "one.jsonl"
    path.write_text(to_otlp_json_line(request) + "\n")
    store = tmp_path / "store"
    result = subprocess.run([*MASTWATCH, "replay", str(path), "--store", str(store)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert _query_store(store, "SELECT toUInt8(count()) AS n FROM mastwatch.mast_traces") == [{"n": 1}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}\n')
    result = subprocess.run([*MASTWATCH, "replay", str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "bad.jsonl:1" in result.stderr


def test_demo_fills_metrics_and_store_within_a_minute(tmp_path: Path) -> None:
    grpc_port, http_port, metrics_port = free_port(), free_port(), free_port()
    store = tmp_path / "store"
    env = {**os.environ, "MASTWATCH_PROCESSOR__DECISION_WAIT": "1s"}
    proc = subprocess.Popen([*MASTWATCH, "demo", "--grpc-endpoint", f"127.0.0.1:{grpc_port}", "--http-endpoint",
                             f"127.0.0.1:{http_port}", "--metrics-endpoint", f"127.0.0.1:{metrics_port}",
                             "--store-path", str(store), "--pace", "0.05", "--duration", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        metrics = ""
        while time.monotonic() < deadline:
            metrics = _wait_http(f"http://127.0.0.1:{metrics_port}/metrics")
            if 'failure_mode="FM-1.3"' in metrics and "mast_wasted_cost_usd_total" in metrics and \
                    'service="support"' in metrics:
                break
            time.sleep(0.5)
        assert 'failure_mode="FM-1.3"' in metrics
        for series in ("mast_traces_total", "mast_tokens_total", "mast_cost_usd_total", "mast_repeated_steps_total",
                       "mast_wasted_tokens_total", "mast_wasted_cost_usd_total", "mastwatch_spans_received_total"):
            assert series in metrics
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "simulated agents are sending OTLP" in stdout
    rows = _query_store(store, "SELECT agent, count() AS n FROM mastwatch.mast_traces GROUP BY agent ORDER BY agent")
    assert {r["agent"] for r in rows} == {"coding-agent", "sre-bot", "support-agent", "triage-agent"}


def test_every_demo_behaviour_shows_its_failure_mode(server) -> None:
    """Each simulated behaviour, for every agent of the fleet, shows exactly the mode it stands for."""
    expected = {"healthy": [], "poll": [], "retry": [], "loop": ["FM-1.3"], "cycle": ["FM-1.3"],
                "false_success": ["FM-3.3"], "unchecked": ["FM-3.2"], "turn_limit": ["FM-1.5"],
                "gives_up": ["FM-3.1", "FM-3.2"]}
    assert set(expected) == set(BEHAVIOURS)
    runs = {}
    for i, profile in enumerate(FLEET):
        tp = provider("grpc", server.grpc_endpoint, profile.service)
        agent = SimulatedAgent(profile, tp.get_tracer("demo"), random.Random(i), pace=0)
        for behaviour in BEHAVIOURS:
            runs[agent.run_once(behaviour)[1]] = (profile.agent, behaviour)
        tp.shutdown()
    rows = server.wait_for(lambda: len(found := server.rows("SELECT trace_id, failure_modes FROM {db}.mast_traces"))
                           == len(runs) and found)
    assert {runs[r["trace_id"]]: r["failure_modes"] for r in rows} == {
        (p.agent, b): modes for p in FLEET for b, modes in expected.items()}


def test_ports_in_use_are_one_clear_line(tmp_path: Path) -> None:
    """Every endpoint taken is named at once, before the store is opened; nothing else is printed (no gRPC core
    log line, no chDB shutdown error)."""
    with socket.socket() as http_taken, socket.socket() as metrics_taken:
        for taken in (http_taken, metrics_taken):
            taken.bind(("127.0.0.1", 0))
            taken.listen()
        http, metrics = http_taken.getsockname()[1], metrics_taken.getsockname()[1]
        result = subprocess.run([*MASTWATCH, "serve", "--grpc-endpoint", f"127.0.0.1:{free_port()}",
                                 "--http-endpoint", f"127.0.0.1:{http}", "--metrics-endpoint",
                                 f"127.0.0.1:{metrics}", "--store-path", str(tmp_path / "s")],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"mastwatch: cannot listen for OTLP/HTTP on 127.0.0.1:{http}, metrics on "
                           f"127.0.0.1:{metrics}: address already in use"), line
    assert not (tmp_path / "s").exists()


def test_spans_of_a_trace_classified_before_a_restart_are_late_after_it(tmp_path: Path) -> None:
    """SIGTERM with a trace half sent: the trace is classified at shutdown; the rest of its spans reach the
    restarted process, which knows the trace (classified-traces in the store's directory): late spans, one row."""
    store = tmp_path / "store"
    server = _serve(store, "processor.decision_wait=10m")
    for half in (0, 1):
        proc = subprocess.Popen(server.command, stderr=subprocess.PIPE, text=True)
        try:
            _wait_http(server.metrics)
            assert post(server.url, request_of(3, trace=77, root=False).SerializeToString())[0] == 200
            _wait_metrics(server.metrics, "mastwatch_spans_buffered 3.0" if half == 0 else
                          "mastwatch_late_spans_total 3.0")
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
        assert proc.returncode == 0, stderr
    rows = _query_store(store, "SELECT trace_id, completion FROM mastwatch.mast_traces")
    assert rows == [{"trace_id": (77).to_bytes(16, "big").hex(), "completion": "shutdown"}]


@pytest.mark.parametrize("unstored", [False, True], ids=["alone", "beside-an-unstored-trace"])
def test_a_trace_whose_rows_were_queued_before_a_crash_is_not_classified_again(tmp_path: Path, unstored: bool) -> None:
    """Killed after a trace's rows were queued and before it was remembered as classified, a process leaves the
    trace both in the store and in the journal. The next one asks the store which replayed traces it holds: their
    spans are late, and the trace keeps one row. Built here by restoring the journal and forgetting the classified
    ids after a clean stop, which is the state such a kill leaves. With another trace in the same journal segment
    whose rows never reached the store, that one is classified from the journal: the segment is not dropped as
    done because one of its traces was."""
    store = tmp_path / "store"
    server = _serve(store, "processor.decision_wait=10m")
    traces = [88, 89] if unstored else [88]
    proc = subprocess.Popen(server.command, stderr=subprocess.PIPE, text=True)
    try:
        _wait_http(server.metrics)
        for trace in traces:
            assert post(server.url, request_of(3, trace=trace, root=False).SerializeToString())[0] == 200
        _wait_metrics(server.metrics, f"mastwatch_spans_buffered {3.0 * len(traces)}")
        shutil.copytree(store / "journal", tmp_path / "journal")  # the requests, acknowledged and journaled
    finally:
        stderr = _stopped(proc)  # classified at shutdown: their rows written
    assert proc.returncode == 0, stderr
    if unstored:
        engine = ChdbEngine(str(store))
        try:
            engine.command("ALTER TABLE mastwatch.mast_traces DELETE WHERE trace_id = "
                           f"'{(89).to_bytes(16, 'big').hex()}' SETTINGS mutations_sync = 1")
        finally:
            engine.close()
    shutil.rmtree(store / "journal")
    shutil.copytree(tmp_path / "journal", store / "journal")
    (store / "classified-traces").unlink()
    proc = subprocess.Popen(server.command, stderr=subprocess.PIPE, text=True)
    try:
        _wait_http(server.metrics)  # listening: the journal is replayed
    finally:
        stderr = _stopped(proc)
    assert proc.returncode == 0, stderr
    assert "1 replayed traces have rows already" in stderr
    rows = _query_store(store, "SELECT trace_id, count() AS n FROM mastwatch.mast_traces GROUP BY trace_id "
                               "ORDER BY trace_id")
    assert rows == [{"trace_id": trace.to_bytes(16, "big").hex(), "n": 1} for trace in traces]


@pytest.mark.parametrize("journal", [True, False], ids=["journal", "no-journal"])
def test_killed_under_load_then_restarted_every_acknowledged_trace_is_one_row(tmp_path: Path, journal: bool) -> None:
    """A sender keeps exporting traces (one request each, retried until acknowledged, as an SDK does); the server
    is killed with SIGKILL mid-stream and started again on the same directory, then stopped with SIGTERM. Every
    trace the sender saw acknowledged is exactly one row: the journal replays what the killed process had accepted,
    the classified-trace memory and span ids keep a retried request from counting twice."""
    store = tmp_path / "store"
    server = _serve(store, "processor.decision_wait=300ms", "processor.tick=50ms",
                    f"processor.journal={str(journal).lower()}")
    command, metrics, url = server.command, server.metrics, server.url
    traces = list(range(5000, 5400))
    acknowledged: list[int] = []

    def send(trace: int) -> None:
        body = request_of(3, trace=trace).SerializeToString()
        while True:
            try:
                if post(url, body)[0] == 200:
                    acknowledged.append(trace)
                    return
            except OSError:
                pass
            time.sleep(0.05)

    proc = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    try:
        _wait_http(metrics)
        for trace in traces[:200]:
            send(trace)
        proc.send_signal(signal.SIGKILL)  # some traces acknowledged and not yet classified, in flight
        proc.wait(30)
        proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        for trace in traces[200:]:
            send(trace)
        _wait_http(metrics)
        proc.send_signal(signal.SIGTERM)  # classifies what it holds, the replayed traces among them
        _, stderr = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    rows = _query_store(store, "SELECT trace_id, count() AS n FROM mastwatch.mast_traces GROUP BY trace_id")
    counts = {row["trace_id"]: row["n"] for row in rows}
    want = {t.to_bytes(16, "big").hex() for t in acknowledged}
    assert len(want) == len(traces)
    missing = want - counts.keys()
    doubled = {t for t, n in counts.items() if n > 1}
    if not journal:  # what the journal is for: without it, what the killed process had buffered is lost
        assert missing
        return
    assert not missing and not doubled, (len(missing), len(doubled))
    assert not list((store / "journal").glob("segment-*.log"))  # emptied once every trace was classified
