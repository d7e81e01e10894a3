"""A running mastwatch server on loopback (ephemeral ports, a chDB store in a temporary directory)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mastwatch.config import Config, load
from mastwatch.service import Service

PROMETHEUS_PACKAGE = "Debian's prometheus package (apt-get install prometheus; .ci/run installs it)"


def installed(name: str, package: str = PROMETHEUS_PACKAGE) -> str:
    """The path of a program a test runs. Where it is missing the test is skipped with one line saying what to
    install, or fails for the programs MASTWATCH_TEST_REQUIRE lists (comma-separated: CI, which installs them)."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not found: install {package}"
    if name in os.environ.get("MASTWATCH_TEST_REQUIRE", "").split(","):
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def prometheus_process(tmp: Path, config: dict[str, Any]) -> Iterator[str]:
    """A real Prometheus (Debian's `prometheus`) running `config` on a free loopback port, its data and its log
    (`prometheus.log`) in `tmp`: its URL. Stopped on leaving."""
    binary = installed("prometheus")
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    web = f"127.0.0.1:{free_port()}"
    with (tmp / "prometheus.log").open("w") as log:
        proc = subprocess.Popen([binary, f"--config.file={tmp / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address={web}"],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            yield f"http://{web}"
        finally:
            proc.terminate()
            proc.wait(30)


class RunningServer:
    def __init__(self, service: Service) -> None:
        self.service = service
        self.grpc_endpoint = f"127.0.0.1:{service.grpc.port}"
        self.http_url = f"http://127.0.0.1:{service.http.port}/v1/traces"
        host, port = service.metrics_address
        self.metrics_url = f"http://{host}:{port}/metrics"

    def metrics(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as r:
            return r.read().decode()

    def sample(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels` (0 when none)."""
        total = 0.0
        for line in self.metrics().splitlines():
            m = re.match(r"^([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$", line)
            if not m or m.group(1) != name:
                continue
            found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            if all(found.get(k) == v for k, v in labels.items()):
                total += float(m.group(4))
        return total

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"not reached within {timeout}s")

    def rows(self, sql: str) -> list[dict[str, Any]]:
        self.service.store.flush()
        return self.service.store.query(sql.format(db=self.service.config.exporters.store.database))

    @property
    def endpoint(self) -> str:
        """The metrics port's host:port."""
        return self.metrics_url.removeprefix("http://").removesuffix("/metrics")

    def cli(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """`mastwatch ARGS` on this server's store, beside it (so through it), run in `cwd`."""
        return subprocess.run([sys.executable, "-m", "mastwatch.cli", *args, "--store-path",
                               self.service.config.exporters.store.path, "--set",
                               f"exporters.prometheus.endpoint={self.endpoint}"], capture_output=True, text=True,
                              timeout=120, cwd=cwd)


def server_config(tmp_path, **overrides: Any) -> Config:
    base = {"receiver": {"grpc": {"endpoint": "127.0.0.1:0"}, "http": {"endpoint": "127.0.0.1:0"}},
            "processor": {"decision_wait": "300ms", "tick": "50ms"},
            "exporters": {"prometheus": {"endpoint": "127.0.0.1:0"},
                          "store": {"path": str(tmp_path / "store"), "flush_interval": "100ms"}}}
    for path, value in overrides.items():
        node = base
        keys = path.split("__")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return load(None, base, environ={})


@pytest.fixture
def start_server(tmp_path) -> Iterator[Callable[..., RunningServer]]:
    """start_server(processor__decision_wait="1s", ...) -> a running server, stopped after the test."""
    started: list[Service] = []

    def start(**overrides: Any) -> RunningServer:
        service = Service(server_config(tmp_path, **overrides))
        service.start()
        started.append(service)
        return RunningServer(service)

    yield start
    for service in started:
        service.stop()


@pytest.fixture
def server(start_server) -> RunningServer:
    return start_server()


@pytest.fixture
def store(tmp_path) -> Iterator[Any]:
    """A chDB store holding `tests.test_store_queries.fill`'s verdicts (one per process at a time: a test that runs
    the CLI on a store of its own closes this first)."""
    from mastwatch.exporter.store import StoreConfig, StoreExporter
    from tests.test_store_queries import fill

    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    fill(store)
    yield store
    store.shutdown()


@pytest.fixture
def chat_server() -> Iterator[Any]:
    """A local OpenAI-compatible chat endpoint answering from a script (tests/chat_server.py)."""
    from tests.chat_server import ChatServer

    server = ChatServer()
    yield server
    server.close()
