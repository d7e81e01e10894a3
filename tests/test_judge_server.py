"""The judge end to end: the OpenTelemetry SDK sends runs to a running server, the judge (a local
OpenAI-compatible endpoint) answers, and its findings arrive in /metrics and in the store."""

from __future__ import annotations

import subprocess

from opentelemetry.trace import SpanKind

from tests.chat_server import Reply, answer, user_message
from tests.conftest import installed
from tests.sdk_agents import agent_run, chat, provider, step


def judge_answers(request: dict) -> Reply:
    """Derailment when the run looked up the weather; nothing else."""
    yes = {"FM-2.3": "a support run checking the weather"} if "get_weather" in user_message(request) else {}
    return Reply(answer(request, yes=yes))


def test_judge_findings_reach_metrics_and_store(start_server, chat_server) -> None:
    chat_server.default = judge_answers
    server = start_server(judge__enabled=True, judge__base_url=chat_server.base_url, judge__model="judge-test",
                          judge__sample_rate=1.0, judge__backoff="10ms",
                          processor__detectors={"FM-1.3": {"unknown_args_min_run": 5}})
    tp = provider("grpc", server.grpc_endpoint)
    tracer = tp.get_tracer("test")
    with agent_run(tracer, "support") as derailed:
        step(tracer, "lookup_order", {"id": 7}, agent="support")
        step(tracer, "get_weather", {"city": "Lyon"}, agent="support")
        chat(tracer, text="Your order ships tomorrow, and it will be sunny.", agent="support")
    with agent_run(tracer, "support") as searching:  # arguments not captured: FM-1.3 at low confidence
        for _ in range(5):
            with tracer.start_as_current_span("execute_tool search", kind=SpanKind.INTERNAL) as span:
                span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"})
    server.wait_for(lambda: server.sample("mast_judged_traces_total") == 2)
    found = {"failure_mode": "FM-2.3", "category": "FC2", "service": "test-agents"}
    assert server.sample("mast_judge_findings_total", **found, agent="support", verdict="found") == 1
    assert server.sample("mast_judge_findings_total", **found, verdict="not_found") == 1
    assert server.sample("mast_judge_findings_total", failure_mode="FM-1.3", verdict="rejected") == 1
    assert server.sample("mast_judge_findings_total") == 5 + 6  # five modes asked, six with FM-1.3 to confirm
    # judge findings have their own series: the structural count of traces per mode is unchanged
    assert server.sample("mast_failure_mode_traces_total", failure_mode="FM-2.3") == 0
    assert server.sample("mast_failure_mode_traces_total", failure_mode="FM-1.3") == 1
    assert server.sample("mastwatch_judge_requests_total", outcome="ok") == 2
    assert server.sample("mastwatch_judge_tokens_total", type="input") == 2 * 1200
    assert server.sample("mastwatch_judge_tokens_total", type="output") == 2 * 80
    assert server.sample("mastwatch_judge_cost_usd_total") == 0  # judge-test has no known price
    assert server.sample("mastwatch_judge_queue") == 0
    derailed_id = format(derailed.get_span_context().trace_id, "032x")
    searching_id = format(searching.get_span_context().trace_id, "032x")
    rows = server.rows("SELECT trace_id, failure_mode, basis, evidence, reason FROM {db}.mast_findings "
                       "ORDER BY basis, trace_id")
    assert [(r["trace_id"], r["failure_mode"], r["basis"]) for r in rows] == [
        (derailed_id, "FM-2.3", "judge"), (searching_id, "FM-1.3", "structure")]
    # the judge's reasoning reads the content: stored only with exporters.store.store_content
    assert len(rows[0]["evidence"][0]) == 16 and rows[0]["reason"] == "found by the judge"
    judged = server.rows("SELECT trace_id, failure_mode, verdict, structural_confidence, model FROM "
                         "{db}.mast_judgements ORDER BY trace_id, failure_mode")
    assert {(r["trace_id"], r["failure_mode"]): r["verdict"] for r in judged} == {
        **{(derailed_id, code): "not_found" for code in ("FM-1.1", "FM-1.2", "FM-2.2", "FM-2.4")},
        (derailed_id, "FM-2.3"): "found",
        **{(searching_id, code): "not_found" for code in ("FM-1.1", "FM-1.2", "FM-2.2", "FM-2.3", "FM-2.4")},
        (searching_id, "FM-1.3"): "rejected"}
    assert {r["model"] for r in judged} == {"judge-test"}
    assert [r["structural_confidence"] for r in judged if r["failure_mode"] == "FM-1.3"] == [0.4]
    promtool = installed("promtool")
    result = subprocess.run([promtool, "check", "metrics"], input=server.metrics(), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    tp.shutdown()


def test_without_a_judge_nothing_is_judged_and_no_judge_series_exist(server) -> None:
    tp = provider("http", server.http_url)
    tracer = tp.get_tracer("test")
    with agent_run(tracer):
        step(tracer, "lookup_order", {"id": 7})
    server.wait_for(lambda: server.sample("mast_traces_total") == 1)
    assert server.service.judge is None and "judge" not in server.metrics()
    assert server.rows("SELECT count() AS n FROM {db}.mast_judgements") == [{"n": 0}]
    tp.shutdown()
