"""Spans to steps: each convention's names on hand-built spans, then the recorded corpus."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from mastwatch.collector.model.content import PREVIEW_CHARS
from mastwatch.collector.model.steps import Step, StepKind
from mastwatch.collector.normalize import normalize_span
from mastwatch.collector.normalize.attributes import any_value, attributes
from mastwatch.collector.normalize.draft import FIELDS
from mastwatch.collector.receiver.decode import SpanRecord, decode
from tests.otlp_corpus import DATA_DIR, corpus

# --- helpers -------------------------------------------------------------------------


def value(v: Any) -> AnyValue:
    """A Python value as an OTLP AnyValue; dicts become kvlists (structured attributes)."""
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, str):
        return AnyValue(string_value=v)
    if isinstance(v, dict):
        return AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=k, value=value(x)) for k, x in v.items()]))
    return AnyValue(array_value=ArrayValue(values=[value(x) for x in v]))


def make_span(name: str, attrs: dict[str, Any], error: bool = False) -> Span:
    return Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, parent_span_id=b"\x03" * 8, name=name,
                start_time_unix_nano=1_000, end_time_unix_nano=2_000,
                attributes=[KeyValue(key=k, value=value(v)) for k, v in attrs.items()],
                status=Status(code=Status.STATUS_CODE_ERROR if error else Status.STATUS_CODE_UNSET))


def as_record(span: Span, service: str = "svc") -> SpanRecord:
    return SpanRecord(service, span.trace_id, span.span_id, span.parent_span_id, span.name, span.start_time_unix_nano,
                      span.end_time_unix_nano, span.status.code, attributes(span.attributes))


def step(name: str, attrs: dict[str, Any], error: bool = False) -> Step:
    return normalize_span(as_record(make_span(name, attrs, error)))


def tool(args: Any, name: str = "search") -> Step:
    return step(f"execute_tool {name}", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                                         "gen_ai.tool.call.arguments": args})


# --- OpenTelemetry GenAI -----------------------------------------------------------------


def test_genai_inference_span() -> None:
    s = step("chat gpt-4.1-mini", {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4.1-mini", "gen_ai.response.model": "gpt-4.1-mini-2025-04-14",
        "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 80,
        "gen_ai.usage.cache_read.input_tokens": 700, "gen_ai.usage.cache_creation.input_tokens": 300,
        "gen_ai.response.finish_reasons": ["stop"], "gen_ai.conversation.id": "conv-1"})
    assert (s.kind, s.model, s.provider) == (StepKind.LLM, "gpt-4.1-mini-2025-04-14", "openai")
    assert (s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens) == (1200, 80, 700, 300)
    assert s.finish_reasons == ("stop",) and s.conversation_id == "conv-1" and not s.error
    assert dict(s.tokens_by_type()) == {"input": 200, "output": 80, "cache_read": 700, "cache_write": 300}


def test_finish_reasons_one_or_several() -> None:
    def reasons(finish: Any) -> tuple[str, ...]:
        return step("chat m", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                               "gen_ai.response.finish_reasons": finish}).finish_reasons

    one, again = reasons(["stop"]), reasons(["sto" + "p"])  # equal texts, distinct objects
    assert one == ("stop",) and one is again and one[0] is again[0]
    assert reasons(["length", "stop"]) == ("length", "stop")
    assert reasons([7]) == ("7",) and reasons('["tool_calls"]') == ("tool_calls",)


def test_genai_development_names() -> None:
    s = step("chat m", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                        "gen_ai.usage.input_tokens": 10, "gen_ai.usage.cache_write.input_tokens": 4})
    assert s.cache_write_tokens == 4
    for op in ("handle_conversation_turn", "invoke_workflow", "invoke_agent"):
        assert step(op, {"gen_ai.operation.name": op}).kind is StepKind.AGENT


def test_genai_deprecated_names() -> None:
    s = step("chat", {"gen_ai.system": "anthropic", "gen_ai.request.model": "claude-sonnet-4-5",
                      "gen_ai.usage.prompt_tokens": 33, "gen_ai.usage.completion_tokens": 7})
    assert (s.kind, s.provider, s.input_tokens, s.output_tokens) == (StepKind.LLM, "anthropic", 33, 7)


# Each of genai's optional keys, alone beside the operation: read only when the pass over the span's keys saw it.
_CHAT_OUTPUT = '[{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]'
OPTIONAL_KEYS = {
    "gen_ai.response.model": ("chat", "gpt-x", lambda s: s.model == "gpt-x"),
    "gen_ai.request.model": ("chat", "gpt-y", lambda s: s.model == "gpt-y"),
    "gen_ai.agent.name": ("chat", "planner", lambda s: s.agent == "planner"),
    "gen_ai.tool.call.arguments": ("execute_tool", '{"q": 1}', lambda s: s.args is not None),
    "tool_arguments": ("execute_tool", '{"q": 1}', lambda s: s.args is not None),
    "gen_ai.tool.args": ("execute_tool", '{"q": 1}', lambda s: s.args is not None),
    "gcp.vertex.agent.tool_call_args": ("execute_tool", '{"q": 1}', lambda s: s.args is not None),
    "gen_ai.tool.call.result": ("execute_tool", "ok", lambda s: s.result is not None),
    "tool_response": ("execute_tool", "ok", lambda s: s.result is not None),
    "gcp.vertex.agent.tool_response": ("execute_tool", "ok", lambda s: s.result is not None),
    "input.value": ("execute_tool", '{"q": 1}', lambda s: s.args is not None),
    "output.value": ("execute_tool", "ok", lambda s: s.result is not None),
    "gen_ai.output": ("chat", "done", lambda s: s.output_fingerprint is not None),
    "gen_ai.output.messages": ("chat", _CHAT_OUTPUT, lambda s: s.output_preview == "done"),
    "gen_ai.completion.0.content": ("chat", "done", lambda s: s.output_preview == "done"),
    "gen_ai.completion.0.tool_calls.0.name": ("chat", "search", lambda s: s.output_preview == "search"),
    "gen_ai.usage.cache_read.input_tokens": ("chat", 7, lambda s: s.cache_read_tokens == 7),
    "gen_ai.usage.cache_read_input_tokens": ("chat", 7, lambda s: s.cache_read_tokens == 7),
    "gen_ai.usage.cache_write.input_tokens": ("chat", 7, lambda s: s.cache_write_tokens == 7),
    "gen_ai.usage.cache_creation.input_tokens": ("chat", 7, lambda s: s.cache_write_tokens == 7),
    "gen_ai.usage.cache_write_input_tokens": ("chat", 7, lambda s: s.cache_write_tokens == 7),
    "gen_ai.response.finish_reasons": ("chat", ["length"], lambda s: s.finish_reasons == ("length",)),
    "gen_ai.completion.0.finish_reason": ("chat", "length", lambda s: s.finish_reasons == ("length",)),
    "error.type": ("chat", "Timeout", lambda s: s.error_type == "Timeout"),
    "gen_ai.conversation.id": ("chat", "c-1", lambda s: s.conversation_id == "c-1"),
    "gen_ai.input.messages": ("chat", '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
                              lambda s: s.user_text == "hi"),
    "gen_ai.system_instructions": ("chat", "Make only one tool call at a time.", lambda s: s.rules == 1),
}


def test_the_users_last_turn_is_read_from_the_tail_of_a_long_history() -> None:
    turn = [{"role": "user", "parts": [{"type": "text", "content": "my order is #W1"}]},
            {"role": "assistant", "parts": [{"type": "text", "content": "x" * 5000}]},
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "1", "response": "ok"}]},
            {"role": "user", "parts": [{"type": "text", "content": "yes, go ahead"}]}]
    s = step("chat x", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(turn)})
    assert s.user_text == "yes, go ahead"
    s = step("chat x", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(turn[:3])})
    assert s.user_text is None  # nothing said by the user since the model's last turn
    flat = [{"role": "user", "content": "cancel it"}, {"role": "user", "content": [{"type": "text", "text": "yes"}]}]
    s = step("chat x", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(flat)})
    assert s.user_text == "cancel it\nyes"  # the older flat form, and OpenAI-style content parts


def test_a_tool_call_part_is_shown_with_its_arguments_as_json() -> None:
    output = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_order_status",
                                               "arguments": {"order_id": "A123", "note": "ü"}}]}]
    s = step("chat x", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(output)})
    assert s.output_preview == 'tool_call get_order_status {"order_id":"A123","note":"ü"}' and s.tool_calls == 1


def test_every_optional_genai_key_is_read() -> None:
    from mastwatch.collector.normalize import genai

    assert set(OPTIONAL_KEYS) == set(genai.OPTIONAL)  # a new optional key needs a case here
    for key, (op, v, holds) in OPTIONAL_KEYS.items():
        s = step(f"{op} x", {"gen_ai.operation.name": op, key: v})
        assert holds(s), key
        assert not holds(step(f"{op} x", {"gen_ai.operation.name": op, key + ".other": v})), key


def test_finish_reasons_given_as_json_string() -> None:
    s = step("chat", {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": '["tool_calls"]'})
    assert s.finish_reasons == ("tool_calls",)


def test_tool_arguments_string_and_structured_give_one_fingerprint() -> None:
    as_string = tool('{"query": "flights to Rome", "limit": 3, "filters": {"direct": true}}')
    as_kvlist = tool({"limit": 3, "filters": {"direct": True}, "query": "flights to Rome"})
    reordered = tool('{ "filters":{"direct":true},\n  "limit":3, "query":"flights  to Rome" }')
    assert as_string.kind is StepKind.TOOL and as_string.tool == "search"
    assert as_string.args_fingerprint is not None
    assert as_string.args_fingerprint == as_kvlist.args_fingerprint == reordered.args_fingerprint
    assert as_string.args_fingerprint != tool('{"query": "flights to Paris", "limit": 3, '
                                              '"filters": {"direct": true}}').args_fingerprint
    assert as_string.args_fingerprint != tool('{"query": "flights to Rome", "limit": 4, '
                                              '"filters": {"direct": true}}').args_fingerprint


def test_tool_name_from_span_name_when_attribute_missing() -> None:
    assert step("execute_tool get_weather", {"gen_ai.operation.name": "execute_tool"}).tool == "get_weather"
    # langsmith names execute_tool spans after the tool alone
    assert step("mcp__weather__get", {"gen_ai.operation.name": "execute_tool"}).tool == "mcp__weather__get"


def test_agent_spans_never_carry_tokens() -> None:
    s = step("invoke_agent Planner", {"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "gpt-4o",
                                      "gen_ai.usage.input_tokens": 5000, "gen_ai.usage.output_tokens": 900,
                                      "gen_ai.usage.cache_read.input_tokens": 100})
    assert s.kind is StepKind.AGENT
    assert (s.input_tokens, s.output_tokens, s.cache_read_tokens) == (0, 0, 0)


def test_agent_name() -> None:
    named = step("invoke_agent X", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Math Tutor"})
    assert named.agent == "Math Tutor"
    assert step("invoke_agent Travel Planner", {"gen_ai.operation.name": "invoke_agent"}).agent == "Travel Planner"
    assert step("invoke_agent", {"gen_ai.operation.name": "invoke_agent"}).agent is None


def test_error_from_status_or_error_type() -> None:
    by_status = step("execute_tool t", {"gen_ai.operation.name": "execute_tool"}, error=True)
    assert by_status.error and by_status.error_type == "_OTHER"
    by_type = step("execute_tool t", {"gen_ai.operation.name": "execute_tool", "error.type": "timeout"})
    assert by_type.error and by_type.error_type == "timeout"
    assert not step("execute_tool t", {"gen_ai.operation.name": "execute_tool"}).error


def raised_step(name: str, attrs: dict[str, Any], events: list[dict[str, Any]], status: int = 0,
                description: str = "") -> Step:
    """A step through the decoder, the span carrying events (`name` and attributes, given as a dict each)."""
    span = make_span(name, attrs)
    span.status.CopyFrom(Status(code=status, message=description))
    for event in events:
        span.events.add(name=event.pop("name", "exception"),
                        attributes=[KeyValue(key=k, value=value(v)) for k, v in event.items()])
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])
    (record,) = decode(request.SerializeToString()).spans
    return normalize_span(record)


TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "update_order"}
ERROR = Status.STATUS_CODE_ERROR


def test_exception_event_gives_the_error_type_and_message() -> None:
    sdk = {"exception.type": "requests.exceptions.HTTPError", "exception.message": "503 Server Error",
           "exception.stacktrace": "Traceback ...", "exception.escaped": "False"}
    failed = raised_step("execute_tool update_order", TOOL, [sdk], ERROR, "HTTPError: 503 Server Error")
    assert (failed.error, failed.error_type, failed.error_message) == (
        True, "requests.exceptions.HTTPError", "503 Server Error")
    # recorded, not escaping, status unset: handled, so the call did not fail; its type is still known
    handled = raised_step("execute_tool update_order", TOOL, [dict(sdk)])
    assert (handled.error, handled.error_type, handled.error_message) == (
        False, "requests.exceptions.HTTPError", "503 Server Error")
    for escaped in (True, "true", "True"):
        assert raised_step("execute_tool update_order", TOOL, [{**sdk, "exception.escaped": escaped}]).error
    # the convention's own error type wins, but not its "_OTHER"; the status description is the fallback message
    explicit = raised_step("execute_tool update_order", {**TOOL, "error.type": "timeout"}, [dict(sdk)], ERROR, "d")
    assert (explicit.error_type, explicit.error_message) == ("timeout", "503 Server Error")
    langfuse = raised_step("tool", {"langfuse.observation.type": "tool", "langfuse.observation.level": "ERROR"},
                           [{"exception.type": "KeyError"}], description="KeyError: 'id'")
    assert (langfuse.error, langfuse.error_type, langfuse.error_message) == (True, "KeyError", "KeyError: 'id'")
    status_only = raised_step("execute_tool update_order", TOOL, [], ERROR, "upstream timed out")
    assert (status_only.error_type, status_only.error_message) == ("_OTHER", "upstream timed out")
    assert raised_step("execute_tool update_order", TOOL, [{"exception.type": ""}], ERROR).error_type == "_OTHER"
    assert not raised_step("execute_tool update_order", TOOL, [{"exception.type": ""}]).error
    plain = raised_step("anything", {}, [{"exception.type": "OSError", "exception.message": "disk full"}], ERROR)
    assert (plain.kind, plain.error, plain.error_type, plain.error_message) == (
        StepKind.OTHER, True, "OSError", "disk full")
    healthy = raised_step("execute_tool update_order", TOOL, [{"name": "retry", "exception.type": "X"}], 1, "ok")
    assert (healthy.error, healthy.error_type, healthy.error_message) == (False, None, None)
    # OpenInference spans: the exception is read as for every convention (status ERROR fails the call)
    oi = raised_step("tool", {"openinference.span.kind": "TOOL", "tool.name": "t"}, [{"exception.type": "E"}])
    assert (oi.error, oi.error_type) == (False, "E")


def test_limits_raised_as_exceptions() -> None:
    graph = {"openinference.span.kind": "CHAIN"}
    by_type = raised_step("LangGraph", graph, [{"exception.type": "langgraph.errors.GraphRecursionError",
                                                "exception.message": "Recursion limit of 25 reached"}], ERROR)
    assert by_type.limit == "langgraph.errors.GraphRecursionError"
    message = "Recursion limit of 25 reached without hitting a stop condition."
    by_message = raised_step("LangGraph", graph, [{"exception.type": "RuntimeError", "exception.message": message}],
                             ERROR)
    assert by_message.limit == message and by_message.error_type == "RuntimeError"
    by_status = raised_step("invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, [], ERROR,
                            "Max turns (10) exceeded")
    assert by_status.limit == "Max turns (10) exceeded"
    no_draft = raised_step("run", {}, [{"exception.type": "MaxTurnsExceeded"}], ERROR)
    assert no_draft.limit == "MaxTurnsExceeded"
    # a tool's own limit is not the run's
    assert raised_step("execute_tool search", TOOL, [{"exception.type": "ValueError", "exception.message":
                                                      "maximum number of messages exceeded"}], ERROR).limit is None
    assert raised_step("LangGraph", graph, [{"exception.type": "ValueError", "exception.message": "bad id"}],
                       ERROR).limit is None


def test_previews_stay_short_for_huge_content() -> None:
    huge = {"text": "x" * 1_000_000}
    s = tool(json.dumps(huge))
    assert s.args_preview is not None and len(s.args_preview) <= PREVIEW_CHARS
    assert s.args_fingerprint == tool(huge).args_fingerprint
    out = step("chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": "y" * 1_000_000}]}])})
    assert out.output_chars == 1_000_000 and len(out.output_preview or "") <= PREVIEW_CHARS


def test_vertex_resource_name_becomes_model_id() -> None:
    s = step("generate_content", {"openinference.span.kind": "LLM", "llm.model_name":
                                  "projects/p-1/locations/europe-central2/publishers/google/models/gemini-2.5-flash"})
    assert s.model == "gemini-2.5-flash"
    assert step("chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "models/gemini-2.0-flash"}
                ).model == "gemini-2.0-flash"


# --- OpenInference, OpenLLMetry, Vercel, Langfuse, framework names ----------------------


def test_openinference_kinds() -> None:
    llm = step("ChatCompletion", {
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o", "llm.provider": "openai",
        "llm.token_count.prompt": 120, "llm.token_count.completion": 30,
        "llm.token_count.prompt_details.cache_read": 100, "output.value": "The answer is 42."})
    assert (llm.kind, llm.model, llm.provider) == (StepKind.LLM, "gpt-4o", "openai")
    assert (llm.input_tokens, llm.output_tokens, llm.cache_read_tokens) == (120, 30, 100)
    assert llm.output_preview == "The answer is 42."
    t = step("lookup", {"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"id": 7}',
                        "output.value": "found"})
    assert (t.kind, t.tool) == (StepKind.TOOL, "lookup")
    assert t.args_fingerprint == tool({"id": 7}).args_fingerprint and t.result_key is not None
    agent = step("Agent.run", {"openinference.span.kind": "AGENT", "llm.token_count.prompt": 999})
    assert (agent.kind, agent.agent, agent.input_tokens) == (StepKind.AGENT, "Agent.run", 0)
    assert step("RunnableSequence", {"openinference.span.kind": "CHAIN"}).kind is StepKind.AGENT


def test_openllmetry() -> None:
    t = step("get_weather.tool", {"traceloop.span.kind": "tool", "traceloop.entity.input": '{"city": "Oslo"}'})
    assert (t.kind, t.tool) == (StepKind.TOOL, "get_weather")
    assert t.args_fingerprint == tool({"city": "Oslo"}).args_fingerprint
    a = step("planner.agent", {"traceloop.span.kind": "agent", "traceloop.entity.name": "planner"})
    assert (a.kind, a.agent) == (StepKind.AGENT, "planner")
    llm = step("openai.chat", {"llm.request.type": "chat", "gen_ai.system": "openai",
                               "gen_ai.request.model": "gpt-4o", "gen_ai.usage.prompt_tokens": 50,
                               "gen_ai.usage.completion_tokens": 5, "gen_ai.completion.0.role": "assistant",
                               "gen_ai.completion.0.content": "Sunny in Oslo."})
    assert (llm.kind, llm.input_tokens, llm.output_tokens) == (StepKind.LLM, 50, 5)
    assert llm.output_preview == "Sunny in Oslo."


def test_model_calls_asking_for_tools_without_a_finish_attribute() -> None:
    """OpenLLMetry gives the finish reason per completion; OpenInference none: an output with tool calls asked
    for tools, a text output did not say."""
    llm = step("openai.chat", {"llm.request.type": "chat", "gen_ai.system": "openai",
                               "gen_ai.completion.0.tool_calls.0.name": "get_order",
                               "gen_ai.completion.0.finish_reason": "tool_calls"})
    assert llm.finish_reasons == ("tool_calls",)
    calls = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1",
             "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_order",
             "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"id": 7}'}
    assert step("ChatOpenAI", calls).finish_reasons == ("tool_calls",)
    assert step("ChatOpenAI", {**calls, "llm.finish_reason": "length"}).finish_reasons == ("length",)
    text = step("ChatOpenAI", {"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": "Hi."})
    assert text.finish_reasons == ()


def test_vercel_ai_sdk() -> None:
    call = step("ai.generateText.doGenerate", {
        "ai.operationId": "ai.generateText.doGenerate", "ai.model.provider": "openai.chat",
        "ai.model.id": "gpt-4o-mini", "ai.usage.promptTokens": 14, "ai.usage.completionTokens": 20,
        "ai.response.text": "Lines of code align", "ai.response.finishReason": "stop"})
    assert (call.kind, call.model, call.provider) == (StepKind.LLM, "gpt-4o-mini", "openai")
    assert (call.input_tokens, call.output_tokens, call.finish_reasons) == (14, 20, ("stop",))
    v5 = step("ai.streamText.doStream", {"ai.operationId": "ai.streamText.doStream", "ai.model.id": "gpt-5",
                                         "ai.usage.inputTokens": 3, "ai.usage.outputTokens": 4,
                                         "ai.usage.cachedInputTokens": 2})
    assert (v5.input_tokens, v5.output_tokens, v5.cache_read_tokens) == (3, 4, 2)
    t = step("ai.toolCall", {"ai.operationId": "ai.toolCall", "ai.toolCall.name": "getWeather",
                             "ai.toolCall.id": "call_1", "ai.toolCall.args": '{"city":"Oslo"}'})
    assert (t.kind, t.tool, t.tool_call_id) == (StepKind.TOOL, "getWeather", "call_1")
    outer = step("ai.generateText", {"ai.operationId": "ai.generateText", "ai.usage.promptTokens": 14})
    assert (outer.kind, outer.input_tokens) == (StepKind.AGENT, 0)


def test_langfuse_sdk_spans() -> None:
    gen = step("ChatOpenAI", {"langfuse.observation.type": "generation", "langfuse.observation.model.name": "gpt-5",
                              "langfuse.observation.usage_details": '{"input": 179, "output": 35, "total": 278, '
                              '"input_cache_read": 21, "output_reasoning": 64}',
                              "langfuse.observation.output": '{"role": "assistant", "content": "Sunny.", '
                              '"tool_calls": []}'})
    assert (gen.kind, gen.model) == (StepKind.LLM, "gpt-5")
    # Langfuse's "input"/"output" leave out the breakdowns listed next to them
    assert (gen.input_tokens, gen.output_tokens, gen.cache_read_tokens) == (200, 99, 21)
    assert gen.output_preview == "Sunny."
    lc_tool = step("get_weather", {"langfuse.observation.type": "span", "langfuse.observation.input":
                                   '{"city":"San Francisco"}', "langfuse.observation.output":
                                   '{"content": "sunny", "type": "tool", "name": "get_weather", '
                                   '"tool_call_id": "call_9", "status": "success"}'})
    assert (lc_tool.kind, lc_tool.tool, lc_tool.tool_call_id) == (StepKind.TOOL, "get_weather", "call_9")
    assert lc_tool.args_fingerprint == tool({"city": "San Francisco"}).args_fingerprint
    node = step("tools", {"langfuse.observation.type": "span",
                          "langfuse.observation.output": '{"messages": [{"type": "tool", "tool_call_id": "c"}]}'})
    assert node.kind is StepKind.OTHER


def test_framework_specific_names() -> None:
    any_agent = step("call_llm mistral/mistral-small-latest", {
        "gen_ai.operation.name": "call_llm", "gen_ai.request.model": "mistral/mistral-small-latest",
        "gen_ai.output": "Here are the steps I have taken.", "gen_ai.usage.input_tokens": 366})
    assert (any_agent.kind, any_agent.input_tokens) == (StepKind.LLM, 366)
    assert any_agent.output_preview == "Here are the steps I have taken."
    any_tool = step("execute_tool write_file", {"gen_ai.operation.name": "execute_tool",
                                                "gen_ai.tool.name": "write_file",
                                                "gen_ai.tool.args": '{"text": "2025"}', "gen_ai.output": "{}"})
    assert any_tool.args_fingerprint == tool({"text": "2025"}).args_fingerprint
    assert any_tool.result_key is not None
    adk = step("execute_tool say_hello", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "say_hello",
                                          "gcp.vertex.agent.tool_call_args": '{"name": "Bob"}'})
    assert adk.args_fingerprint == tool({"name": "Bob"}).args_fingerprint
    koog = step("tool.HelloTool", {"gen_ai.tool.name": "HelloTool", "input.value": '{"name":"Bob"}'})
    assert (koog.kind, koog.args_fingerprint) == (StepKind.TOOL, tool({"name": "Bob"}).args_fingerprint)


def test_beeai_event_spans_are_one_call() -> None:
    def beeai(name: str, kind: str, extra: dict[str, Any] | None = None) -> Step:
        attrs = {"openinference.span.kind": kind, "llm.model_name": "gpt-4o-mini", **(extra or {})}
        return step(name, attrs)

    start = beeai("backend.openai.chat.start-14", "LLM", {"target": "backend.openai.chat.start", "traceId": "t"})
    assert start.kind is StepKind.LLM
    for name in ("backend.openai.chat.finish-14", "backend.openai.chat.success-14"):  # with or without target
        assert beeai(name, "LLM").kind is StepKind.OTHER
    t = beeai("tool.search.wikipedia.start-12", "TOOL", {"target": "tool.search.wikipedia.start", "traceId": "t",
                                                        "tool.parameters": '{"query": "Barcelona"}'})
    assert (t.kind, t.tool) == (StepKind.TOOL, "search.wikipedia")
    assert t.args_fingerprint == tool({"query": "Barcelona"}).args_fingerprint
    assert beeai("agent.react.update-13", "AGENT", {"target": "agent.react.update", "traceId": "t"}
                 ).kind is StepKind.OTHER


# --- the recorded corpus -------------------------------------------------------------------


def span_attrs(span: Span) -> dict[str, Any]:
    return attributes(span.attributes)


@cache
def normalised() -> dict[tuple[str, str], list[tuple[Span, Step]]]:
    out: dict[tuple[str, str], list[tuple[Span, Step]]] = {}
    for source, run_id, request in corpus():
        pairs = out.setdefault((source, run_id), [])
        for rs in request.resource_spans:
            service = next((str(any_value(kv.value)) for kv in rs.resource.attributes if kv.key == "service.name"),
                           "unknown_service")
            pairs += [(span, normalize_span(as_record(span, service))) for ss in rs.scope_spans for span in ss.spans]
    return out


def counts(source: str, run_id: str) -> tuple[int, int]:
    kinds = Counter(s.kind for _, s in normalised()[(source, run_id)])
    return kinds[StepKind.LLM], kinds[StepKind.TOOL]


def test_tau2_inference_and_tool_spans() -> None:
    runs = {k: v for k, v in normalised().items() if k[0] == "tau2"}
    assert len(runs) == 18
    total_in = 0
    for pairs in runs.values():
        for span, s in pairs:
            attrs = span_attrs(span)
            if attrs["gen_ai.operation.name"] == "chat":
                assert s.kind is StepKind.LLM and s.model and s.provider == "openai"
                assert s.input_tokens == attrs.get("gen_ai.usage.input_tokens", 0)
                assert s.output_tokens == attrs.get("gen_ai.usage.output_tokens", 0)
                assert s.cache_read_tokens == attrs.get("gen_ai.usage.cache_read.input_tokens", 0)
                total_in += attrs.get("gen_ai.usage.input_tokens", 0)
            elif attrs["gen_ai.operation.name"] == "execute_tool":
                assert s.kind is StepKind.TOOL and s.tool == attrs["gen_ai.tool.name"]
                assert s.args_fingerprint is not None
    steps_in = sum(s.input_tokens for pairs in runs.values() for _, s in pairs if s.kind is StepKind.LLM)
    assert steps_in == total_in
    # and what the agent's own model calls used in the source files
    source_in = sum(m["usage"]["prompt_tokens"] for f in sorted((DATA_DIR / "runs/tau2").glob("*.json"))
                    for sim in json.loads(f.read_text())["simulations"] for m in sim["messages"]
                    if m["role"] == "assistant" and m.get("usage"))
    assert steps_in == source_in == 124_359


# (LLM steps, tool steps) per trace, counted in the source files.
LANGFUSE = {
    "agno-2025-06-11": (4, 1),  # 2 model calls, each seen by OpenInference (no usage) and Langfuse's OpenAI wrapper
    "autogen-2025-06-06": (1, 0),
    "beeai-2025-08-01": (3, 1),  # start events of 3 calls; finish/success events are not calls
    "claude-agent-2025-12-22": (4, 2),
    "crewai-2025-07-11": (1, 0),
    "csharp-agent-with-gemini-2026-03-09": (3, 2),
    "google-adk-2025-08-28": (2, 1),
    "google-gemini-2025-08-01": (1, 0),
    "koog-2025-08-26": (2, 2),
    "langgraph-js-2025-10-30": (2, 1),
    "langgraph-python-2025-08-22": (2, 1),
    "llamaindex-2025-06-05": (1, 0),
    "microsoft-agent-2025-12-17": (2, 1),
    "openai-agents-2025-09-30": (2, 1),
    "pydantic-ai-2025-06-06": (1, 0),
    "pydantic-ai-tools-2025-06-06": (1, 0),
    "pydantic-ai-tools-2025-12-04": (4, 3),
    "pydantic-ai-with-gemini-2025-12-24": (1, 0),
    "vercel-aisdk-2025-11-17": (1, 1),
    "vertex-ai-2025-08-01": (1, 0),
}
ANY_AGENT = {"AGNO_trace": (3, 2), "GOOGLE_trace": (3, 3), "LANGCHAIN_trace": (4, 2), "LLAMA_INDEX_trace": (5, 3),
             "OPENAI_trace": (3, 2), "SMOLAGENTS_trace": (3, 3), "TINYAGENT_trace": (4, 3)}


def test_corpus_covers_every_trace() -> None:
    assert {r for s, r in normalised() if s == "langfuse"} == set(LANGFUSE)
    assert {r for s, r in normalised() if s == "any-agent"} == set(ANY_AGENT)


@pytest.mark.parametrize(("run_id", "expected"), sorted(LANGFUSE.items()))
def test_langfuse_framework_steps(run_id: str, expected: tuple[int, int]) -> None:
    assert counts("langfuse", run_id) == expected
    for _, s in normalised()[("langfuse", run_id)]:
        if s.kind is StepKind.TOOL:
            assert s.tool
        if s.kind is StepKind.LLM:
            assert s.model and "/" not in s.model


LANGFUSE_TOKENS = {  # (input, output) summed over LLM steps; only what the spans carry
    "agno-2025-06-11": (663 + 163, 225 + 20), "autogen-2025-06-06": (41, 3), "crewai-2025-07-11": (190, 164),
    "google-adk-2025-08-28": (39 + 28, 6 + 3), "langgraph-js-2025-10-30": (179 + 142, 35 + 64 + 24),
    "langgraph-python-2025-08-22": (60 + 108, 15 + 51), "microsoft-agent-2025-12-17": (77 + 216, 86 + 20),
    "vertex-ai-2025-08-01": (5, 845), "vercel-aisdk-2025-11-17": (62, 85),
    # koog, beeai and claude-agent spans carry no token counts (Langfuse estimated its numbers)
    "koog-2025-08-26": (0, 0), "beeai-2025-08-01": (0, 0), "claude-agent-2025-12-22": (0, 0),
}


@pytest.mark.parametrize(("run_id", "expected"), sorted(LANGFUSE_TOKENS.items()))
def test_langfuse_framework_tokens(run_id: str, expected: tuple[int, int]) -> None:
    llm = [s for _, s in normalised()[("langfuse", run_id)] if s.kind is StepKind.LLM]
    assert (sum(s.input_tokens for s in llm), sum(s.output_tokens for s in llm)) == expected


def test_langfuse_specific_steps() -> None:
    (vertex,) = [s for _, s in normalised()[("langfuse", "vertex-ai-2025-08-01")]]
    assert vertex.model == "gemini-2.5-flash"
    koog = {s.tool: s for _, s in normalised()[("langfuse", "koog-2025-08-26")] if s.kind is StepKind.TOOL}
    assert set(koog) == {"HelloTool", "ByeTool"}
    assert koog["HelloTool"].args_fingerprint == koog["ByeTool"].args_fingerprint  # both {"name":"Bob"}
    finish = {s.finish_reasons for _, s in normalised()[("langfuse", "csharp-agent-with-gemini-2026-03-09")]
              if s.kind is StepKind.LLM}
    assert finish == {("stop",)}
    (lg_tool,) = [s for _, s in normalised()[("langfuse", "langgraph-js-2025-10-30")] if s.kind is StepKind.TOOL]
    assert lg_tool.tool == "get_weather" and lg_tool.args_fingerprint == tool({"city": "San Francisco"}
                                                                              ).args_fingerprint


@pytest.mark.parametrize(("run_id", "expected"), sorted(ANY_AGENT.items()))
def test_any_agent_framework_steps(run_id: str, expected: tuple[int, int]) -> None:
    pairs = normalised()[("any-agent", run_id)]
    assert counts("any-agent", run_id) == expected
    ops = Counter(span_attrs(span).get("gen_ai.operation.name") for span, _ in pairs)
    assert (ops["call_llm"], ops["execute_tool"]) == expected  # every span of those operations, no other
    for span, s in pairs:
        attrs = span_attrs(span)
        if s.kind is StepKind.LLM:
            assert s.input_tokens == attrs["gen_ai.usage.input_tokens"] > 0
            assert s.output_tokens == attrs["gen_ai.usage.output_tokens"] > 0
            assert s.output_fingerprint is not None
        if s.kind is StepKind.TOOL:
            assert s.tool == attrs["gen_ai.tool.name"] and s.args_fingerprint is not None
            assert s.result_key is not None


def test_odd_finish_reasons_and_model_values_do_not_break_normalisation() -> None:
    s = step("chat x", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "models/gemini-2.5-flash",
                        "gen_ai.response.finish_reasons": [{"odd": 1}, "stop"]})
    assert s.kind is StepKind.LLM and s.model == "gemini-2.5-flash"
    assert s.finish_reasons == ("{'odd': 1}", "stop")


# --- the C reader of GenAI spans (normalize/_genai.c) against genai.read and its Python twin (_genai_py.py) ----------


def _genai_only(attrs: dict[str, Any]) -> int | None:
    """The span's bits of genai.OPTIONAL when only the GenAI conventions read it, else None."""
    from mastwatch.collector.normalize import span

    bits = span.key_marks(attrs)
    return bits >> len(span.CONVENTIONS) if bits & span._CONVENTIONS == span._GENAI else None


def _outcome(f: Any, *args: Any) -> Any:
    """What a call gives: its result, or the type and message of what it raised."""
    try:
        return f(*args)
    except Exception as e:  # compared, not handled
        return type(e), str(e)


def _genai_twin() -> Any:
    """The Python twin of the C reader, configured as normalize.span configures the one it uses."""
    from mastwatch.collector.normalize import _genai_py, genai

    _genai_py.configure(genai.SPEC)
    return _genai_py


def _compare(attrs: dict[str, Any], name: str) -> bool:
    """Whether the C reader took the span; its Python twin takes the same spans, and the slots of both are
    genai.read's."""
    from mastwatch.collector.normalize.span import draft, key_marks
    from tests.builds import extension

    values = extension("mastwatch.collector.normalize._genai").values
    present = _genai_only(attrs)
    if present is None:
        return False
    fast = values(attrs, name, present)
    assert _genai_twin().values(attrs, name, present) == fast, (name, attrs)
    if fast is None:
        return False
    assert fast == draft(attrs, name, key_marks(attrs)).values, (name, attrs)
    return True


@pytest.fixture(params=["c", "python"])
def genai_reader(request: pytest.FixtureRequest) -> Any:
    """The C reader, then its Python twin."""
    from tests.builds import extension

    return extension("mastwatch.collector.normalize._genai") if request.param == "c" else _genai_twin()


def test_c_genai_reader_fills_the_slots_genai_read_fills_on_every_recorded_span() -> None:
    from mastwatch.evaluate import without_content

    taken = seen = 0
    for _, _, request in corpus():
        records = decode(request.SerializeToString()).spans
        for record in [*records, *without_content(records)]:  # content capture on, then off
            seen += 1
            taken += _compare(record.attributes, record.name)
    assert seen > 1000
    assert taken > 400  # the GenAI runs without content take it


def test_c_genai_reader_fills_the_slots_genai_read_fills_on_odd_spans() -> None:
    import random

    rng = random.Random(20261201)
    choices: dict[str, list[Any]] = {
        "gen_ai.operation.name": ["chat", "invoke_agent", "execute_tool", "plan", "embeddings", "", "chat"],
        "gen_ai.agent.name": ["triage", "", 7],
        "gen_ai.request.model": ["gpt-4.1", "", 0],
        "gen_ai.response.model": ["gpt-4.1-2025", "", False],
        "gen_ai.provider.name": ["openai", ""],
        "gen_ai.system": ["anthropic", "", 3],
        "gen_ai.tool.name": ["search", "", 12],
        "gen_ai.tool.call.id": ["call_1", 99],
        "gen_ai.tool.call.arguments": ['{"q": 1}', {"q": 1}, ""],
        "tool_arguments": ["{}"],
        "gen_ai.tool.args": [[1, 2]],
        "gcp.vertex.agent.tool_call_args": ["{}"],
        "gen_ai.usage.input_tokens": [10, "12", -1, 2.5],
        "gen_ai.usage.prompt_tokens": [11],
        "gen_ai.usage.output_tokens": [3],
        "gen_ai.usage.completion_tokens": [4],
        "gen_ai.usage.cache_read.input_tokens": [5],
        "gen_ai.usage.cache_read_input_tokens": [6],
        "gen_ai.usage.cache_creation.input_tokens": [7],
        "gen_ai.response.finish_reasons": [["stop"], [], '["stop"]'],
        "gen_ai.completion.0.finish_reason": ["stop"],
        "error.type": ["timeout", 500],
        "gen_ai.conversation.id": ["c1", 5],
        "gen_ai.tool.call.result": ["ok"],
        "input.value": ["x"],
    }
    names = ["chat gpt-4.1", "invoke_agent triage", "invoke_agent", "invoke_agent ", "execute_tool search",
             "execute_tool ", "execute_tool", "search", "plan x", ""]
    taken = 0
    for _ in range(4000):
        attrs = {k: rng.choice(v) for k, v in choices.items() if rng.random() < 0.3}
        taken += _compare(attrs, rng.choice(names))
    assert taken > 1000


def test_c_genai_reader_and_its_python_twin_check_their_arguments_alike() -> None:
    from tests.builds import extension

    c, twin = extension("mastwatch.collector.normalize._genai"), _genai_twin()
    chat = {"gen_ai.operation.name": "chat"}
    for args in [(chat, "chat", 0), ([], "x", 0), (chat, b"chat", 0), (chat, "chat", "0"), (chat, "chat", 2**63),
                 (chat, "chat", -(2**63)), (chat, "chat", True), ({"gen_ai.operation.name": _OddStr("chat")}, "c", 0),
                 ({"gen_ai.operation.name": 5}, "x", 0), (chat, _OddStr("chat x"), 0)]:
        assert _outcome(twin.values, *args) == _outcome(c.values, *args), args


class _OddStr(str):
    pass


def test_c_genai_reader_reads_equal_keys_and_names_that_are_other_objects_alike() -> None:
    from tests.builds import extension

    values = extension("mastwatch.collector.normalize._genai").values
    compared = 0
    for _, _, request in corpus():
        for record in decode(request.SerializeToString()).spans:
            present = _genai_only(record.attributes)
            if present is None:
                continue
            # equal keys and operation names, other objects
            copied = {(k + " ")[:-1]: (v + " ")[:-1] if type(v) is str else v for k, v in record.attributes.items()}
            assert values(copied, record.name, present) == values(record.attributes, record.name, present)
            compared += 1
    assert compared > 100


def test_c_genai_reader_fills_a_list_again_only_when_nothing_else_holds_it() -> None:
    from tests.builds import extension

    values = extension("mastwatch.collector.normalize._genai").values
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "kubectl"}
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1"}
    held = values(tool, "execute_tool kubectl", 0)
    before = list(held)
    other = values(chat, "chat gpt-4.1", 0)
    assert other is not held and held == before  # a list the caller keeps is never written again
    assert other[0] is StepKind.LLM and "kubectl" not in other
    identity = id(other)
    del other, held
    again = values(tool, "execute_tool kubectl", 0)  # the list nothing holds now is filled again
    assert id(again) == identity and again == before  # with nothing left of the span before


def test_c_genai_reader_leaves_what_needs_parsing_to_genai_read(genai_reader: Any) -> None:
    from mastwatch.collector.normalize import genai

    values = genai_reader.values
    for attrs in ({"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": '["stop"]'},
                  {"gen_ai.operation.name": "chat", "gen_ai.completion.0.finish_reason": "stop"},
                  {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.result": "ok"},
                  {"gen_ai.operation.name": "chat", "gen_ai.output.messages": "[]"},
                  {"gen_ai.operation.name": 5}):
        present = _genai_only(attrs)
        assert present is not None and values(attrs, "x", present) is None, attrs
    assert values({"gen_ai.operation.name": "chat"}, "chat", 0)[0] is StepKind.LLM
    assert genai.SPEC["bits_out_of_scope"] & genai.OUTPUT_MESSAGES


def test_c_genai_reader_checks_its_spec(genai_reader: Any) -> None:
    from mastwatch.collector.normalize import genai

    configure, values = genai_reader.configure, genai_reader.values
    try:
        with pytest.raises(KeyError, match="operation"):
            configure({k: v for k, v in genai.SPEC.items() if k != "operation"})
        with pytest.raises(RuntimeError, match="not configured"):
            values({}, "x", 0)
        with pytest.raises(TypeError, match="kinds"):
            configure({**genai.SPEC, "kinds": ()})
        with pytest.raises(ValueError, match="slot_kind"):
            configure({**genai.SPEC, "slot_kind": 99})
        with pytest.raises(TypeError):
            configure([])
    finally:
        configure(genai.SPEC)
    with pytest.raises(TypeError):
        values([], "x", 0)
    assert values({}, "x", 0) == [None] * FIELDS


def test_c_genai_reader_and_its_python_twin_refuse_the_same_specs() -> None:
    """The twin checks a spec as the C reader does (the slots it fills are genai.read's, which genai.SPEC
    describes: a spec other than that one is only checked)."""
    from mastwatch.collector.normalize import _genai_py, genai
    from tests.builds import extension

    c = extension("mastwatch.collector.normalize._genai")
    specs: list[Any] = [[], None]
    for key, value in genai.SPEC.items():
        specs.append({k: v for k, v in genai.SPEC.items() if k != key})  # each entry missing
        wrong = "x" if not isinstance(value, str) else 5
        if key not in ("llm", "tool", "agent", "other"):  # any value will do for the kinds
            specs.append({**genai.SPEC, key: wrong})  # each of the wrong type
    for key in [k for k in genai.SPEC if k.startswith(("slot_", "bit_", "bits_"))] + ["fields"]:
        specs += [{**genai.SPEC, key: n} for n in (-1, 0, 19, 20, 64, 65, 2**63, True)]
    try:
        for spec in specs:
            got, want = _outcome(_genai_py.configure, spec), _outcome(c.configure, spec)
            assert got == want, spec if not isinstance(spec, dict) else [k for k in spec if spec[k] is not
                                                                         genai.SPEC.get(k)]
            if want is not None:  # refused: neither reads a span until configured again
                chat = {"gen_ai.operation.name": "chat"}
                assert _outcome(_genai_py.values, chat, "chat", 0) == _outcome(c.values, chat, "chat", 0)
    finally:
        c.configure(genai.SPEC)
        _genai_py.configure(genai.SPEC)


# --- one str per name (normalize/_strings.c, and its Python twin _strings_py.py) -------------------------------


@pytest.fixture(params=["c", "python"])
def strings(request: pytest.FixtureRequest) -> Any:
    """The C table, then its Python twin (each bounded as normalize.span bounds it after the test)."""
    from mastwatch.collector.normalize import _strings_py
    from tests.builds import extension

    module = extension("mastwatch.collector.normalize._strings") if request.param == "c" else _strings_py
    yield module
    module.bound(10_000)


def test_one_str_is_kept_per_text_and_the_table_is_bounded(strings: Any) -> None:
    from mastwatch.collector.normalize import span

    bound, canonical, kept = strings.bound, strings.canonical, strings.kept
    first = canonical("search")
    again = "".join(["sea", "rch"])
    assert again is not first and canonical(again) is first and canonical(first) is first
    if strings is span._strings:
        assert normalize_span(as_record(make_span("search", {}))).name is first  # steps share it
    bound(3)  # forgets what was kept
    texts = [canonical(f"text {i}") for i in range(3)]
    assert kept() == 3
    fourth = canonical("text 3")  # a full table is emptied first
    assert kept() == 1 and canonical("".join(["text ", "3"])) is fourth
    later = canonical("".join(["text ", "0"]))  # kept anew: equal, another object
    assert later == texts[0] and later is not texts[0] and canonical(later) is later
    with pytest.raises(TypeError):
        canonical(3)
    with pytest.raises(ValueError):
        bound(0)


def test_the_python_string_table_keeps_the_objects_the_c_table_keeps() -> None:
    """The same calls on both (equal texts as other objects, bounds, full tables): each returns the object of the
    same earlier call, keeps as many texts, and raises the same errors."""
    import random

    from mastwatch.collector.normalize import _strings_py
    from tests.builds import extension

    c = extension("mastwatch.collector.normalize._strings")
    rng = random.Random(47)
    words = ["search", "chat", "gpt-4.1", "", "é", "😀", "kubectl", "a" * 300] + [f"tool {i}" for i in range(40)]
    calls: list[tuple[str, Any]] = []
    for _ in range(20_000):
        pick = rng.random()
        if pick < 0.002:
            calls.append(("bound", rng.choice([1, 2, 7, 30, 10_000])))
        elif pick < 0.004:
            calls.append(("bound", rng.choice([0, -1, 2**63, "3", 2.0])))
        elif pick < 0.006:
            calls.append(("canonical", rng.choice([3, None, b"x", ["x"]])))
        else:
            word = rng.choice(words)
            calls.append(("canonical", (word + " ")[:-1] if rng.random() < 0.5 else word))  # often another object
    try:
        for module in (c, _strings_py):
            module.bound(10_000)
        seen: dict[Any, list[Any]] = {c: [], _strings_py: []}  # each call's argument, by call
        for i, (function, argument) in enumerate(calls):
            results = []
            for module in (c, _strings_py):
                result = _outcome(getattr(module, function), argument)
                if function == "canonical" and type(result) is str:  # which call's argument it is
                    result = next((j for j in range(i, -1, -1) if j < len(seen[module]) and
                                   seen[module][j] is result), "none") if result is not argument else i
                seen[module].append(argument)
                results.append((result, module.kept()))
            assert results[0] == results[1], (i, function, argument)
    finally:
        c.bound(10_000)
        _strings_py.bound(10_000)
