"""Many idle or slow connections, under the common open-file limit, do not stop well-behaved clients, and are closed
after the idle timeout (a real server process, real sockets)."""

from __future__ import annotations

import contextlib
import resource
import socket
import subprocess
import time
from pathlib import Path

import grpc
import pytest

from tests.conftest import free_port
from tests.test_lifecycle import MASTWATCH, _wait_http
from tests.test_receiver import grpc_export, post, request_of

OPEN_FILES = 1024
IDLE = 2000  # connections opened and left idle or half-sent, half on each port


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed the connection (an answer such as 408 before the close is read past)."""
    try:
        while sock.recv(65536, socket.MSG_DONTWAIT):
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset


def test_idle_and_slow_connections_do_not_stop_other_clients(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < IDLE + 500:
        pytest.skip(f"this test opens {IDLE} sockets: the open-file limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, IDLE + 1000)), hard))
    grpc_port, http_port, metrics_port = free_port(), free_port(), free_port()
    proc = subprocess.Popen([*MASTWATCH, "serve", "--grpc-endpoint", f"127.0.0.1:{grpc_port}",
                             "--http-endpoint", f"127.0.0.1:{http_port}",
                             "--metrics-endpoint", f"127.0.0.1:{metrics_port}", "--store-path", str(tmp_path / "s"),
                             "--set", "receiver.http.idle_timeout=2s", "--set", "receiver.http.read_timeout=2s",
                             "--set", "receiver.grpc.handshake_timeout=2s",
                             "--set", "receiver.grpc.max_connection_idle=2s",
                             "--set", "processor.decision_wait=100ms"],
                            stderr=subprocess.PIPE, text=True, preexec_fn=_limit_open_files)
    idle: list[socket.socket] = []
    try:
        _wait_http(f"http://127.0.0.1:{metrics_port}/metrics")
        for i in range(IDLE):
            port = http_port if i % 2 else grpc_port
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                continue  # the listen backlog is full: that client is not served either
            if i % 4 == 1:
                sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")  # headers never end
            elif i % 4 == 3:
                sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                             b"Content-Length: 100\r\n\r\nabc")  # a body that never comes
            idle.append(sock)
        assert len(idle) >= IDLE * 0.9

        started = time.monotonic()
        status = None
        while status != 200 and time.monotonic() - started < 15:
            with contextlib.suppress(OSError):
                status = post(f"http://127.0.0.1:{http_port}/v1/traces",
                              request_of(2, trace=7001).SerializeToString())[0]
        assert status == 200, proc.stderr.read(3000) if proc.poll() is not None else "server running"
        served = None
        while served is None and time.monotonic() - started < 15:
            with contextlib.suppress(grpc.RpcError):
                served = grpc_export(f"127.0.0.1:{grpc_port}", request_of(2, trace=7002).SerializeToString())
        assert served is not None

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(_closed_by_server(s) for s in idle):
            time.sleep(0.5)
        open_ = sum(not _closed_by_server(s) for s in idle)
        assert open_ == 0, f"{open_} of {len(idle)} idle connections still open"
        metrics = _wait_http(f"http://127.0.0.1:{metrics_port}/metrics")
        assert 'mastwatch_spans_received_total{protocol="http"} 2.0' in metrics
        assert 'mastwatch_spans_received_total{protocol="grpc"} 2.0' in metrics
        assert proc.poll() is None
    finally:
        for sock in idle:
            sock.close()
        proc.terminate()
        _, stderr = proc.communicate(timeout=60)
    assert "Traceback" not in stderr, stderr[-3000:]
