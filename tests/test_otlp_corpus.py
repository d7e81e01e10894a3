"""Checks of the OTLP requests built from the recorded agent runs in ``tests/data``."""

from __future__ import annotations

import base64
import json
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.otlp_corpus import (
    CONTENT_ATTRIBUTES,
    DATA_DIR,
    any_agent_requests,
    corpus,
    langfuse_requests,
    openinference_vercel_requests,
    swe_agent_requests,
    tau2_requests,
    to_otlp_json_line,
)

TAU2_FILES = sorted((DATA_DIR / "runs/tau2").glob("*.json"))
SWE_FILES = sorted((DATA_DIR / "runs/swe-agent").glob("*.traj"))
SYNTHESISED = {"tau2", "swe-agent"}

# (traces, spans) per source; changes when the data or the rendering changes.
EXPECTED_COUNTS = {
    "tau2": (18, 103),
    "swe-agent": (12, 266),
    "langfuse": (20, 138),
    "any-agent": (7, 50),
    "openinference-vercel": (10, 10),
}
# Traces whose recorded spans name parents that were never exported.
DANGLING_PARENTS = {
    ("langfuse", "csharp-agent-with-gemini-2026-03-09"),  # root's parent is an unexported server span
    ("any-agent", "GOOGLE_trace"),  # tool/LLM spans point at ADK spans any-agent dropped
}
# Recorded spans that already start or end outside their parent in the source.
SOURCE_TIME_ANOMALIES = {("langfuse", "claude-agent-2025-12-22", "claude.assistant.turn")}


@cache
def _corpus() -> tuple[tuple[str, str, ExportTraceServiceRequest], ...]:
    return tuple(corpus())


def _spans(request: ExportTraceServiceRequest) -> list[Span]:
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def _attrs(span: Span) -> dict[str, Any]:
    return {kv.key: json_format.MessageToDict(kv.value) for kv in span.attributes}


def _int_attr(span: Span, key: str) -> int:
    return sum(kv.value.int_value for kv in span.attributes if kv.key == key)


def _is_content(key: str) -> bool:
    return key in CONTENT_ATTRIBUTES or (key.startswith("gen_ai.") and key.endswith(".messages"))


def _entries(sources: set[str] | None = None) -> list[Any]:
    return [
        pytest.param(entry, id=f"{entry[0]}:{entry[1]}")
        for entry in _corpus()
        if sources is None or entry[0] in sources
    ]


ALL = _entries()


def test_corpus_counts() -> None:
    counts: dict[str, list[int]] = {}
    for source, _, request in _corpus():
        traces_spans = counts.setdefault(source, [0, 0])
        traces_spans[0] += 1
        traces_spans[1] += len(_spans(request))
    assert {k: tuple(v) for k, v in counts.items()} == EXPECTED_COUNTS
    run_ids = Counter((source, run_id) for source, run_id, _ in _corpus())
    assert max(run_ids.values()) == 1


def test_corpus_is_deterministic() -> None:
    again = corpus()
    assert [(s, r, q.SerializeToString(deterministic=True)) for s, r, q in again] == [
        (s, r, q.SerializeToString(deterministic=True)) for s, r, q in _corpus()
    ]


@pytest.mark.parametrize("entry", ALL)
def test_ids_have_otlp_sizes(entry: tuple[str, str, ExportTraceServiceRequest]) -> None:
    _, _, request = entry
    spans = _spans(request)
    assert spans
    assert {len(s.trace_id) for s in spans} == {16}
    assert len({s.trace_id for s in spans}) == 1
    assert {len(s.span_id) for s in spans} == {8}
    assert {len(s.parent_span_id) for s in spans} <= {0, 8}
    assert all(any(s.trace_id) and any(s.span_id) for s in spans)
    assert len({s.span_id for s in spans}) == len(spans)
    assert all(s.end_time_unix_nano >= s.start_time_unix_nano > 0 for s in spans)


@pytest.mark.parametrize("entry", ALL)
def test_exactly_one_root(entry: tuple[str, str, ExportTraceServiceRequest]) -> None:
    source, run_id, request = entry
    spans = _spans(request)
    ids = {s.span_id for s in spans}
    dangling = [s for s in spans if s.parent_span_id and s.parent_span_id not in ids]
    assert bool(dangling) == ((source, run_id) in DANGLING_PARENTS)
    roots = [s for s in spans if not s.parent_span_id]
    if not roots:  # the trace's real root lives in another service: one local root
        roots = dangling
    assert len(roots) == 1


@pytest.mark.parametrize("entry", ALL)
def test_children_within_parent_time(entry: tuple[str, str, ExportTraceServiceRequest]) -> None:
    source, run_id, request = entry
    spans = _spans(request)
    by_id = {s.span_id: s for s in spans}
    outside = set()
    for span in spans:
        parent = by_id.get(span.parent_span_id)
        if parent is None:
            continue
        if not parent.start_time_unix_nano <= span.start_time_unix_nano <= span.end_time_unix_nano:
            outside.add((source, run_id, span.name))
        if span.end_time_unix_nano > parent.end_time_unix_nano:
            outside.add((source, run_id, span.name))
    assert outside == {a for a in SOURCE_TIME_ANOMALIES if a[:2] == (source, run_id)}


@pytest.mark.parametrize("entry", _entries(SYNTHESISED))
def test_synthesised_traces_follow_genai_conventions(entry: tuple[str, str, ExportTraceServiceRequest]) -> None:
    _, _, request = entry
    spans = _spans(request)
    root = spans[0]
    assert not root.parent_span_id and root.name.startswith("invoke_agent ")
    assert root.end_time_unix_nano == max(s.end_time_unix_nano for s in spans)
    previous_end = 0
    for span in spans[1:]:
        attrs = _attrs(span)
        operation = attrs["gen_ai.operation.name"]["stringValue"]
        assert span.parent_span_id == root.span_id
        assert span.start_time_unix_nano >= previous_end  # sequential agent loop
        previous_end = span.end_time_unix_nano
        if operation == "chat":
            assert span.kind == Span.SpanKind.SPAN_KIND_CLIENT
            assert span.name == "chat " + attrs["gen_ai.request.model"]["stringValue"]
            output = json.loads(attrs["gen_ai.output.messages"]["stringValue"])
            assert output[0]["role"] == "assistant" and output[0]["finish_reason"] in ("stop", "tool_call")
            json.loads(attrs["gen_ai.input.messages"]["stringValue"])
        else:
            assert operation == "execute_tool"
            assert span.kind == Span.SpanKind.SPAN_KIND_INTERNAL
            assert span.name == "execute_tool " + attrs["gen_ai.tool.name"]["stringValue"]
            assert attrs["gen_ai.tool.type"] == {"stringValue": "function"}
            json.loads(attrs["gen_ai.tool.call.arguments"]["stringValue"])


@pytest.mark.parametrize("path", TAU2_FILES, ids=lambda p: p.stem)
def test_tau2_tokens_and_spans_match_source(path: Path) -> None:
    data = json.loads(path.read_text())
    by_sim = dict(tau2_requests(path))
    assert list(by_sim) == [sim["id"] for sim in data["simulations"]]
    for sim in data["simulations"]:
        agent_msgs = [m for m in sim["messages"] if m["role"] == "assistant" and m.get("usage")]
        spans = _spans(by_sim[sim["id"]])
        chats = [s for s in spans if s.name.startswith("chat ")]
        tools = [s for s in spans if s.name.startswith("execute_tool ")]
        assert len(chats) == len(agent_msgs)
        assert len(tools) == sum(len(m.get("tool_calls") or []) for m in agent_msgs)
        assert sum(_int_attr(s, "gen_ai.usage.output_tokens") for s in chats) == sum(
            m["usage"]["completion_tokens"] for m in agent_msgs
        )
        assert sum(_int_attr(s, "gen_ai.usage.input_tokens") for s in chats) == sum(
            m["usage"]["prompt_tokens"] for m in agent_msgs
        )


@pytest.mark.parametrize("path", SWE_FILES, ids=lambda p: p.stem)
def test_swe_agent_steps_match_source(path: Path) -> None:
    data = json.loads(path.read_text())
    [(_, request)] = swe_agent_requests(path)
    spans = _spans(request)
    tools = [_attrs(s) for s in spans if s.name.startswith("execute_tool ")]
    assert [t["gen_ai.tool.name"]["stringValue"] for t in tools] == [
        step["action"].split()[0] for step in data["trajectory"]
    ]
    assert [t["gen_ai.tool.call.result"]["stringValue"] for t in tools] == [
        step["observation"] for step in data["trajectory"]
    ]
    chats = [s for s in spans if s.name.startswith("chat ")]
    stats = data["info"]["model_stats"]
    assert sum(_int_attr(s, "gen_ai.usage.output_tokens") for s in chats) == stats["tokens_received"]
    assert sum(_int_attr(s, "gen_ai.usage.input_tokens") for s in chats) == stats["tokens_sent"]


@pytest.mark.parametrize(
    ("convert", "path"),
    [(tau2_requests, p) for p in TAU2_FILES] + [(swe_agent_requests, p) for p in SWE_FILES],
    ids=lambda v: v.stem if isinstance(v, Path) else v.__name__,
)
def test_content_false_drops_opt_in_content(convert: Any, path: Path) -> None:
    with_content = [s for _, r in convert(path) for s in _spans(r)]
    without = [s for _, r in convert(path, content=False) for s in _spans(r)]
    assert any(_is_content(kv.key) for s in with_content for kv in s.attributes)
    assert not [kv.key for s in without for kv in s.attributes if _is_content(kv.key)]
    assert [(s.span_id, s.name, s.start_time_unix_nano) for s in without] == [
        (s.span_id, s.name, s.start_time_unix_nano) for s in with_content
    ]
    for full, bare in zip(with_content, without, strict=True):
        assert {k: v for k, v in _attrs(full).items() if not _is_content(k)} == _attrs(bare)


def test_recorded_spans_keep_source_ids_and_times() -> None:
    folder = DATA_DIR / "spans"
    for path in sorted((folder / "langfuse-framework-traces").glob("*.trace.json")):
        observations = json.loads(path.read_text())["observations"]
        [(_, request)] = langfuse_requests(path)
        spans = {s.span_id.hex(): s for s in _spans(request)}
        assert sorted(spans) == sorted(o["id"] for o in observations)
        for obs in observations:
            span = spans[obs["id"]]
            assert span.parent_span_id.hex() == (obs["parentObservationId"] or "")
            assert span.trace_id.hex() == obs["traceId"]
            assert span.name == obs["name"]
    for path in sorted((folder / "any-agent").glob("*.json")):
        raw_spans = json.loads(path.read_text())["spans"]
        [(_, request)] = any_agent_requests(path)
        spans = _spans(request)
        assert [int.from_bytes(s.span_id, "big") for s in spans] == [r["context"]["span_id"] for r in raw_spans]
        assert [int.from_bytes(s.trace_id, "big") for s in spans] == [r["context"]["trace_id"] for r in raw_spans]
        assert [(s.start_time_unix_nano, s.end_time_unix_nano) for s in spans] == [
            (r["start_time"], r["end_time"]) for r in raw_spans
        ]
    vercel = folder / "openinference-vercel"
    merged = openinference_vercel_requests(vercel / "all-spans.json")
    by_operation = openinference_vercel_requests(vercel / "spans-by-operation.json")
    assert sorted(r.SerializeToString(deterministic=True) for _, r in merged) == sorted(
        r.SerializeToString(deterministic=True) for _, r in by_operation
    )


def test_langfuse_attribute_types_survive() -> None:
    path = DATA_DIR / "spans/langfuse-framework-traces/pydantic-ai-tools-2025-12-04.trace.json"
    [(_, request)] = langfuse_requests(path)
    values = [kv.value for s in _spans(request) for kv in s.attributes if kv.key == "gen_ai.response.finish_reasons"]
    assert values and all(v.WhichOneof("value") == "array_value" for v in values)
    messages = [kv.value for s in _spans(request) for kv in s.attributes if kv.key == "pydantic_ai.all_messages"]
    assert messages and all(isinstance(json.loads(v.string_value), list) for v in messages)


@pytest.mark.parametrize("entry", ALL)
def test_otlp_json_line_round_trips(entry: tuple[str, str, ExportTraceServiceRequest]) -> None:
    _, _, request = entry
    line = to_otlp_json_line(request)
    assert "\n" not in line
    body = json.loads(line)
    spans = [span for rs in body["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    for parsed, original in zip(spans, _spans(request), strict=True):
        assert parsed["traceId"] == original.trace_id.hex() and len(parsed["traceId"]) == 32
        assert parsed["spanId"] == original.span_id.hex() and len(parsed["spanId"]) == 16
        assert parsed.get("parentSpanId", "") == original.parent_span_id.hex()
        assert isinstance(parsed["kind"], int)
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in parsed:
                parsed[key] = base64.b64encode(bytes.fromhex(parsed[key])).decode()
    assert json_format.ParseDict(body, ExportTraceServiceRequest()) == request
