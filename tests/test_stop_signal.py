"""The stop signal: a looping agent (the real OpenTelemetry SDK exporting to a running mastwatch) asks
`mastwatch.guard` after each step and stops itself; webhooks fire within a second of the span that completes a
loop, signed, retried, and counted."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from mastwatch.config import Config
from mastwatch.guard import Guard, GuardError
from tests.conftest import RunningServer
from tests.sdk_agents import agent_run, provider, step

SECRET = "s3cret"


class Hooks:
    """A webhook endpoint on loopback: records each body with its arrival time and the client's port (one per
    connection); answers `statuses` in turn (then 200). HTTP/1.0 (a connection per request) unless `keep_alive`
    (HTTP/1.1: connections stay open, closed by the endpoint after `idle` seconds without a request)."""

    def __init__(self, statuses: list[int] | None = None, keep_alive: bool = False, idle: float | None = None) -> None:
        self.received: list[tuple[float, dict[str, Any], dict[str, str], bytes]] = []
        self.ports: list[int] = []
        self.statuses = list(statuses or [])
        self.arrived = threading.Event()
        hooks = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
            timeout = idle

            def do_POST(self) -> None:
                hooks.ports.append(self.client_address[1])
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = hooks.statuses.pop(0) if hooks.statuses else 200
                if status == 200:
                    hooks.received.append((time.monotonic(), json.loads(body), dict(self.headers), body))
                    hooks.arrived.set()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hooks() -> Iterator[Hooks]:
    endpoint = Hooks(statuses=[503])  # the first attempt fails: the event is retried
    yield endpoint
    endpoint.close()


@pytest.fixture
def looped(start_server, hooks: Hooks) -> RunningServer:
    return start_server(exporters__webhooks=[{"url": hooks.url, "secret": SECRET, "backoff": "50ms"}])


def test_a_looping_agent_is_stopped_by_the_guard_and_the_webhook_fires_within_a_second(looped, hooks) -> None:
    host, port = looped.service.metrics_address
    guard = Guard(f"http://{host}:{port}")
    tp = provider("grpc", looped.grpc_endpoint, resource={"service.version": "2.3.0",
                                                          "deployment.environment.name": "production"})
    tracer = tp.get_tracer("looping-agent")
    calls, ended = 0, []
    with agent_run(tracer) as root:
        trace_id = root.get_span_context().trace_id
        for _ in range(20):  # the model keeps asking for the same pods
            step(tracer, "kubectl_get_pods", {"namespace": "prod"})
            ended.append(time.monotonic())
            calls += 1
            deadline = time.monotonic() + 1.0  # the step's spans are exported as they end; give mastwatch a moment
            while not (stop := guard.should_stop()) and time.monotonic() < deadline:
                time.sleep(0.01)
            if stop:
                break
    tp.shutdown()
    assert 2 <= calls <= 5, calls  # stopped by the 4th repeat of the first call
    flags = guard.flags(trace_id)
    assert flags.flagged and "FM-1.3" in flags.modes()
    loop = next(f for f in flags.findings if f["failure_mode"] == "FM-1.3")
    assert loop["evidence"] and "kubectl_get_pods" in loop["reason"]
    assert flags.wasted_seconds > 0  # the repeats' time, and their model calls'
    assert guard.should_stop(trace_id, modes=(), max_wasted_seconds=flags.wasted_seconds / 2)
    assert not guard.should_stop(trace_id, modes=(), max_wasted_seconds=3600, max_wasted_usd=100)

    assert hooks.arrived.wait(5)
    arrived, body, headers, raw = hooks.received[0]
    assert arrived - ended[-1] <= 1.0  # the 503 and its retry included
    assert body["event"] == "failure_mode" and body["failure_mode"] == "FM-1.3"
    assert body["trace_id"] == f"{trace_id:032x}" and body["agent"] == "sre-bot" and body["evidence"]
    assert body["wasted_seconds"] > 0
    assert (body["version"], body["environment"]) == ("2.3.0", "production")  # from the SDK's resource
    expected = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    assert headers["X-Mastwatch-Signature"] == expected
    looped.wait_for(lambda: looped.sample("mastwatch_webhook_deliveries_total", outcome="delivered") == 1)
    assert looped.sample("mastwatch_webhook_retries_total") == 1
    looped.wait_for(lambda: looped.sample("mast_traces_total") == 1)
    looped.service.webhooks.shutdown()  # what the verdict at the run's end added is sent
    sent = [b["failure_mode"] for _, b, _, _ in hooks.received]
    assert sent.count("FM-1.3") == 1  # a mode is sent once per run, however often its finding grows


def test_a_healthy_run_is_not_flagged_and_bad_ids_are_refused(server) -> None:
    host, port = server.service.metrics_address
    guard = Guard(f"http://{host}:{port}")
    tp = provider("http", server.http_url)
    tracer = tp.get_tracer("healthy-agent")
    with agent_run(tracer) as root:
        trace_id = root.get_span_context().trace_id
        step(tracer, "kubectl_get_pods", {"namespace": "prod"})
        step(tracer, "kubectl_logs", {"pod": "api-1"})
        assert not guard.should_stop()
    tp.shutdown()
    assert not guard.flags(trace_id).flagged
    with pytest.raises(GuardError, match="HTTP 400"):
        guard.flags("not-a-trace-id")
    with pytest.raises(GuardError, match="no current span"):
        guard.flags()


def test_the_findings_endpoint_asks_for_the_metrics_token(start_server, tmp_path) -> None:
    running = start_server(exporters__prometheus__auth={"token": "t0ken"})
    host, port = running.service.metrics_address
    with pytest.raises(GuardError, match="HTTP 401"):
        Guard(f"http://{host}:{port}").flags("0" * 31 + "1")
    assert not Guard(f"http://{host}:{port}", token="t0ken").flags("0" * 31 + "1").flagged
    with urllib.request.urlopen(f"http://{host}:{port}/runbooks", timeout=5) as r:  # the runbooks need none
        assert r.status == 200


def test_a_spend_threshold_fires_once_per_run(start_server) -> None:
    endpoint, timed = Hooks(), Hooks()
    try:
        running = start_server(exporters__webhooks=[{"url": endpoint.url, "modes": [], "wasted_cost_usd": 0.0001},
                                                    {"url": timed.url, "modes": [], "wasted_seconds": 1e-6}])
        tp = provider("grpc", running.grpc_endpoint)
        tracer = tp.get_tracer("spender")
        with agent_run(tracer):
            for _ in range(6):
                step(tracer, "kubectl_get_pods", {"namespace": "prod"}, input_tokens=20_000)
        tp.shutdown()
        assert endpoint.arrived.wait(5)
        running.wait_for(lambda: running.sample("mast_traces_total") == 1)
        events = [b for _, b, _, _ in endpoint.received]
        assert [b["event"] for b in events] == ["wasted_cost"]
        assert events[0]["wasted_cost_usd"] >= 0.0001 and events[0]["threshold_usd"] == 0.0001
        assert timed.arrived.wait(5)
        running.service.webhooks.shutdown()  # whatever is queued is sent
        events = [b for _, b, _, _ in timed.received]
        assert [b["event"] for b in events] == ["wasted_time"]  # once, though the time kept growing
        assert events[0]["wasted_seconds"] >= 1e-6 and events[0]["threshold_seconds"] == 1e-6
        assert "threshold_usd" not in events[0] and "failure_mode" not in events[0]
    finally:
        endpoint.close()
        timed.close()


def _loops(running: RunningServer, runs: int, pause: float = 0.0) -> None:
    """`runs` agent runs that each call one tool 4 times alike (FM-1.3), sent as they end."""
    tp = provider("grpc", running.grpc_endpoint)
    tracer = tp.get_tracer("loops")
    for _ in range(runs):
        with agent_run(tracer):
            for _ in range(4):
                step(tracer, "kubectl_get_pods", {"namespace": "prod"})
        tp.force_flush()
        time.sleep(pause)
    tp.shutdown()


def test_events_share_one_kept_connection(start_server) -> None:
    endpoint = Hooks(keep_alive=True)
    try:
        running = start_server(exporters__webhooks=[{"url": endpoint.url, "modes": ["FM-1.3"]}])
        _loops(running, 3)
        running.wait_for(lambda: running.sample("mast_traces_total") == 3)
        running.wait_for(lambda: len(endpoint.received) == 3)
        assert len(set(endpoint.ports)) == 1  # one connection for the three events
    finally:
        endpoint.close()


def test_a_connection_the_endpoint_closed_while_idle_is_opened_again_without_a_retry(start_server) -> None:
    endpoint = Hooks(keep_alive=True, idle=0.2)
    try:
        running = start_server(exporters__webhooks=[{"url": endpoint.url, "modes": ["FM-1.3"], "backoff": "5s"}])
        _loops(running, 2, pause=1.0)  # the endpoint closes the first event's connection before the second
        running.wait_for(lambda: running.sample("mast_traces_total") == 2)
        running.wait_for(lambda: len(endpoint.received) == 2)
        assert len(set(endpoint.ports)) == 2
        assert running.sample("mastwatch_webhook_retries_total") in (None, 0)
        assert running.sample("mastwatch_webhook_deliveries_total", outcome="delivered") == 2
    finally:
        endpoint.close()


def test_a_full_queue_drops_and_counts_without_holding_the_pipeline(start_server) -> None:
    running = start_server(exporters__webhooks=[{"url": "http://127.0.0.1:9/unreachable", "queue_size": 1,
                                                 "max_attempts": 3, "backoff": "1s", "modes": ["*"]}])
    tp = provider("grpc", running.grpc_endpoint)
    tracer = tp.get_tracer("many-loops")
    for _ in range(5):
        with agent_run(tracer):
            for _ in range(4):
                step(tracer, "kubectl_get_pods", {"namespace": "prod"})
    tp.shutdown()
    running.wait_for(lambda: running.sample("mast_traces_total") == 5)  # classified while the endpoint is down
    running.wait_for(lambda: running.sample("mastwatch_webhook_deliveries_total", outcome="dropped") >= 1)


@pytest.mark.parametrize("hook", [{"url": "ftp://x"}, {"url": "http://x", "modes": ["FM-9.9"]},
                                  {"url": "http://x", "secret": "a", "secret_file": "/k"}])
def test_bad_webhook_settings_are_refused(hook: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Config.model_validate({"exporters": {"webhooks": [hook]}})


def test_the_guarded_loop_example_stops_itself(server) -> None:
    host, port = server.service.metrics_address
    example = Path(__file__).parent.parent / "examples" / "guarded_loop.py"
    result = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "OTLP_ENDPOINT": server.grpc_endpoint,
                                 "MASTWATCH_URL": f"http://{host}:{port}"})
    assert result.returncode == 0, result.stderr
    assert "stopped, mastwatch says ['FM-1.3']" in result.stdout and "step 20" not in result.stdout


def test_a_proxy_in_the_environment_is_used_for_the_endpoints_it_covers(monkeypatch) -> None:
    from mastwatch.exporter.webhook import _proxied

    monkeypatch.setenv("http_proxy", "http://proxy.internal:3128")
    monkeypatch.setenv("no_proxy", "hooks.internal")
    assert _proxied("http://agents.example.com/hook")
    assert not _proxied("http://hooks.internal/hook")
    assert not _proxied("https://agents.example.com/hook")  # no https_proxy
