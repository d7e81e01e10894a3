"""The running server, fed by the OpenTelemetry SDK's real OTLP exporters (gRPC and HTTP)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from pathlib import Path

import pytest
from opentelemetry.trace import Status, StatusCode

from tests.conftest import installed
from tests.sdk_agents import agent_run, chat, provider, step, tool


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_loop_shows_in_metrics_before_the_run_ends(server, protocol: str) -> None:
    endpoint = server.grpc_endpoint if protocol == "grpc" else server.http_url
    tp = provider(protocol, endpoint)
    tracer = tp.get_tracer("test")
    fm13 = {"failure_mode": "FM-1.3", "agent": "sre-bot", "service": "test-agents"}
    with agent_run(tracer) as root:
        for _ in range(4):
            step(tracer, "kubectl_get_pods", {"namespace": "prod", "selector": "app=api"})
        # the run is still going: its root span has not ended
        server.wait_for(lambda: server.sample("mast_failure_mode_traces_total", **fm13) == 1)
        assert root.is_recording()
        assert server.sample("mast_traces_total") == 0
        assert server.sample("mast_failing_traces_total") == 0  # counted with the trace, when classified
        assert server.sample("mast_repeated_steps_total", tool="kubectl_get_pods") == 3
        chat(tracer, text="The api pods are all running.")  # the run answers, then ends
    server.wait_for(lambda: server.sample("mast_traces_total", agent="sre-bot") == 1)
    assert server.sample("mast_failure_mode_traces_total", **fm13) == 1  # once per trace, not again at the end
    assert server.sample("mast_failing_traces_total", agent="sre-bot", service="test-agents") == 1
    assert server.sample("mast_repeated_steps_total", tool="kubectl_get_pods") == 3
    assert server.sample("mast_wasted_tokens_total", model="gpt-4.1-mini", type="input") == 3000
    assert server.sample("mast_wasted_tokens_total", model="gpt-4.1-mini", type="output") == 150
    assert server.sample("mast_wasted_cost_usd_total", model="gpt-4.1-mini") == pytest.approx(
        3 * (1000 * 0.4 + 50 * 1.6) / 1e6)
    assert server.sample("mastwatch_spans_received_total", protocol=protocol) == 10
    rows = server.rows("SELECT trace_id, agent, failure_modes, repeated_steps FROM {db}.mast_traces")
    assert len(rows) == 1 and rows[0]["failure_modes"] == ["FM-1.3"] and rows[0]["repeated_steps"] == 3
    assert rows[0]["trace_id"] == format(root.get_span_context().trace_id, "032x")
    findings = server.rows("SELECT failure_mode, evidence, reason FROM {db}.mast_findings")
    assert len(findings) == 1 and len(findings[0]["evidence"]) == 4
    assert "kubectl_get_pods called 4 times" in findings[0]["reason"]
    # time: the three repeated calls' own and that of the model calls that asked for them (the 2nd to 4th)
    steps = server.rows("SELECT toString(dateDiff('nanosecond', started_at, ended_at)) AS ns FROM {db}.mast_steps "
                        "WHERE kind IN ('llm', 'tool') ORDER BY started_at")
    assert len(steps) == 9  # four model calls, each with its tool call, and the answer
    wasted = sum(int(s["ns"]) for s in steps[2:8]) / 1e9
    assert wasted > 0 and server.sample("mast_wasted_seconds_total", tool="kubectl_get_pods") == pytest.approx(wasted)
    (stored,) = server.rows("SELECT wasted_seconds FROM {db}.mast_traces")
    assert stored["wasted_seconds"] == pytest.approx(wasted)
    tp.shutdown()


def test_healthy_runs_count_tokens_and_cost(server) -> None:
    tp = provider("http", server.http_url, service="support")
    tracer = tp.get_tracer("test")
    for order in (1, 2):
        with agent_run(tracer, "support-agent"):
            step(tracer, "lookup_order", {"id": order}, agent="support-agent", input_tokens=2000, cache_read=500)
            tool(tracer, "get_shipping_status", {"id": order}, error=True, agent=None)
            tool(tracer, "get_shipping_status", {"id": order}, agent=None)  # a retry after an error
            chat(tracer, text="Your order ships tomorrow.", output_tokens=20, agent="support-agent")
    server.wait_for(lambda: server.sample("mast_traces_total", service="support", agent="support-agent") == 2)
    assert server.sample("mast_failure_mode_traces_total") == 0
    assert server.sample("mast_failing_traces_total") == 0
    assert server.sample("mast_tokens_total", model="gpt-4.1-mini", type="input") == 2 * (1500 + 1000)
    assert server.sample("mast_tokens_total", model="gpt-4.1-mini", type="cache_read") == 2 * 500
    assert server.sample("mast_tokens_total", model="gpt-4.1-mini", type="output") == 2 * 70
    expected = 2 * (2500 * 0.4 + 500 * 0.1 + 70 * 1.6) / 1e6
    assert server.sample("mast_cost_usd_total", model="gpt-4.1-mini") == pytest.approx(expected)
    rows = server.rows("SELECT steps, llm_calls, tool_calls, input_tokens, cost_usd FROM {db}.mast_traces")
    assert [(r["steps"], r["llm_calls"], r["tool_calls"], r["input_tokens"]) for r in rows] == [(6, 2, 3, 3000)] * 2
    # calls, failures and time by tool and by model: the failures of a tool counted from 0 with its first call
    support = {"service": "support", "agent": "support-agent"}
    assert server.sample("mast_tool_calls_total", tool="get_shipping_status", **support) == 4
    assert server.sample("mast_tool_call_errors_total", tool="get_shipping_status", **support) == 2
    assert server.sample("mast_tool_calls_total", tool="lookup_order", **support) == 2
    assert "mast_tool_call_errors_total{" in server.metrics() and \
        server.sample("mast_tool_call_errors_total", tool="lookup_order", **support) == 0
    assert server.sample("mast_tool_call_seconds_total", tool="lookup_order", **support) > 0
    assert server.sample("mast_model_calls_total", model="gpt-4.1-mini", **support) == 4
    assert server.sample("mast_model_call_seconds_total", model="gpt-4.1-mini", **support) > 0
    tp.shutdown()


def test_unknown_model_is_counted_unpriced(server) -> None:
    tp = provider("grpc", server.grpc_endpoint)
    tracer = tp.get_tracer("test")
    with agent_run(tracer):
        chat(tracer, model="acme-internal-llm-7", text="done, nothing to do here at all")
    server.wait_for(lambda: server.sample("mast_traces_total") == 1)
    assert server.sample("mast_tokens_total", model="acme-internal-llm-7", type="input") == 1000
    assert server.sample("mast_cost_usd_total", model="acme-internal-llm-7") == 0
    assert server.sample("mastwatch_unpriced_llm_calls_total", model="acme-internal-llm-7") == 1
    tp.shutdown()


def test_metrics_pass_promtool_check(server) -> None:
    """The exposition is valid for Prometheus's own linter (promtool from the prometheus package)."""
    import subprocess

    tp = provider("grpc", server.grpc_endpoint)
    tracer = tp.get_tracer("test")
    with agent_run(tracer):
        for _ in range(3):
            step(tracer, "query_prometheus", {"q": "up"})
    server.wait_for(lambda: server.sample("mast_traces_total") == 1)
    promtool = installed("promtool")
    result = subprocess.run([promtool, "check", "metrics"], input=server.metrics(), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    tp.shutdown()


class GraphRecursionError(RecursionError):
    """LangGraph's limit error, as langgraph.errors defines it."""


GraphRecursionError.__module__ = "langgraph.errors"


class HTTPError(OSError):
    pass


HTTPError.__module__ = "requests.exceptions"


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_failures_recorded_as_exceptions_reach_the_verdict(server, protocol: str) -> None:
    """Failures the SDK way, no error attribute: `record_exception` and `set_status(ERROR, description)` on a tool
    span; an exception leaving `start_as_current_span` blocks (recorded and ERROR status by default)."""
    endpoint = server.grpc_endpoint if protocol == "grpc" else server.http_url
    tp = provider(protocol, endpoint, service="exceptions")
    tracer = tp.get_tracer("test")
    with agent_run(tracer, "support-agent") as support:
        step(tracer, "get_order", {"id": 1}, agent="support-agent")
        chat(tracer, agent="support-agent")  # asks for the change
        with tracer.start_as_current_span("execute_tool update_order") as span:
            span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "update_order",
                                 "gen_ai.tool.call.arguments": '{"id": 1, "status": "cancelled"}'})
            try:
                raise HTTPError("503 Server Error: Service Unavailable for url: https://orders.internal/v1/1")
            except HTTPError as e:
                span.record_exception(e)
                span.set_status(Status(StatusCode.ERROR, "the orders service answered 503"))
        chat(tracer, text="Sorry, I cannot complete it right now.", agent="support-agent")
    with pytest.raises(GraphRecursionError), agent_run(tracer, "graph-agent") as graph:
        for i in range(3):
            step(tracer, "search_docs", {"q": f"attempt {i}"}, agent="graph-agent")
        with tracer.start_as_current_span("LangGraph"):
            raise GraphRecursionError("Recursion limit of 25 reached without hitting a stop condition.")
    server.wait_for(lambda: server.sample("mast_traces_total", service="exceptions") == 2)
    findings = {(r["trace_id"], r["failure_mode"]): r for r in server.rows(
        "SELECT trace_id, failure_mode, evidence, reason, basis FROM {db}.mast_findings")}
    support_id, graph_id = (format(s.get_span_context().trace_id, "032x") for s in (support, graph))
    assert set(findings) == {(support_id, "FM-3.1"), (graph_id, "FM-1.5")}
    # the 503 is only in the exception message: a failure a retry may cure, given up on
    assert "update_order failed" in findings[support_id, "FM-3.1"]["reason"]
    limit = findings[graph_id, "FM-1.5"]
    assert "(langgraph.errors.GraphRecursionError)" in limit["reason"] and limit["basis"] == "structure"
    assert server.sample("mast_failure_mode_traces_total", failure_mode="FM-1.5", agent="graph-agent") == 1
    tp.shutdown()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names are set through Linux's prctl")
def test_threads_carry_their_names_at_the_os_level(server) -> None:
    """`top -H` and /proc tell the processor, the store's writer and the receivers' threads apart."""
    for protocol, endpoint in (("grpc", server.grpc_endpoint), ("http", server.http_url)):
        tp = provider(protocol, endpoint, service=f"threads-{protocol}")
        with agent_run(tp.get_tracer("test"), "named"):
            step(tp.get_tracer("test"), "get_pods", {"ns": "prod"}, agent="named")
        tp.shutdown()
    server.wait_for(lambda: server.sample("mast_traces_total", service="threads-http") == 1)
    names = set()
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile (a connection's)
            names.add(Path(f"/proc/self/task/{tid}/comm").read_text().strip())
    assert {"mw-processor", "mw-store", "otlp-http"} <= names
    assert any(name.startswith("otlp-grpc_") for name in names)


def stored_loop(server, tp) -> str:
    """A run calling the same tool four times, sent through `tp` and stored as the store's only row; its trace id."""
    tracer = tp.get_tracer("test")
    with agent_run(tracer) as root:
        for _ in range(4):
            step(tracer, "kubectl_get_pods", {"namespace": "prod"})
    server.wait_for(lambda: server.rows("SELECT count() AS n FROM {db}.mast_traces")[0]["n"] == 1)
    return format(root.get_span_context().trace_id, "032x")


def test_top_and_show_ask_the_server_that_holds_the_store(server, tmp_path: Path) -> None:
    """chDB lets one process open the store: `top` and `show` run beside the server read through its metrics port,
    as they would read the store themselves; with no server there, one line says what to pass."""
    import json
    import subprocess

    tp = provider("http", server.http_url)
    trace_id = stored_loop(server, tp)
    store = server.service.config.exporters.store.path
    endpoint = server.metrics_url.removeprefix("http://").removesuffix("/metrics")
    mastwatch = [sys.executable, "-m", "mastwatch.cli"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*mastwatch, *args, "--store-path", store], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)

    top = cli("top", "traces", "--set", f"exporters.prometheus.endpoint={endpoint}")
    assert top.returncode == 0 and trace_id[:12] in top.stdout and "FM-1.3" in top.stdout, top
    shown = cli("show", trace_id, "--set", f"exporters.prometheus.endpoint={endpoint}")
    assert shown.returncode == 0 and "kubectl_get_pods" in shown.stdout and "FM-1.3" in shown.stdout, shown
    spend = cli("top", "spend", "--format", "json", "--set", f"exporters.prometheus.endpoint={endpoint}")
    assert spend.returncode == 0, spend
    (row,) = [json.loads(line) for line in spend.stdout.splitlines()]
    assert row["model_calls"] == 4 and row["spend_usd"] > 0 and row["repeated"] >= 3, row
    assert f"({row['model_calls']} calls, $" in shown.stdout  # show gives the model its calls and cost
    missing = cli("show", "0" * 31 + "1", "--set", f"exporters.prometheus.endpoint={endpoint}")
    assert missing.returncode == 1 and "is not in the store" in missing.stderr, missing
    unreachable = cli("top", "traces", "--set", "exporters.prometheus.endpoint=127.0.0.1:1")
    assert unreachable.returncode == 1 and "held by another process" in unreachable.stderr, unreachable
    assert "Code: 76" not in unreachable.stderr  # chDB's own error is not printed beside ours
    # a server holding another store than the one asked for says so, rather than answering with its own rows
    from mastwatch import remote
    from mastwatch.config import load, set_overrides
    from mastwatch.exporter.store.queries import Filters

    other = load(None, set_overrides([f"exporters.store.path={tmp_path / 'other'}",
                                      f"exporters.prometheus.endpoint={endpoint}"]))
    with pytest.raises(remote.Unreachable, match=r"answers for another store \(it holds the store in"):
        remote.ask_top(other, "traces", Filters(0, 2**62))
    with pytest.raises(remote.Unreachable, match="answers for another store"):
        remote.ask_run(other, trace_id)
    tp.shutdown()


def test_a_runs_version_and_environment_come_from_its_resource(server, tmp_path: Path) -> None:
    """service.version and deployment.environment.name, as the SDK's resource carries them (OTEL_RESOURCE_ATTRIBUTES,
    OTEL_SERVICE_VERSION), are the run's: in its row, in the pull answer and in `top versions`."""
    import json
    import subprocess
    import urllib.request

    tp = provider("grpc", server.grpc_endpoint, service="ops", resource={"service.version": "2.3.0",
                                                                         "deployment.environment.name": "production"})
    trace_id = stored_loop(server, tp)
    assert server.rows("SELECT version, environment FROM {db}.mast_traces") == [
        {"version": "2.3.0", "environment": "production"}]
    with urllib.request.urlopen(server.metrics_url.removesuffix("/metrics") + f"/v1/findings/{trace_id}") as reply:
        answer = json.load(reply)
    assert (answer["flagged"], answer["version"], answer["environment"]) == (True, "2.3.0", "production")
    endpoint = server.metrics_url.removeprefix("http://").removesuffix("/metrics")

    def top(what: str) -> list[dict]:
        done = subprocess.run([sys.executable, "-m", "mastwatch.cli", "top", what, "--format", "json", "--store-path",
                               server.service.config.exporters.store.path, "--set",
                               f"exporters.prometheus.endpoint={endpoint}"], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done
        return [json.loads(line) for line in done.stdout.splitlines()]

    (row,) = top("versions")
    assert (row["service"], row["environment"], row["version"], row["runs"], row["failing_runs"]) == (
        "ops", "production", "2.3.0", 1, 1)
    assert [(r["trace_id"], r["version"]) for r in top("traces")] == [(trace_id, "2.3.0")]
    tp.shutdown()


def test_a_release_failing_more_than_the_one_before_is_a_series_the_alert_reads(server) -> None:
    """The server reads the store's comparison of releases (at start and with the signatures): the newest release
    of an agent, with its z statistic against the one before."""
    from tests.test_store import make_verdict

    start = (time.time_ns() // 10**9 - 3600) * 10**9
    verdicts = []
    for trace in range(1, 61):  # 3.1.0, then 3.2.0 failing five times as often
        newer = trace > 30
        verdict = make_verdict(trace, "support", "support-agent", start + trace * 10**9, (),
                               modes=("FM-3.3",) if trace % 10 < (5 if newer else 1) else ())
        verdict.version, verdict.environment = ("3.2.0" if newer else "3.1.0"), "production"
        verdicts.append(verdict)
    server.service.store.export_verdicts(verdicts, [None] * len(verdicts))
    assert server.service.store.flush()
    assert "mast_release_failure_zscore{" not in server.metrics()
    server.service.read_releases()
    (line,) = [line for line in server.metrics().splitlines() if line.startswith("mast_release_failure_zscore{")]
    assert 'version="3.2.0"' in line and 'previous_version="3.1.0"' in line and 'environment="production"' in line
    assert float(line.rpartition(" ")[2]) == 3.38


def test_the_modes_failure_budgets_count_start_from_zero_with_an_agents_first_run(start_server) -> None:
    """An objective on a mode needs each agent's counter of it from the agent's first run, as the rising mode's:
    a counter born at its first increment would show Prometheus no increase then."""
    running = start_server(rules__slos=[{"name": "loops", "failure_mode": "FM-1.3"}])
    tp = provider("http", running.http_url)
    tracer = tp.get_tracer("test")
    with agent_run(tracer):
        step(tracer, "kubectl_get_pods", {"namespace": "prod"})
    tp.shutdown()
    running.wait_for(lambda: running.sample("mast_traces_total") == 1)
    metrics = running.metrics()
    for mode in ("FM-1.3", "FM-3.3"):  # the objective's, and the rising rule's
        assert re.search(rf'mast_failure_mode_traces_total\{{[^}}]*failure_mode="{mode}"[^}}]*}} 0\.0', metrics), mode
    assert 'failure_mode="FM-2.5"' not in metrics
