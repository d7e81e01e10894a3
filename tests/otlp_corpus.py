"""Turn the recorded agent runs in ``tests/data`` into OTLP trace export requests.

Every converter is a pure function of one source file and returns
``(run_id, ExportTraceServiceRequest)`` pairs, one per trace.

* tau2 and SWE-agent runs are not spans yet: they are rendered as an instrumentation
  following the OpenTelemetry GenAI semantic conventions (v1.41 names) would emit them,
  ``invoke_agent`` root, ``chat`` CLIENT spans, ``execute_tool`` INTERNAL spans.
  ``content=False`` leaves out the opt-in content attributes, as instrumentations do
  by default.
* Langfuse exports, any-agent traces and the OpenInference/Vercel fixtures already are
  spans: they are rebuilt with their original ids, times, attributes, resource and scope.

Ids the source lacks are derived from the run id with SHA-256, so output is stable.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

DATA_DIR = Path(__file__).parent / "data"

# Opt-in content attributes of the GenAI semantic conventions.
CONTENT_ATTRIBUTES = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
)

INTERNAL = Span.SpanKind.SPAN_KIND_INTERNAL
CLIENT = Span.SpanKind.SPAN_KIND_CLIENT
STATUS_UNSET = Status.StatusCode.STATUS_CODE_UNSET
STATUS_OK = Status.StatusCode.STATUS_CODE_OK
STATUS_ERROR = Status.StatusCode.STATUS_CODE_ERROR

_MS = 1_000_000  # nanoseconds per millisecond
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_SWE_BASE_NS = 1_704_067_200 * 1_000_000_000  # 2024-01-01T00:00:00Z, .traj files have no clock
_HEX = re.compile(r"[0-9a-fA-F]+")
_FRACTION = re.compile(r"\.(\d+)")
_INT64 = range(-(2**63), 2**63)

RunRequest = tuple[str, ExportTraceServiceRequest]


# --- ids, values, time ----------------------------------------------------------------


def derive_id(*parts: object, size: int) -> bytes:
    """Return a deterministic non-zero id of ``size`` bytes derived from ``parts``."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:size]
    return digest if any(digest) else digest[:-1] + b"\x01"


def _hex_id(value: object, size: int, *salt: object) -> bytes:
    """Decode a hex id of the right length, else derive one from ``value``."""
    if isinstance(value, str) and len(value) == 2 * size and _HEX.fullmatch(value):
        raw = bytes.fromhex(value)
        if any(raw):
            return raw
    return derive_id(*salt, value, size=size)


def _int_id(value: int, size: int) -> bytes:
    """Encode a decimal (any-agent) id as a big-endian id of ``size`` bytes."""
    return value.to_bytes(size, "big")


def any_value(value: Any) -> AnyValue:
    """Convert a JSON-like value to an OTLP ``AnyValue``; dicts become JSON strings."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value) if value in _INT64 else AnyValue(string_value=str(value))
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, list | tuple) and all(isinstance(v, str | int | float | bool) for v in value):
        return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))
    return AnyValue(string_value=_json(value))


def attributes(values: Mapping[str, Any]) -> list[KeyValue]:
    """Convert a mapping to OTLP attributes, skipping ``None`` values."""
    return [KeyValue(key=k, value=any_value(v)) for k, v in values.items() if v is not None]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _ns(moment: datetime) -> int:
    """Nanoseconds since the epoch, exactly (no float rounding)."""
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def _iso_ns(text: str, offset_s: int = 0) -> int:
    """Parse an ISO timestamp; naive ones are local time ``offset_s`` seconds east of UTC."""
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text.replace("Z", "+00:00"))
    moment = datetime.fromisoformat(text)  # Python 3.10 needs exactly 6 fraction digits
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc) - timedelta(seconds=offset_s)
    return _ns(moment)


# --- span and request assembly ----------------------------------------------------------


def _span(
    trace_id: bytes,
    span_id: bytes,
    parent_id: bytes,
    name: str,
    kind: Span.SpanKind.ValueType,
    start: int,
    end: int,
    attrs: Mapping[str, Any],
    status: tuple[Status.StatusCode.ValueType, str] = (STATUS_UNSET, ""),
    events: Iterable[Span.Event] = (),
) -> Span:
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=name,
        kind=kind,
        start_time_unix_nano=start,
        end_time_unix_nano=max(start, end),
        attributes=attributes(attrs),
        status=Status(code=status[0], message=status[1]),
        events=list(events),
    )


Scope = tuple[str, str, Mapping[str, Any]]


def assemble(items: Iterable[tuple[Mapping[str, Any], Scope, Span]]) -> ExportTraceServiceRequest:
    """Group ``(resource attributes, scope, span)`` triples into one export request."""
    groups: dict[str, dict[str, tuple[Scope, list[Span]]]] = {}
    resources: dict[str, Mapping[str, Any]] = {}
    for resource, scope, span in items:
        rkey = _json(sorted(resource.items()))
        resources.setdefault(rkey, resource)
        bucket = groups.setdefault(rkey, {}).setdefault(_json(scope), (scope, []))
        bucket[1].append(span)
    request = ExportTraceServiceRequest()
    for rkey, scopes in groups.items():
        resource_spans = ResourceSpans(resource=Resource(attributes=attributes(resources[rkey])))
        for (name, version, scope_attrs), spans in scopes.values():
            scope = InstrumentationScope(name=name, version=version, attributes=attributes(scope_attrs))
            resource_spans.scope_spans.append(ScopeSpans(scope=scope, spans=spans))
        request.resource_spans.append(resource_spans)
    return request


class _Trace:
    """Deterministic ids and span list of one synthesised trace."""

    def __init__(self, source: str, run_id: str) -> None:
        self.trace_id = derive_id(source, run_id, size=16)
        self.spans: list[Span] = []
        self._count = 0

    def new_id(self) -> bytes:
        self._count += 1
        return derive_id(self.trace_id.hex(), self._count, size=8)

    def add(
        self,
        span_id: bytes,
        parent: bytes,
        name: str,
        kind: Span.SpanKind.ValueType,
        start: int,
        end: int,
        attrs: Mapping[str, Any],
        content: bool,
        status: tuple[Status.StatusCode.ValueType, str] = (STATUS_UNSET, ""),
    ) -> None:
        if not content:
            attrs = {k: v for k, v in attrs.items() if k not in CONTENT_ATTRIBUTES}
        self.spans.append(_span(self.trace_id, span_id, parent, name, kind, start, end, attrs, status))

    def request(self, service: str, scope: str) -> ExportTraceServiceRequest:
        resource = {"service.name": service}
        return assemble((resource, (scope, "", {}), span) for span in self.spans)


def _text(content: Any) -> str:
    """Flatten message content that may be a string or a list of text blocks."""
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
    return "" if content is None else str(content)


def _system_instructions(text: str | None) -> str | None:
    return _json([{"type": "text", "content": text}]) if text else None


# --- tau2-bench -------------------------------------------------------------------------


def _tau2_utc_offset(data: Mapping[str, Any]) -> int:
    """Seconds east of UTC of tau2's naive local timestamps, from OpenAI ``created`` times."""
    for sim in data.get("simulations", []):
        for msg in sim.get("messages", []):
            created = (msg.get("raw_data") or {}).get("created")
            if created and msg.get("timestamp"):
                naive_s = _iso_ns(msg["timestamp"]) // 1_000_000_000
                return round((naive_s - created) / 900) * 900
    return 0


def tau2_requests(path: str | Path, content: bool = True) -> list[RunRequest]:
    """One trace per simulation of a tau2-bench ``results.json`` (run id = simulation id).

    Only the agent's own LLM calls and tool executions become spans; user-simulator turns,
    the canned greeting and pre-seeded history appear only as message content.
    """
    data = json.loads(Path(path).read_text())
    env = data["info"]["environment_info"]
    agent = data["info"]["agent_info"]
    provider, _, model = agent["llm"].rpartition("/")
    offset = _tau2_utc_offset(data)
    ctx = {
        "domain": env["domain_name"],
        "policy": env.get("policy"),
        "provider": provider or "openai",
        "model": model,
        "temperature": (agent.get("llm_args") or {}).get("temperature"),
        "offset": offset,
        "file_start": _iso_ns(data["timestamp"], offset),
    }
    return [(sim["id"], _tau2_trace(sim, ctx, content)) for sim in data["simulations"]]


def _tau2_trace(sim: Mapping[str, Any], ctx: Mapping[str, Any], content: bool) -> ExportTraceServiceRequest:
    trace = _Trace("tau2", sim["id"])
    agent_name = f"tau2-{ctx['domain']}-agent"
    system = _system_instructions(ctx["policy"])
    root_id = trace.new_id()
    messages = sim["messages"]
    results = {m["id"]: m for m in messages if m["role"] == "tool" and m.get("requestor") != "user"}

    def when(msg: Mapping[str, Any], fallback: int) -> int:
        return _iso_ns(msg["timestamp"], ctx["offset"]) if msg.get("timestamp") else fallback

    root_start = _iso_ns(sim["start_time"], ctx["offset"]) if sim.get("start_time") else ctx["file_start"]
    cursor = root_start  # end of the latest thing that happened
    history: list[dict[str, Any]] = []
    for msg in messages:
        role = msg["role"]
        if role == "user":
            cursor = max(cursor, when(msg, cursor + 300 * _MS))
            if _text(msg.get("content")):
                history.append({"role": "user", "parts": [_text_part(msg["content"])]})
            continue
        if role == "tool":
            if msg.get("requestor") != "user":
                response = {"type": "tool_call_response", "id": msg["id"], "response": msg["content"]}
                history.append({"role": "tool", "parts": [response]})
            continue
        calls = msg.get("tool_calls") or []
        finish = "tool_call" if calls else "stop"
        parts = [_text_part(msg["content"])] if _text(msg.get("content")) else []
        parts += [{"type": "tool_call", "id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in calls]
        usage = msg.get("usage")
        raw = msg.get("raw_data") or {}
        if not usage and not raw:  # canned greeting or seeded history: no LLM call
            cursor = max(cursor, when(msg, cursor))
            history.append({"role": "assistant", "parts": parts})
            continue
        end = max(cursor, when(msg, cursor + 400 * _MS))
        start = max(cursor, end - round((msg.get("generation_time_seconds") or 0.4) * 1e9))
        cached = ((raw.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
        trace.add(
            trace.new_id(),
            root_id,
            f"chat {ctx['model']}",
            CLIENT,
            start,
            end,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": ctx["provider"],
                "gen_ai.request.model": ctx["model"],
                "gen_ai.request.temperature": ctx["temperature"],
                "gen_ai.conversation.id": sim["id"],
                "gen_ai.response.id": raw.get("id"),
                "gen_ai.response.model": raw.get("model"),
                "gen_ai.response.finish_reasons": [finish],
                "gen_ai.usage.input_tokens": (usage or {}).get("prompt_tokens"),
                "gen_ai.usage.output_tokens": (usage or {}).get("completion_tokens"),
                "gen_ai.usage.cache_read.input_tokens": cached,
                "gen_ai.system_instructions": system,
                "gen_ai.input.messages": _json(history),
                "gen_ai.output.messages": _json([{"role": "assistant", "parts": parts, "finish_reason": finish}]),
            },
            content,
        )
        history.append({"role": "assistant", "parts": parts})
        cursor = end
        for call in calls:
            result = results.get(call["id"])
            tool_end = max(cursor, when(result, cursor + 200 * _MS) if result else cursor + _MS)
            status = (STATUS_UNSET, "")
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call["name"],
                "gen_ai.tool.call.id": call["id"],
                "gen_ai.tool.type": "function",
                "gen_ai.agent.name": agent_name,
                "gen_ai.tool.call.arguments": _json(call["arguments"]),
                "gen_ai.tool.call.result": result["content"] if result else None,
            }
            if result and result.get("error"):
                attrs["error.type"] = "tool_error"
                status = (STATUS_ERROR, _text(result["content"]) if content else "tool_error")
            trace.add(
                trace.new_id(),
                root_id,
                f"execute_tool {call['name']}",
                INTERNAL,
                cursor,
                tool_end,
                attrs,
                content,
                status,
            )
            cursor = tool_end
    root_end = _iso_ns(sim["end_time"], ctx["offset"]) if sim.get("end_time") else cursor
    trace.add(
        root_id,
        b"",
        f"invoke_agent {agent_name}",
        INTERNAL,
        root_start,
        max(root_end, cursor),
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent_name,
            "gen_ai.conversation.id": sim["id"],
            "gen_ai.provider.name": ctx["provider"],
            "gen_ai.request.model": ctx["model"],
            "gen_ai.system_instructions": system,
        },
        content,
    )
    trace.spans.insert(0, trace.spans.pop())
    return trace.request(f"tau2-{ctx['domain']}", "tau2")


def _text_part(content: Any) -> dict[str, str]:
    return {"type": "text", "content": _text(content)}


# --- SWE-agent --------------------------------------------------------------------------


def _swe_model(data: Mapping[str, Any]) -> str:
    replay = data.get("replay_config")
    if isinstance(replay, str):
        replay = json.loads(replay)
    model = ((replay or {}).get("agent") or {}).get("model") or {}
    name = (model.get("name") or model.get("model_name")) if isinstance(model, dict) else None
    return str(name or "gpt-4")


def _spread(total: int, n: int) -> list[int]:
    """Split ``total`` into ``n`` near-equal integers summing to ``total``."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)] if n else []


def swe_agent_requests(path: str | Path, content: bool = True) -> list[RunRequest]:
    """One trace per SWE-agent ``.traj`` file (run id = file stem).

    Each trajectory step is a ``chat`` span (output: the thought plus a tool call) followed
    by an ``execute_tool`` span named after the action's first word. Token totals of
    ``info.model_stats`` are spread evenly over the chat spans; all-zero stats (replayed
    demonstrations) are treated as unknown and omitted. The file has no clock, so times
    are synthesised from a fixed base.
    """
    path = Path(path)
    data = json.loads(path.read_text())
    run_id = path.stem
    trace = _Trace("swe-agent", run_id)
    model = _swe_model(data)
    steps = data["trajectory"]
    history = data.get("history") or []
    stats = (data.get("info") or {}).get("model_stats") or {}
    sent, received = int(stats.get("tokens_sent") or 0), int(stats.get("tokens_received") or 0)
    inputs, outputs = _spread(sent, len(steps)), _spread(received, len(steps))
    has_tokens = bool(sent or received)
    system = _system_instructions(next((_text(m["content"]) for m in history if m.get("role") == "system"), None))
    first_reply = next((i for i, m in enumerate(history) if m.get("role") == "assistant"), len(history))
    messages: list[dict[str, Any]] = [
        {"role": "user", "parts": [_text_part(m["content"])]} for m in history[:first_reply] if m.get("role") == "user"
    ]
    call_ids = [c["id"] for m in history if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    root_id = trace.new_id()
    root_start = _SWE_BASE_NS + int.from_bytes(trace.trace_id[:3], "big") * 1000 * _MS
    cursor = root_start + 5 * _MS
    for i, step in enumerate(steps):
        action = step.get("action") or ""
        tool = action.split(maxsplit=1)[0] if action.strip() else "noop"
        call_id = call_ids[i] if i < len(call_ids) else "call_" + derive_id(run_id, i, size=12).hex()
        thought = step.get("thought") or step.get("response") or ""
        parts: list[dict[str, Any]] = [_text_part(thought)] if thought else []
        parts.append({"type": "tool_call", "id": call_id, "name": tool, "arguments": {"command": action}})
        chat_end = cursor + 600 * _MS
        trace.add(
            trace.new_id(),
            root_id,
            f"chat {model}",
            CLIENT,
            cursor,
            chat_end,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": model,
                "gen_ai.conversation.id": run_id,
                "gen_ai.response.finish_reasons": ["tool_call"],
                "gen_ai.usage.input_tokens": inputs[i] if has_tokens else None,
                "gen_ai.usage.output_tokens": outputs[i] if has_tokens else None,
                "gen_ai.system_instructions": system,
                "gen_ai.input.messages": _json(messages),
                "gen_ai.output.messages": _json([{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}]),
            },
            content,
        )
        tool_start = chat_end + 10 * _MS
        tool_end = tool_start + round((step.get("execution_time") or 0.3) * 1e9)
        trace.add(
            trace.new_id(),
            root_id,
            f"execute_tool {tool}",
            INTERNAL,
            tool_start,
            tool_end,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function",
                "gen_ai.agent.name": "swe-agent",
                "gen_ai.tool.call.arguments": _json({"command": action}),
                "gen_ai.tool.call.result": step.get("observation"),
            },
            content,
        )
        messages.append({"role": "assistant", "parts": parts})
        response = {"type": "tool_call_response", "id": call_id, "response": step.get("observation")}
        messages.append({"role": "tool", "parts": [response]})
        cursor = tool_end + 50 * _MS
    trace.add(
        root_id,
        b"",
        "invoke_agent swe-agent",
        INTERNAL,
        root_start,
        cursor,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "swe-agent",
            "gen_ai.conversation.id": run_id,
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "gen_ai.system_instructions": system,
        },
        content,
    )
    trace.spans.insert(0, trace.spans.pop())
    return [(run_id, trace.request("swe-agent", "swe-agent"))]


# --- Langfuse export --------------------------------------------------------------------


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _langfuse_value(value: Any) -> Any:
    """Undo Langfuse's parsing of JSON-string attributes: only flat lists stay arrays."""
    if isinstance(value, list) and not all(isinstance(v, str | int | float | bool) for v in value):
        return _json(value)
    return value


def _langfuse_sdk_attributes(
    obs: Mapping[str, Any], meta: Mapping[str, Any], trace: Mapping[str, Any]
) -> dict[str, Any]:
    """Attributes the Langfuse SDK sets on spans it creates itself (no ``attributes`` kept)."""

    def as_str(value: Any) -> Any:
        return value if value is None or isinstance(value, str) else _json(value)

    attrs: dict[str, Any] = {
        "langfuse.observation.type": str(obs.get("type") or "span").lower(),
        "langfuse.observation.input": as_str(obs.get("input")),
        "langfuse.observation.output": as_str(obs.get("output")),
        "langfuse.observation.model.name": obs.get("model"),
        "langfuse.observation.model.parameters": as_str(obs.get("modelParameters") or None),
        "langfuse.observation.usage_details": as_str(obs.get("usageDetails") or None),
        "langfuse.observation.completion_start_time": obs.get("completionStartTime"),
        "langfuse.observation.status_message": obs.get("statusMessage"),
    }
    if obs.get("level") not in (None, "DEFAULT"):
        attrs["langfuse.observation.level"] = obs["level"]
    if obs.get("environment") not in (None, "default"):
        attrs["langfuse.environment"] = obs["environment"]
    for key, value in meta.items():
        if key not in ("resourceAttributes", "scope") and value is not None:
            attrs[f"langfuse.observation.metadata.{key}"] = (
                value if isinstance(value, str | int | float | bool) else _json(value)
            )
    if not obs.get("parentObservationId"):
        attrs.update(
            {
                "langfuse.trace.name": trace.get("name"),
                "user.id": trace.get("userId"),
                "session.id": trace.get("sessionId"),
                "langfuse.trace.tags": trace.get("tags") or None,
            }
        )
    return attrs


def langfuse_requests(path: str | Path) -> list[RunRequest]:
    """Rebuild the original OTel spans of a Langfuse ``{trace, observations}`` export.

    Attributes, resource attributes and scope come from ``observations[].metadata``, with
    Langfuse's stored value types (numbers are often strings there). Spans the Langfuse
    SDK created itself kept no attributes; they get the SDK's ``langfuse.*`` attributes.
    Span kind is not exported: generations become CLIENT, the rest INTERNAL.
    """
    path = Path(path)
    run_id = path.name.removesuffix(".json").removesuffix(".trace")
    data = json.loads(path.read_text())
    trace = data["trace"]
    items = []
    for obs in data["observations"]:
        trace_id = _hex_id(obs.get("traceId") or trace["id"], 16, "langfuse", run_id)
        meta = _maybe_json(obs.get("metadata")) or {}
        meta = meta if isinstance(meta, dict) else {}
        if "attributes" in meta:
            attrs = {k: _langfuse_value(v) for k, v in (meta["attributes"] or {}).items()}
        else:
            attrs = _langfuse_sdk_attributes(obs, meta, trace)
        scope = meta.get("scope") or {}
        parent = obs.get("parentObservationId")
        start = _iso_ns(obs["startTime"])
        end = _iso_ns(obs["endTime"]) if obs.get("endTime") else start
        status = (STATUS_ERROR, obs.get("statusMessage") or "") if obs.get("level") == "ERROR" else (STATUS_UNSET, "")
        span = _span(
            trace_id,
            _hex_id(obs["id"], 8, "langfuse", run_id),
            _hex_id(parent, 8, "langfuse", run_id) if parent else b"",
            obs.get("name") or "",
            CLIENT if obs.get("type") == "GENERATION" else INTERNAL,
            start,
            end,
            attrs,
            status,
        )
        scope_key = (scope.get("name") or "", scope.get("version") or "", scope.get("attributes") or {})
        items.append((meta.get("resourceAttributes") or {}, scope_key, span))
    return [(run_id, assemble(items))]


# --- any-agent --------------------------------------------------------------------------

_KINDS = {
    "internal": INTERNAL,
    "client": CLIENT,
    "server": Span.SpanKind.SPAN_KIND_SERVER,
    "producer": Span.SpanKind.SPAN_KIND_PRODUCER,
    "consumer": Span.SpanKind.SPAN_KIND_CONSUMER,
}
_STATUSES = {"unset": STATUS_UNSET, "ok": STATUS_OK, "error": STATUS_ERROR}


def any_agent_requests(path: str | Path) -> list[RunRequest]:
    """Rebuild an any-agent ``{spans, final_output}`` trace (decimal ids → 16/8-byte ids).

    Scope is any-agent's tracer ``any_agent`` with the version its agent span records.
    """
    path = Path(path)
    spans = json.loads(path.read_text())["spans"]
    version = next(
        (str(s["attributes"]["any_agent.version"]) for s in spans if "any_agent.version" in s.get("attributes", {})),
        "",
    )
    items = []
    for raw in spans:
        ctx, parent = raw["context"], raw.get("parent") or {}
        status = raw.get("status") or {}
        events = [
            Span.Event(
                name=e.get("name", ""),
                time_unix_nano=int(e.get("timestamp") or raw["start_time"]),
                attributes=attributes(e.get("attributes") or {}),
            )
            for e in raw.get("events") or []
        ]
        span = _span(
            _int_id(ctx["trace_id"], 16),
            _int_id(ctx["span_id"], 8),
            _int_id(parent["span_id"], 8) if parent.get("span_id") else b"",
            raw["name"],
            _KINDS.get(str(raw.get("kind", "")).lower(), INTERNAL),
            int(raw["start_time"]),
            int(raw["end_time"]),
            raw.get("attributes") or {},
            (
                _STATUSES.get(str(status.get("status_code")).lower(), STATUS_UNSET),
                status.get("description") or "",
            ),
            events,
        )
        resource = (raw.get("resource") or {}).get("attributes") or {}
        items.append((resource, ("any_agent", version, {}), span))
    return [(path.stem, assemble(items))]


# --- OpenInference Vercel AI SDK fixtures -----------------------------------------------

_VERCEL_RESOURCE = {"service.name": "unknown_service:node", "telemetry.sdk.language": "nodejs"}


def _hrtime(value: list[int]) -> int:
    return int(value[0]) * 1_000_000_000 + int(value[1])


def openinference_vercel_requests(path: str | Path) -> list[RunRequest]:
    """Rebuild Vercel AI SDK spans captured by the OpenInference fixtures.

    Accepts a list of spans or a ``{operation: [spans]}`` mapping; spans are grouped by
    trace id (run id ``<functionId>/<span name>``). The capture kept no parent ids, kind,
    resource or scope: spans are INTERNAL under the AI SDK's tracer ``ai``.
    """
    data = json.loads(Path(path).read_text())
    raw_spans = [s for group in data.values() for s in group] if isinstance(data, dict) else data
    traces: dict[str, list[Span]] = {}
    names: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    for raw in raw_spans:
        context = raw["spanContext"]
        key = (context["traceId"], context["spanId"])
        if key in seen:
            continue
        seen.add(key)
        events = [
            Span.Event(
                name=e["name"],
                time_unix_nano=_hrtime(e["time"]),
                attributes=attributes(e.get("attributes") or {}),
            )
            for e in raw.get("events") or []
        ]
        parent = raw.get("parentSpanId") or (raw.get("parentSpanContext") or {}).get("spanId")
        status = raw.get("status") or {}
        span = _span(
            _hex_id(context["traceId"], 16, "vercel"),
            _hex_id(context["spanId"], 8, "vercel"),
            _hex_id(parent, 8, "vercel") if parent else b"",
            raw["name"],
            INTERNAL,
            _hrtime(raw["startTime"]),
            _hrtime(raw["endTime"]),
            raw.get("attributes") or {},
            (int(status.get("code", 0)), status.get("message") or ""),
            events,
        )
        traces.setdefault(context["traceId"], []).append(span)
        if not parent:
            function = (raw.get("attributes") or {}).get("ai.telemetry.functionId")
            names[context["traceId"]] = f"{function}/{raw['name']}" if function else context["traceId"]
    return [
        (names.get(tid, tid), assemble((_VERCEL_RESOURCE, ("ai", "", {}), s) for s in spans))
        for tid, spans in traces.items()
    ]


# --- whole corpus and OTLP/JSON -----------------------------------------------------------


def corpus(data_dir: Path = DATA_DIR) -> list[tuple[str, str, ExportTraceServiceRequest]]:
    """``(source, run_id, request)`` for every run in ``tests/data``.

    The OpenInference folder is read through ``all-spans.json`` only: the per-operation
    files repeat its spans and ``capture-results.json`` holds no spans.
    """
    sources: list[tuple[str, Callable[[Path], list[RunRequest]], Iterable[Path]]] = [
        ("tau2", tau2_requests, sorted((data_dir / "runs/tau2").glob("*.json"))),
        ("swe-agent", swe_agent_requests, sorted((data_dir / "runs/swe-agent").glob("*.traj"))),
        (
            "langfuse",
            langfuse_requests,
            sorted((data_dir / "spans/langfuse-framework-traces").glob("*.trace.json")),
        ),
        ("any-agent", any_agent_requests, sorted((data_dir / "spans/any-agent").glob("*.json"))),
        (
            "openinference-vercel",
            openinference_vercel_requests,
            [data_dir / "spans/openinference-vercel/all-spans.json"],
        ),
    ]
    return [
        (source, run_id, request)
        for source, convert, files in sources
        for file in files
        for run_id, request in convert(file)
    ]


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON object of a request: camelCase keys, enum ints, hex trace and span ids."""
    body = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in body.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _hexify(span)
                for link in span.get("links", []):
                    _hexify(link)
    return body


def _hexify(obj: dict[str, Any]) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if key in obj:
            obj[key] = base64.b64decode(obj[key]).hex()


def to_otlp_json_line(request: ExportTraceServiceRequest) -> str:
    """One line as the Collector ``file`` exporter writes it (OTLP/JSON)."""
    return json.dumps(to_otlp_json(request), ensure_ascii=False, separators=(",", ":"))


# --- runs with a recorded outcome -----------------------------------------------------------


def tau2_outcomes(path: str | Path) -> dict[str, dict[str, Any]]:
    """Run id -> what tau2-bench recorded of a simulation: ``domain``, ``agent`` (the agent's model, with
    ``(no user)`` when it worked alone), ``task_id`` and ``reward`` (1 = the task was done right)."""
    data = json.loads(Path(path).read_text())
    info = data["info"]
    agent = info["agent_info"]["llm"]
    if (info.get("user_info") or {}).get("implementation") == "dummy_user":
        agent += " (no user)"
    domain = info["environment_info"]["domain_name"]
    return {
        sim["id"]: {"domain": domain, "agent": agent, "task_id": str(sim["task_id"]),
                    "reward": float((sim.get("reward_info") or {}).get("reward") or 0.0)}
        for sim in data["simulations"]
    }


def outcome_corpus(data_dir: Path = DATA_DIR) -> list[tuple[str, str, ExportTraceServiceRequest, dict[str, Any]]]:
    """``(source, run_id, request, outcome)`` for every run in ``tests/data`` that carries an outcome: the
    tau2-bench results (``runs/tau2-bench``) and the smaller tau2 runs (``runs/tau2``)."""
    out = []
    for source in ("tau2-bench", "tau2"):
        for path in sorted((data_dir / "runs" / source).glob("*.json")):
            outcomes = tau2_outcomes(path)
            out += [(source, run_id, request, outcomes[run_id]) for run_id, request in tau2_requests(path)]
    return out
