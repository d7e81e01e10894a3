"""Generated agent runs, labelled with the MAST modes they show, for `mastwatch eval --corpus scenarios`.

Each run is one OTLP trace as an OpenTelemetry GenAI instrumentation emits it (v1.41 names: an `invoke_agent`
root, `chat` model calls, `execute_tool` tool calls), with content attributes present (eval strips them for
`--content off`). Failures carry `error.type`, or only the exception event and ERROR status the OpenTelemetry SDK
records when an exception leaves a span (`raised`). Every mode the structural detectors cover has positive variants
and look-alike negatives: polling, retries after an error, confirmations, legitimate re-reads, long but healthy runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
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


# --- the scenarios: each function yields (name, modes, run) -------------------------------------------------

Built = tuple[str, set[str], Run]
DOMAINS = [  # (read tool, its args, write tool, its args, check tool)
    ("get_order", {"order_id": "W1001"}, "cancel_order", {"order_id": "W1001", "reason": "no longer needed"},
     "get_order"),
    ("get_reservation", {"reservation_id": "R77"}, "update_reservation", {"reservation_id": "R77", "seat": "12A"},
     "get_reservation"),
    ("get_ticket", {"ticket_id": 4411}, "update_ticket", {"ticket_id": 4411, "status": "resolved"}, "get_ticket"),
]


def _healthy(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-healthy")
    r.call(read, rargs, {"id": 1, "status": "open"}).call(write, wargs, {"id": 1, "status": "done"})
    yield r.name, set(), r.answer("Your request is complete: the record now shows status done.")
    r = Run(f"{tag}-confirmation")  # asks the user, then acts: a confirmation turn, not a repeat
    r.call(read, rargs, {"id": 1, "status": "open"}).answer("I found it. Shall I go ahead? Please confirm (yes/no).")
    r.call(read, rargs, {"id": 1, "status": "open"}).call(write, wargs, {"id": 1, "status": "done"})
    yield r.name, set(), r.answer("Done: the record now shows status done.")
    r = Run(f"{tag}-long-healthy")  # a long run of distinct steps
    for i in range(24):
        r.call(read, {**rargs, "page": i}, {"page": i, "items": [i, i + 1]})
    yield r.name, set(), r.answer("Here is the summary of all 24 pages you asked for.")


def _repetition(tag: str, read: str, rargs: Any, *_: Any) -> Iterator[Built]:
    r = Run(f"{tag}-same-lookup")
    for _ in range(4):
        r.call(read, rargs, {"id": 1, "status": "open"})
    yield r.name, {"FM-1.3"}, r.answer("The record is open.")
    r = Run(f"{tag}-polling")  # polling a status that changes
    for status in ("pending", "pending", "running", "succeeded"):
        r.call("get_job_status", {"job": 7}, {"status": status})
    yield r.name, set(), r.answer("The job succeeded.")
    r = Run(f"{tag}-retry-after-timeout")
    r.call(read, rargs, "timeout while contacting the backend", error="TimeoutError")
    r.call(read, rargs, {"id": 1, "status": "open"})
    yield r.name, set(), r.answer("The record is open.")
    r = Run(f"{tag}-reread-after-change")
    r.call("read_file", {"path": "app.py"}, "def main(:\n    pass").call("edit_file", {"path": "app.py", "line": 1},
                                                                        "edited")
    r.call("read_file", {"path": "app.py"}, "def main():\n    pass")
    yield r.name, set(), r.answer("The syntax error is fixed; the file reads correctly now.")


def _termination(tag: str, read: str, rargs: Any, *_: Any) -> Iterator[Built]:
    for framework, error in (("langgraph", "GraphRecursionError"), ("openai-agents", "MaxTurnsExceeded"),
                             ("smolagents", "AgentMaxStepsError")):
        r = Run(f"{tag}-{framework}-limit")
        for i in range(6):
            r.call(read, {**rargs, "try": i}, {"id": 1, "status": "open"})
        yield r.name, {"FM-1.5"}, r.fail_root(error)
    r = Run(f"{tag}-langgraph-limit-raised")  # the limit error recorded only as the exception leaving the run
    for i in range(6):
        r.call(read, {**rargs, "try": i}, {"id": 1, "status": "open"})
    yield r.name, {"FM-1.5"}, r.raise_root("langgraph.errors.GraphRecursionError", "Recursion limit of 25 reached "
                                           "without hitting a stop condition. You can increase the limit by setting "
                                           "the `recursion_limit` config key.")
    r = Run(f"{tag}-llamaindex-limit-raised")  # a limit raised under a plain type: its message names it
    for i in range(5):
        r.call(read, {**rargs, "try": i}, {"id": 1, "status": "open"})
    yield r.name, {"FM-1.5"}, r.raise_root("ValueError", "Reached max iterations.")
    r = Run(f"{tag}-crewai-limit-text")
    for i in range(5):
        r.call(read, {**rargs, "try": i}, {"id": 1, "status": "open"})
    yield r.name, {"FM-1.5"}, r.answer("Agent stopped due to iteration limit or time limit.")
    r = Run(f"{tag}-other-exception")  # an ordinary failure of the run is not a limit
    r.call(read, rargs, {"id": 1})
    r.fail_root("ValueError")
    yield r.name, set(), r.answer("Here is the record.")
    r = Run(f"{tag}-other-exception-raised")
    r.call(read, rargs, {"id": 1}).call(read, {**rargs, "max_results": 5}, {"id": 1})
    r.raise_root("ValueError", "invalid literal for int() with base 10: 'W1001'")
    yield r.name, set(), r.answer("Here is the record.")


def _endings(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-stops-after-error")
    r.call(read, rargs, "record not found", error="NotFoundError")
    yield r.name, {"FM-3.1"}, r.answer("Sorry, I cannot help with that.")
    r = Run(f"{tag}-stops-after-error-text")  # the failure is only in the result text
    r.call(read, rargs, "ERROR: no data found for this id")
    yield r.name, {"FM-3.1"}, r.answer("There is nothing I can do here.")
    r = Run(f"{tag}-cut-off")  # stopped before the model saw the result it asked for, as a step limit does
    r.call(read, rargs, {"id": 1, "status": "open"}).llm("", [(write, wargs)]).tool(write, wargs, {"status": "done"})
    yield r.name, {"FM-1.5"}, r
    r = Run(f"{tag}-error-then-recovered")
    r.call(read, rargs, "record not found", error="NotFoundError").call(read, {**rargs, "alt": True}, {"id": 1})
    yield r.name, set(), r.answer("Found it under the alternative id.")
    r = Run(f"{tag}-ends-with-submit")
    r.call(read, rargs, {"id": 1}).llm("", [("submit", {"answer": "1"})]).tool("submit", {"answer": "1"}, "")
    yield r.name, set(), r
    r = Run(f"{tag}-claims-after-error")  # the change was refused and the answer treats it as done
    r.call(read, rargs, {"id": 1}).call(write, wargs, "error: payment method declined", error="PaymentError")
    yield r.name, {"FM-2.5", "FM-3.3"}, r.answer("All set! Your request has been completed successfully.")
    r = Run(f"{tag}-honest-after-error")  # says it failed: ended early, no false claim
    r.call(read, rargs, {"id": 1}).call(write, wargs, "error: payment method declined", error="PaymentError")
    yield r.name, {"FM-3.1"}, r.answer("I could not complete it: the payment method was declined.")
    r = Run(f"{tag}-refused-explained")  # a change refused for good, the reason told: the objective is impossible
    r.call(read, rargs, {"id": 1}).call(write, wargs, "error: already delivered", error="NotAllowed")
    yield r.name, set(), r.answer("Sorry, it was already delivered, so it cannot be changed; a return is possible.")
    r = Run(f"{tag}-gives-up-after-timeout")  # a transient failure: a retry might have worked
    r.call(read, rargs, {"id": 1}).call(write, wargs, "upstream timed out", error="TimeoutError")
    yield r.name, {"FM-3.1"}, r.answer("Sorry, I cannot complete it right now.")
    r = Run(f"{tag}-refused-explained-user-replies")  # told why, then the user's answer closes the run
    r.call(read, rargs, {"id": 1}).call(write, wargs, "error: card expired", error="PaymentError")
    r.answer("I'm sorry, the card on file has expired. Do you have another payment method?")
    yield r.name, set(), r.answer("Of course. Once your card is updated, I'll be happy to complete it.")
    r = Run(f"{tag}-terse-claim-after-error")  # the check of the change failed, the answer says it passed
    r.call(write, wargs, {"id": 1}).call("run_check", rargs, "Traceback (most recent call last): KeyError: 'id'")
    yield r.name, {"FM-3.3"}, r.answer("Fixed: it now runs without error.")
    r = Run(f"{tag}-failed-write-then-claimed")  # an earlier change failed for good, the run says all is done
    r.call(write, wargs, "error: schema migration failed", error="MigrationError")
    r.call("deploy_release", {"version": "v3"}, {"status": "rolled out"}).call(check, rargs, {"status": "ok"})
    yield r.name, {"FM-2.5", "FM-3.3"}, r.answer("Released: the migration and the deployment are done.")
    r = Run(f"{tag}-lookup-failed-worked-around")  # a failed lookup, another way found: the claim is true
    r.call(read, rargs, "not found", error="NotFoundError").call("search_records", {"q": "W1001"}, {"id": 1})
    r.call(write, wargs, {"id": 1, "status": "done"}).call(check, rargs, {"id": 1, "status": "done"})
    yield r.name, set(), r.answer("Your request has been completed successfully.")
    r = Run(f"{tag}-logs-show-errors")  # error lines in logs are what was read, not the read failing
    r.call("get_pod_logs", {"pod": f"{tag}-api-1"}, "ERROR smtp: dial tcp 10.0.4.17:587: connection refused")
    yield r.name, set(), r.answer("The service cannot reach its SMTP relay at 10.0.4.17:587 (connection refused).")
    r = Run(f"{tag}-logs-read-failed")  # the log read itself failed, and the run stopped there
    r.call("get_pod_logs", {"pod": f"{tag}-api-1"}, 'Error from server (NotFound): pods "api-1" not found')
    yield r.name, {"FM-3.1"}, r.answer("The pod has no logs to show.")
    r = Run(f"{tag}-gives-up-after-unavailable-raised")  # transient by its exception message only
    r.call(read, rargs, {"id": 1}).call(write, wargs, exception=(
        "requests.exceptions.HTTPError", "503 Server Error: Service Unavailable for url: https://orders.internal/v1"))
    yield r.name, {"FM-3.1"}, r.answer("Sorry, I cannot complete it right now.")
    r = Run(f"{tag}-refused-explained-raised")  # refused for good, by its exception: the user told why
    r.call(read, rargs, {"id": 1}).call(write, wargs, exception=("app.errors.NotAllowed", "already delivered"))
    yield r.name, set(), r.answer("Sorry, it was already delivered, so it cannot be changed; a return is possible.")


def _verification(tag: str, *_: Any) -> Iterator[Built]:
    svc = {"service": f"{tag}-api", "namespace": "prod"}
    r = Run(f"{tag}-restart-unchecked", agent="sre-agent")
    r.call("get_pod_logs", svc, "OOMKilled").call("restart_deployment", svc, "deployment restarted")
    yield r.name, {"FM-3.2"}, r.answer("I restarted the deployment; the incident is handled.")
    r = Run(f"{tag}-restart-checked", agent="sre-agent")
    r.call("get_pod_logs", svc, "OOMKilled").call("restart_deployment", svc, "deployment restarted")
    r.call("get_deployment_status", svc, {"ready": "3/3"})
    yield r.name, set(), r.answer("Restarted; all 3 replicas are ready again.")
    r = Run(f"{tag}-scale-queued", agent="sre-agent")  # the change is only acknowledged (content)
    r.call("get_metrics", svc, {"cpu": 0.97}).call("set_replicas", {**svc, "replicas": 6}, "accepted: request queued")
    yield r.name, {"FM-3.2"}, r.answer("Scaled to 6 replicas.")
    r = Run(f"{tag}-check-fails-claimed", agent="sre-agent")
    r.call("apply_config", {**svc, "memory": "2Gi"}, "configured")
    r.call("get_deployment_status", svc, "error: CrashLoopBackOff (2/3 pods failing)", error="CheckFailed")
    yield r.name, {"FM-3.3"}, r.answer("The new memory limit has been applied and the service is fixed.")
    r = Run(f"{tag}-check-fails-then-fixed", agent="sre-agent")
    r.call("apply_config", {**svc, "memory": "2Gi"}, "configured")
    r.call("get_deployment_status", svc, "error: CrashLoopBackOff", error="CheckFailed")
    r.call("apply_config", {**svc, "memory": "4Gi"}, "configured").call("get_deployment_status", svc, {"ready": "3/3"})
    yield r.name, set(), r.answer("The service is fixed: all 3 pods are ready with 4Gi.")
    r = Run(f"{tag}-check-unhealthy-claimed", agent="sre-agent")  # the check worked and shows failing pods
    r.call("restart_deployment", svc, "deployment restarted")
    r.call("get_pods", svc, f"{tag}-api-7f9c 0/1 CrashLoopBackOff 5 3m")
    yield r.name, {"FM-3.3"}, r.answer("Restarted; the service is healthy again.")
    r = Run(f"{tag}-check-unhealthy-reported", agent="sre-agent")
    r.call("restart_deployment", svc, "deployment restarted")
    r.call("get_pods", svc, f"{tag}-api-7f9c 0/1 CrashLoopBackOff 5 3m")
    yield r.name, set(), r.answer("Restarted, but the pods are in CrashLoopBackOff: the new image does not start.")


def _code_changes(tag: str, *_: Any) -> Iterator[Built]:
    edit = {"path": "app/retry.py", "old": "retries = 3", "new": "retries = 5"}
    r = Run(f"{tag}-code-edit-untested", agent="coding-agent")
    r.call("read_file", {"path": "app/retry.py"}, "retries = 3").call("edit_file", edit, "ok")
    yield r.name, {"FM-3.2"}, r.answer("Retries are now 5.")
    r = Run(f"{tag}-code-edit-tested", agent="coding-agent")
    r.call("read_file", {"path": "app/retry.py"}, "retries = 3").call("edit_file", edit, "ok")
    r.call("run_command", {"command": "pytest -q tests/test_retry.py"}, "4 passed in 0.3s")
    yield r.name, set(), r.answer("Retries are now 5; the retry tests pass.")
    r = Run(f"{tag}-data-file-written", agent="coding-agent")  # a written file is what it holds: nothing to run
    r.call("get_current_time", {"timezone": "UTC"}, {"datetime": "2026-05-20T08:00:00Z"})
    r.call("write_file", {"path": "year.txt", "text": "2026"}, "wrote 4 bytes to year.txt")
    yield r.name, set(), r.answer("I wrote the year to year.txt.")


def _history(tag: str, read: str, rargs: Any, *_: Any) -> Iterator[Built]:
    r = Run(f"{tag}-prompt-collapse")
    for i, tokens in enumerate((1200, 3400, 6100, 9000)):
        r.llm("", [(read, {**rargs, "n": i})], input_tokens=tokens).tool(read, {**rargs, "n": i}, {"n": i})
    r.llm("", [(read, {**rargs, "n": 9})], input_tokens=3000).tool(read, {**rargs, "n": 9}, {"n": 9})
    yield r.name, {"FM-1.4"}, r.answer("What was the order id again?")
    r = Run(f"{tag}-restarts-from-scratch")  # the prompt falls back to its first size: the dialogue restarted
    for i, tokens in enumerate((1200, 3400, 6100, 9000)):
        r.llm("", [(read, {**rargs, "n": i})], input_tokens=tokens).tool(read, {**rargs, "n": i}, {"n": i})
    r.llm("", [(read, {**rargs, "n": 0})], input_tokens=1250).tool(read, {**rargs, "n": 0}, {"n": 0})
    yield r.name, {"FM-2.1"}, r.answer("Let me start over: what can I do for you?")
    r = Run(f"{tag}-new-conversation-redo")
    r.call(read, rargs, {"id": 1}).call("lookup_policy", {"topic": "refunds"}, "30 days")
    r.conversation = f"{tag}-second-session"
    r.call(read, rargs, {"id": 1})
    yield r.name, {"FM-2.1"}, r.answer("Here is your record.")
    r = Run(f"{tag}-restarted-after-crash")  # the worker died; a fresh invocation starts the work over
    r.invoke().call(read, rargs, {"id": 1}).call("lookup_policy", {"topic": "refunds"}, "30 days")
    r.end_invocation("WorkerLostError").invoke().call(read, rargs, {"id": 1})
    r.call("lookup_policy", {"topic": "refunds"}, "30 days").answer("Refunds are possible within 30 days.")
    yield r.name, {"FM-2.1"}, r.end_invocation()
    r = Run(f"{tag}-crashed-then-other-work")  # after the crash the new invocation does not redo anything
    r.invoke().call(read, rargs, {"id": 1}).end_invocation("WorkerLostError")
    r.invoke().call("lookup_policy", {"topic": "refunds"}, "30 days").answer("Refunds are possible within 30 days.")
    yield r.name, set(), r.end_invocation()
    r = Run(f"{tag}-handoff-new-conversation")  # another agent takes over in its own conversation: no reset
    r.call(read, rargs, {"id": 1})
    r.agent, r.conversation = "billing-agent", f"{tag}-billing"
    r.call("get_invoice", {"order": 1}, {"total": 10})
    yield r.name, set(), r.answer("Your invoice total is 10.")
    r = Run(f"{tag}-summarised-history")  # a gentle trim (70%) is not a collapse
    for i, tokens in enumerate((1200, 3400, 6100, 9000, 6500, 7000)):
        r.llm("", [(read, {**rargs, "n": i})], input_tokens=tokens).tool(read, {**rargs, "n": i}, {"n": i})
    yield r.name, set(), r.answer("Done with all six lookups.")
    r = Run(f"{tag}-two-agents")  # a planner with a small prompt next to a worker with a growing one
    for i, tokens in enumerate((2500, 5200, 8300)):
        r.llm("", [(read, {**rargs, "n": i})], input_tokens=tokens).tool(read, {**rargs, "n": i}, {"n": i})
        r.llm(f"Next: step {i + 1}.", agent="planner", input_tokens=600)
    yield r.name, set(), r.answer("All steps are done.")


def _mismatch(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-says-x-does-y")
    r.llm("I will call search_flights to find options.", [("search_hotels", {"city": "Rome"})])
    r.tool("search_hotels", {"city": "Rome"}, [{"hotel": "Roma"}])
    yield r.name, {"FM-2.6"}, r.answer("Here are hotel options in Rome.")
    r = Run(f"{tag}-says-fix-repeats")
    r.call("edit", {"command": "edit 10:12 x = (1"}, "SyntaxError: unmatched '('")
    r.llm("I will correct the syntax and try the edit again.", [("edit", {"command": "edit 10:12 x = (1"})])
    r.tool("edit", {"command": "edit 10:12 x = (1"}, "SyntaxError: unmatched '('")
    r.call("edit", {"command": "edit 10:12 x = (1)"}, "File updated.").call("run_tests", {"path": "tests"}, "3 passed")
    yield r.name, {"FM-2.6"}, r.answer("The edit is in place and the tests pass.")
    r = Run(f"{tag}-says-x-does-x")
    r.llm(f"I will call {read} to look it up.", [(read, rargs)]).tool(read, rargs, {"id": 1})
    yield r.name, set(), r.answer("Found it.")


def _ignored(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-goes-on-after-failed-write")
    r.call(write, wargs, "error: the record is locked", error="LockedError")
    r.call("send_confirmation_email", {"to": "user@example.com"}, "sent")
    yield r.name, {"FM-2.5"}, r.answer("I sent you the confirmation.")
    r = Run(f"{tag}-investigates-failed-write")
    r.call(write, wargs, "error: the record is locked", error="LockedError").call(read, rargs, {"locked": False})
    r.call(write, wargs, {"status": "done"})
    yield r.name, set(), r.answer("It was locked briefly; the change is now done.")


ONE_CALL = "You help customers. Make only one tool call at a time, and do not talk to the user while you do."
CONFIRM = ("You help customers. Before any action that changes their account, list the details and obtain explicit "
           "user confirmation (yes) to proceed.")


def _task_rules(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    """Rules stated in the agent's instructions (FM-1.1), kept and broken."""
    r = Run(f"{tag}-parallel-calls")
    r.instructions = ONE_CALL
    r.llm("", [(read, rargs), ("lookup_policy", {"topic": "changes"})])
    r.tool(read, rargs, {"id": 1, "status": "open"}).tool("lookup_policy", {"topic": "changes"}, "allowed")
    yield r.name, {"FM-1.1"}, r.answer("The record is open and the change is allowed.")
    r = Run(f"{tag}-one-call-at-a-time")
    r.instructions = ONE_CALL
    r.call(read, rargs, {"id": 1, "status": "open"}).call("lookup_policy", {"topic": "changes"}, "allowed")
    yield r.name, set(), r.answer("The record is open and the change is allowed.")
    r = Run(f"{tag}-acts-without-yes")
    r.instructions = CONFIRM
    r.call(read, rargs, {"id": 1, "status": "open"}).answer("I can make the change. Shall I go ahead?")
    r.user("How long will it take?").call(write, wargs, {"id": 1, "status": "done"})
    yield r.name, {"FM-1.1"}, r.answer("Done: the record now shows status done.")
    r = Run(f"{tag}-acts-after-yes")
    r.instructions = CONFIRM
    r.call(read, rargs, {"id": 1, "status": "open"}).answer("I can make the change. Shall I go ahead?")
    r.user("Yes, please go ahead.").call(write, wargs, {"id": 1, "status": "done"})
    yield r.name, set(), r.answer("Done: the record now shows status done.")


def _conversation(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    """What a support conversation shows with content captured: how it hands over, whose record it acts on, a
    lookup made again for nothing."""
    handover = "transfer_to_human_agents"
    r = Run(f"{tag}-hands-over-giving-up")
    r.user("My service still does not work.").call(read, rargs, {"id": 1, "status": "open"})
    r.call(handover, {"summary": "Despite the steps tried the issue persists. Further technical support is needed."},
           "Transfer successful")
    yield r.name, {"FM-3.1", "FM-3.2"}, r.answer("You are being transferred to a human agent.")
    r = Run(f"{tag}-hands-over-claiming-all-done")
    r.user("My service still does not work.").call(read, rargs, {"id": 1, "status": "open"})
    r.call(handover, {"summary": "All standard troubleshooting steps have been completed."}, "Transfer successful")
    yield r.name, {"FM-3.3"}, r.answer("You are being transferred to a human agent.")
    r = Run(f"{tag}-hands-over-a-blocker")  # a cause the agent cannot remove: handing over is right
    r.user("My service still does not work.").call(read, rargs, {"id": 1, "status": "locked"})
    r.call(handover, {"summary": "The account is locked with a PIN; it cannot be unlocked here."},
           "Transfer successful")
    yield r.name, set(), r.answer("You are being transferred to a human agent.")
    record = {"record_id": "A-2", "phone_number": "555-010-2001", "status": "active"}
    r = Run(f"{tag}-acts-on-someone-elses-record")
    r.user("Hi, my number is 555-010-2002.").call("find_records", {"owner": "me"}, {"ids": ["A-1", "A-2"]})
    r.call("get_record_details", {"id": "A-2"}, record).call("enable_feature", {"id": "A-2"}, "enabled")
    yield r.name, {"FM-2.5", "FM-3.3"}, r.answer("The feature has been enabled for your line.")
    r = Run(f"{tag}-acts-on-the-users-record")
    r.user("Hi, my number is 555-010-2001.").call("find_records", {"owner": "me"}, {"ids": ["A-1", "A-2"]})
    r.call("get_record_details", {"id": "A-2"}, record).call("enable_feature", {"id": "A-2"}, "enabled")
    yield r.name, set(), r.answer("The feature has been enabled for your line.")
    r = Run(f"{tag}-change-refused-as-shown")
    r.call("get_record_details", {"id": "A-2"}, record)
    r.call("resume_record", {"id": "A-2"}, "Error: record must be suspended to resume", error="ToolError")
    yield r.name, {"FM-2.5"}, r.answer("I'm sorry, the record cannot be resumed: it is not suspended.")
    r = Run(f"{tag}-changes-then-ends-silently")  # neither checked nor told: the last turn is a bare stop token
    r.call(read, rargs, {"id": 1, "status": "open"}).call(write, wargs, {"id": 1, "status": "done"})
    yield r.name, {"FM-3.1", "FM-3.2"}, r.answer("###STOP###")
    account = {"user_id": "u-7", "address": {"city": "New York"}, "orders": ["#A-100", "#A-101", "#A-102"]}
    r = Run(f"{tag}-denies-without-opening-all")  # one of three orders opened, then "not on file"
    r.user("Please set my address to the Seattle one from my order.").call("get_user_details", {"id": "u-7"}, account)
    r.call("get_order_details", {"order_id": "#A-100"}, {"order_id": "#A-100", "city": "New York"})
    yield r.name, {"FM-3.2"}, r.answer("I'm sorry, I don't see a Seattle address on file for your account.")
    r = Run(f"{tag}-denies-after-opening-all")
    r.user("Please set my address to the Seattle one from my order.").call("get_user_details", {"id": "u-7"}, account)
    for order in account["orders"]:
        r.call("get_order_details", {"order_id": order}, {"order_id": order, "city": "New York"})
    yield r.name, set(), r.answer("I'm sorry, I don't see a Seattle address on file for your account.")
    r = Run(f"{tag}-refused-then-done-another-way")  # the same order changed with the tool that applies
    r.call("exchange_order_items", {"order_id": "#A-100", "item": "blue"}, "Error: the order is not delivered",
           error="ToolError")
    r.call("modify_order_items", {"order_id": "#A-100", "item": "blue"}, {"order_id": "#A-100", "status": "modified"})
    yield r.name, set(), r.answer("Your order #A-100 has been modified to the blue item.")
    r = Run(f"{tag}-refusal-explained-then-other-work")
    r.call("modify_order_items", {"order_id": "#A-100", "items": []}, "Error: the number of items should match",
           error="ToolError")
    r.answer("Unfortunately I cannot remove items from an order, only swap them. Anything else?")
    r.user("Then update my address to 1 Pine St.").call("modify_user_address", {"user_id": "u-7"},
                                                      {"user_id": "u-7", "address": "1 Pine St"})
    yield r.name, set(), r.answer("Your address has been updated to 1 Pine St.")
    r = Run(f"{tag}-looks-up-again")
    r.call(read, rargs, {"id": 1, "status": "open"}).call("lookup_policy", {"topic": "changes"}, "allowed")
    r.call(read, rargs, {"id": 1, "status": "open"}).call("lookup_policy", {"topic": "fees"}, "none")
    yield r.name, {"FM-1.3"}, r.answer("The record is open, the change is allowed and costs nothing.")


GENERATORS: list[Callable[..., Iterator[Built]]] = [_healthy, _repetition, _termination, _endings, _verification,
                                                    _code_changes, _history, _mismatch, _ignored, _task_rules,
                                                    _conversation]


def scenarios() -> list[Scenario]:
    out = []
    for d, domain in enumerate(DOMAINS):
        for generate in GENERATORS:
            for name, modes, run in generate(f"d{d}", *domain):
                out.append(Scenario(name, frozenset(modes), run.request()))
    return out
