"""Generated agent runs, labelled with the MAST modes they show: the corpus of `mastwatch eval --corpus scenarios`
(which loads this package from the checkout, as it loads the recorded runs) and of the tests.

One module per detector, `fm_1_3.py` for FM-1.3, holds its scenarios: the runs that show its mode and the
look-alikes that must not (`healthy.py`: runs showing none). Its `generate(tag, read, rargs, write, wargs, check)`
yields (name, modes, run) for one domain of `DOMAINS` (its tools and arguments); the name starts with the tag.

Each run is one OTLP trace as an OpenTelemetry GenAI instrumentation emits it (v1.41 names: an `invoke_agent`
root, `chat` model calls, `execute_tool` tool calls), with content attributes present (eval strips them for
`--content off`). Failures carry `error.type`, or only the exception event and ERROR status the OpenTelemetry SDK
records when an exception leaves a span (`raised`). Every mode the structural detectors cover has positive variants
and look-alike negatives: polling, retries after an error, confirmations, legitimate re-reads, long but healthy runs.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import pkgutil
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

MS = 1_000_000
START_NS = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z
ERROR = Status.StatusCode.STATUS_CODE_ERROR


@dataclass(frozen=True)
class Scenario:
    name: str
    modes: frozenset[str]
    request: ExportTraceServiceRequest


def raised(error_type: str, message: str) -> tuple[list[Span.Event], Status]:
    """What the OpenTelemetry Python SDK records on a span an exception leaves (`start_as_current_span`): an
    `exception` event (type, message, stack trace, escaped as the string "False") and status ERROR described
    as "Type: message"."""
    name = error_type.rpartition(".")[2]
    event = Span.Event(name="exception", attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in (
        ("exception.type", error_type), ("exception.message", message),
        ("exception.stacktrace", f"Traceback (most recent call last):\n  ...\n{error_type}: {message}\n"),
        ("exception.escaped", "False"))])
    return [event], Status(code=ERROR, message=f"{name}: {message}")


def _value(v: Any) -> AnyValue:
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, str):
        return AnyValue(string_value=v)
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return AnyValue(array_value=ArrayValue(values=[_value(x) for x in v]))
    return AnyValue(string_value=json.dumps(v, separators=(",", ":")))


FRAMING_TOKENS = 8  # a message's role and delimiters


def _tokens(value: Any) -> int:
    """Tokens of a message, roughly as a tokenizer counts them (about four characters each)."""
    return len(value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))) // 4 + 1


class Run:
    """Builds one trace step by step; times advance with every step, and the prompt grows by what the model said
    and the tools returned."""

    def __init__(self, name: str, agent: str = "assistant", model: str = "gpt-4.1-mini") -> None:
        self.name, self.agent, self.model = name, agent, model
        digest = hashlib.sha256(name.encode()).digest()
        self.trace_id = digest[:16]
        self._n = 0
        self.root_id = self._id()
        self.spans: list[Span] = []
        self.clock = START_NS
        self.prompt = 800  # input tokens of the next model call: the history grows
        self.root_attrs: dict[str, Any] = {}
        self.root_status: Status | None = None
        self.root_events: list[Span.Event] = []
        self.conversation = name
        self.invocation: tuple[bytes, int] | None = None  # (span id, start) of the agent invocation open now
        self.instructions: str | None = None  # the agent's system instructions, on every model call
        self.heard: str | None = None  # what the user says before the next model call (its input's last turn)

    def _id(self) -> bytes:
        self._n += 1
        return hashlib.sha256(self.trace_id + self._n.to_bytes(4, "big")).digest()[:8]

    def _span(self, name: str, kind: int, attrs: dict[str, Any], ms: int, status: Status | None = None,
              parent: bytes | None = None, events: list[Span.Event] | None = None) -> None:
        start = self.clock
        self.clock += ms * MS
        if parent is None:
            parent = self.invocation[0] if self.invocation else self.root_id
        self.spans.append(Span(trace_id=self.trace_id, span_id=self._id(), parent_span_id=parent,
                               name=name, kind=kind, start_time_unix_nano=start, end_time_unix_nano=self.clock,
                               attributes=[KeyValue(key=k, value=_value(v)) for k, v in attrs.items() if v is not None],
                               status=status or Status(), events=events))
        self.clock += 5 * MS

    def llm(self, text: str = "", calls: list[tuple[str, Any]] | tuple = (), *, agent: str | None = None,
            input_tokens: int | None = None, output_tokens: int | None = None) -> Run:
        parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
        parts += [{"type": "tool_call", "id": f"call_{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(calls)]
        finish = "tool_call" if calls else "stop"
        tokens = self.prompt if input_tokens is None else input_tokens
        if output_tokens is None:
            output_tokens = _tokens(parts)
        self._span(f"chat {self.model}", Span.SpanKind.SPAN_KIND_CLIENT, {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": self.model,
            "gen_ai.agent.name": agent or self.agent, "gen_ai.conversation.id": self.conversation,
            "gen_ai.response.finish_reasons": [finish], "gen_ai.usage.input_tokens": tokens,
            "gen_ai.usage.output_tokens": output_tokens,
            "gen_ai.system_instructions": self.instructions and [{"type": "text", "content": self.instructions}],
            "gen_ai.input.messages": self.heard and [{"role": "user", "parts": [{"type": "text",
                                                                                   "content": self.heard}]}],
            "gen_ai.output.messages": [{"role": "assistant", "parts": parts, "finish_reason": finish}]}, 700)
        self.heard = None
        self.prompt = tokens + output_tokens + FRAMING_TOKENS
        return self

    def tool(self, name: str, args: Any, result: Any = "ok", *, error: str | None = None,
             exception: tuple[str, str] | None = None, agent: str | None = None) -> Run:
        """A tool execution; it fails with `error` (error.type and status ERROR), or with `exception` (type,
        message) raised out of it (`raised`: no result, no error attribute)."""
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function",
                 "gen_ai.agent.name": agent or self.agent, "gen_ai.tool.call.arguments": args,
                 "gen_ai.tool.call.result": None if exception else result, "error.type": error}
        events, status = raised(*exception) if exception else (None, Status(code=ERROR, message=error) if error
                                                                else None)
        self._span(f"execute_tool {name}", Span.SpanKind.SPAN_KIND_INTERNAL, attrs, 200, status, events=events)
        self.prompt += _tokens(exception or result) + FRAMING_TOKENS  # the next model call reads the result
        return self

    def call(self, name: str, args: Any, result: Any = "ok", text: str = "", **kw: Any) -> Run:
        """A model call asking for one tool, then that tool's execution."""
        return self.llm(text, [(name, args)]).tool(name, args, result, **kw)

    def answer(self, text: str) -> Run:
        return self.llm(text)

    def user(self, text: str) -> Run:
        """The user's reply: the next model call reads it."""
        self.heard = text
        return self

    def invoke(self) -> Run:
        """Open an agent invocation: the next steps are its children until `end_invocation`."""
        self.invocation = (self._id(), self.clock)
        return self

    def end_invocation(self, error: str | None = None) -> Run:
        span_id, start = self.invocation
        self.invocation = None
        self.spans.append(Span(trace_id=self.trace_id, span_id=span_id, parent_span_id=self.root_id,
                               name=f"invoke_agent {self.agent}", kind=Span.SpanKind.SPAN_KIND_INTERNAL,
                               start_time_unix_nano=start, end_time_unix_nano=self.clock,
                               attributes=[KeyValue(key=k, value=_value(v)) for k, v in {
                                   "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent,
                                   "error.type": error}.items() if v is not None],
                               status=Status(code=ERROR, message=error) if error else Status()))
        return self

    def fail_root(self, error_type: str) -> Run:
        self.root_attrs["error.type"] = error_type
        self.root_status = Status(code=ERROR, message=error_type)
        return self

    def raise_root(self, error_type: str, message: str) -> Run:
        """The run ends with an exception raised out of its root span (`raised`: no error attribute)."""
        self.root_events, self.root_status = raised(error_type, message)
        return self

    def request(self) -> ExportTraceServiceRequest:
        root = Span(trace_id=self.trace_id, span_id=self.root_id, name=f"invoke_agent {self.agent}",
                    kind=Span.SpanKind.SPAN_KIND_INTERNAL, start_time_unix_nano=START_NS - MS,
                    end_time_unix_nano=self.clock,
                    attributes=[KeyValue(key=k, value=_value(v)) for k, v in {
                        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent,
                        "gen_ai.provider.name": "openai", "gen_ai.request.model": self.model,
                        **self.root_attrs}.items()],
                    status=self.root_status or Status(), events=self.root_events)
        resource = Resource(attributes=[KeyValue(key="service.name", value=_value("scenario-" + self.agent))])
        scope = ScopeSpans(scope=InstrumentationScope(name="scenarios"), spans=[root, *self.spans])
        return ExportTraceServiceRequest(resource_spans=[ResourceSpans(resource=resource, scope_spans=[scope])])


Built = tuple[str, set[str], Run]
DOMAINS = [  # (read tool, its args, write tool, its args, check tool)
    ("get_order", {"order_id": "W1001"}, "cancel_order", {"order_id": "W1001", "reason": "no longer needed"},
     "get_order"),
    ("get_reservation", {"reservation_id": "R77"}, "update_reservation", {"reservation_id": "R77", "seat": "12A"},
     "get_reservation"),
    ("get_ticket", {"ticket_id": 4411}, "update_ticket", {"ticket_id": 4411, "status": "resolved"}, "get_ticket"),
]


def scenarios() -> list[Scenario]:
    """Every module's scenarios, for each domain in turn (modules in name order)."""
    modules = [importlib.import_module(f"{__name__}.{info.name}") for info in sorted(pkgutil.iter_modules(__path__))]
    out = []
    for d, domain in enumerate(DOMAINS):
        for module in modules:
            for name, modes, run in module.generate(f"d{d}", *domain):
                out.append(Scenario(name, frozenset(modes), run.request()))
    return out
