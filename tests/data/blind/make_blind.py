"""Write the blind labelled corpus next to this file: `runs.otlp.jsonl`, the stories' own labels
(`annotator_a.json`), and the final labels (`labels.json`): annotator A's, with the runs where an independent
second annotation (`annotator_b.json`) disagreed settled as `adjudication.json` decided.

Each run is a short story of an agent (SRE bot, support agent, coding agent, or several agents handing off)
told as the steps it takes: user turns, model turns (text and tool calls), tool executions (results or errors).
`Run` keeps the conversation the model sees and renders each step as the span a real instrumentation emits:
- genai: OpenTelemetry GenAI conventions v1.41 with the opt-in content attributes (`invoke_agent`,
  `invoke_workflow`, `chat`, `execute_tool`; gen_ai.input/output.messages, gen_ai.tool.call.arguments/result);
- openinference: OpenInference (LangChain-style AGENT / LLM / TOOL spans, flattened llm.input_messages.*);
- openllmetry: Traceloop OpenLLMetry (workflow / agent / tool spans, indexed gen_ai.prompt.* / gen_ai.completion.*).
Spans are written as the OpenTelemetry Collector's file exporter writes them: OTLP/JSON, hex ids, one
ExportTraceServiceRequest per line, spans in the order they end, in batches of at most 12.

Labels follow the MAST definitions (docs: MAST.md of the project's references) and nothing else; each says why.
Deterministic: ids are SHA-256 of the run name, times are fixed. Run: `python tests/data/blind/make_blind.py`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
BASE_NS = 1_779_264_000 * 1_000_000_000  # 2026-05-20T08:00:00Z
MS = 1_000_000
BATCH = 12
INTERNAL, CLIENT = 1, 3
SCOPES = {
    ("genai", "llm"): ("opentelemetry.instrumentation.openai_v2", "2.3b0"),
    ("genai", "other"): ("agent-runtime", "1.8.0"),
    ("openinference", "llm"): ("openinference.instrumentation.langchain", "0.1.51"),
    ("openinference", "other"): ("openinference.instrumentation.langchain", "0.1.51"),
    ("openllmetry", "llm"): ("opentelemetry.instrumentation.openai.v1", "0.47.3"),
    ("openllmetry", "other"): ("traceloop.sdk", "0.47.3"),
}

RUNS: list[Run] = []


def _hash(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()


def _j(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


class Call:
    """One tool call: its result, or the error it raised (error=(type, message))."""

    def __init__(self, name: str, args: dict[str, Any], result: Any = None,
                 error: tuple[str, str] | None = None) -> None:
        self.name, self.args, self.result, self.error = name, args, result, error


def c(tool: str, /, result: Any = None, error: tuple[str, str] | None = None, **args: Any) -> Call:
    """A tool call: `c("get_order_details", {...result...}, order_id="#W1")`; keyword arguments are the tool's."""
    return Call(tool, args, result, error)


class Run:
    """A run as the spans of one trace; steps append spans, `labels` says what MAST modes it shows."""

    def __init__(self, name: str, modes: list[str], why: str, *, conv: str = "genai", agent: str = "agent",
                 system: str = "", tools: list[str] | None = None, model: str = "gpt-4.1",
                 provider: str = "openai", workflow: str | None = None, service: str | None = None) -> None:
        self.name, self.modes, self.why, self.conv = name, modes, why, conv
        self.model, self.provider = model, provider
        self.trace_id = _hash("blind", name)[:32]
        self.service = service or agent
        self.spans: list[dict[str, Any]] = []
        self.clock = BASE_NS + len(RUNS) * 600_000 * MS
        self.count = 0
        self.first_user: dict[str, Any] | None = None
        self.final = ""
        self.frames: list[dict[str, Any]] = []
        self.root: dict[str, Any] | None = None
        self.root = self._open("workflow", workflow) if workflow else None
        self.enter(agent, system, tools)
        RUNS.append(self)

    # --- spans -----------------------------------------------------------------------------------

    def _id(self) -> str:
        self.count += 1
        return _hash(self.trace_id, self.count)[:16]

    def _tick(self, ms: int) -> int:
        self.clock += ms * MS
        return self.clock

    def _parent(self) -> str:
        if self.frames:
            return self.frames[-1]["span"]["id"]
        return self.root["id"] if self.root else ""

    def _open(self, kind: str, name: str | None, **data: Any) -> dict[str, Any]:
        span = {"kind": kind, "name": name, "id": self._id(), "parent": self._parent(), "start": self._tick(3),
                "end": None, "error": None, **data}
        self.spans.append(span)
        return span

    def _close(self, span: dict[str, Any], error: tuple[str, str] | None = None) -> None:
        span["end"], span["error"] = self._tick(2), error

    # --- agents ----------------------------------------------------------------------------------

    def enter(self, agent: str, system: str = "", tools: list[str] | None = None,
              history: list[dict[str, Any]] | None = None, conversation: str | None = None) -> None:
        """Start an agent (a handoff or sub-agent when one is already running) with the history it is given."""
        span = self._open("agent", agent, conversation=conversation or "conv_" + self.trace_id[:12])
        self.frames.append({"span": span, "system": system, "tools": tools or [], "history": list(history or [])})

    def leave(self, error: tuple[str, str] | None = None) -> None:
        frame = self.frames.pop()
        frame["span"]["output"] = self.final
        self._close(frame["span"], error)

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.frames[-1]["history"]

    def user(self, text: str) -> Run:
        message = {"role": "user", "parts": [{"type": "text", "content": text}]}
        self.first_user = self.first_user or message
        self.history.append(message)
        self._tick(4000)
        return self

    def _chat(self, text: str | None, calls: list[Call], finish: str) -> list[str]:
        frame = self.frames[-1]
        ids = ["call_" + _hash(self.trace_id, self.count, i)[:24] for i in range(len(calls))]
        parts = ([{"type": "text", "content": text}] if text else []) + [
            {"type": "tool_call", "id": i, "name": call.name, "arguments": call.args} for i, call in zip(ids, calls)]
        output = {"role": "assistant", "parts": parts, "finish_reason": finish}
        prompt = len(frame["system"]) + len(_j(frame["history"])) + 60 * len(frame["tools"])
        span = self._open("llm", self.model, system=frame["system"], tools=frame["tools"],
                          input=list(frame["history"]), output=output, input_tokens=prompt // 4 + 12,
                          output_tokens=len(_j(parts)) // 4 + 5)
        self._tick(700 + int(self.trace_id[self.count % 24:][:3], 16) % 1800)
        self._close(span)
        frame["history"].append({"role": "assistant", "parts": parts})
        return ids

    def act(self, text: str | None, *calls: Call) -> Run:
        """One model turn that calls tools, then the tool executions; results go back into the history."""
        for call_id, call in zip(self._chat(text, list(calls), "tool_call"), calls):
            span = self._open("tool", call.name, call_id=call_id, args=call.args,
                              result=None if call.error else call.result)
            self._tick(40 + len(_j(call.result)) % 900)
            self._close(span, call.error)
            response = f"Error: {call.error[1]}" if call.error else call.result
            self.history.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id,
                                                            "response": response}]})
        return self

    def say(self, text: str, finish: str = "stop") -> Run:
        """A model turn that answers with text only."""
        self._chat(text, [], finish)
        self.final = text
        return self

    def truncate(self, keep_last: int) -> Run:
        """The framework drops all but the last messages from the history (context window management)."""
        self.frames[-1]["history"] = self.history[-keep_last:]
        return self

    def end(self, error: tuple[str, str] | None = None) -> Run:
        """Close every open span; an error (a limit hit, a crash) propagates through all of them."""
        while self.frames:
            self.leave(error)
        if self.root:
            self.root["output"] = self.final
            self._close(self.root, error)
        return self

    # --- rendering ---------------------------------------------------------------------------------

    def render(self) -> list[str]:
        assert not self.frames, f"{self.name}: end() not called"
        spans = sorted(self.spans, key=lambda s: s["end"])
        lines = []
        for i in range(0, len(spans), BATCH):
            scopes: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for span in spans[i:i + BATCH]:
                scope = SCOPES[(self.conv, "llm" if span["kind"] == "llm" else "other")]
                scopes.setdefault(scope, []).append(self._otlp(span))
            resource = {"service.name": self.service, "service.version": "1.4.2", "deployment.environment": "prod",
                        "telemetry.sdk.name": "opentelemetry", "telemetry.sdk.language": "python",
                        "telemetry.sdk.version": "1.33.1"}
            lines.append(json.dumps({"resourceSpans": [{
                "resource": {"attributes": _attrs(resource)},
                "scopeSpans": [{"scope": {"name": n, "version": v}, "spans": s} for (n, v), s in scopes.items()]}]},
                separators=(",", ":"), ensure_ascii=False))
        return lines

    def _otlp(self, span: dict[str, Any]) -> dict[str, Any]:
        name, kind, attrs = {"genai": _genai, "openinference": _openinference, "openllmetry": _openllmetry}[
            self.conv](self, span)
        out: dict[str, Any] = {"traceId": self.trace_id, "spanId": span["id"], "parentSpanId": span["parent"],
                               "name": name, "kind": kind, "startTimeUnixNano": str(span["start"]),
                               "endTimeUnixNano": str(span["end"]), "attributes": _attrs(attrs), "status": {}}
        if span["error"]:
            out["status"] = {"code": 2, "message": span["error"][1]}
            out["events"] = [{"name": "exception", "timeUnixNano": str(span["end"]), "attributes": _attrs(
                {"exception.type": span["error"][0], "exception.message": span["error"][1]})}]
        return out


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return {"arrayValue": {"values": [{"stringValue": x} for x in v]}}
    return {"stringValue": _j(v)}


def _attrs(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v is not None]


def _text_of(message: dict[str, Any]) -> str:
    return "\n".join(str(p.get("content", p.get("response", ""))) for p in message["parts"]
                     if p["type"] in ("text", "tool_call_response"))


# --- OpenTelemetry GenAI v1.41 ---------------------------------------------------------------------


def _genai(run: Run, s: dict[str, Any]) -> tuple[str, int, dict[str, Any]]:
    err = {"error.type": s["error"][0]} if s["error"] else {}
    if s["kind"] == "workflow":
        return f"invoke_workflow {s['name']}", INTERNAL, {
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": s["name"], **err}
    if s["kind"] == "agent":
        return f"invoke_agent {s['name']}", INTERNAL, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": s["name"],
            "gen_ai.provider.name": run.provider, "gen_ai.request.model": run.model,
            "gen_ai.conversation.id": s["conversation"], **err}
    if s["kind"] == "llm":
        return f"chat {run.model}", CLIENT, {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": run.provider,
            "gen_ai.request.model": run.model, "gen_ai.response.model": run.model + "-2025-04-14",
            "gen_ai.response.id": "chatcmpl-" + s["id"], "server.address": "api.openai.com",
            "gen_ai.response.finish_reasons": [s["output"]["finish_reason"]],
            "gen_ai.usage.input_tokens": s["input_tokens"], "gen_ai.usage.output_tokens": s["output_tokens"],
            "gen_ai.system_instructions": [{"type": "text", "content": s["system"]}] if s["system"] else None,
            "gen_ai.tool.definitions": [{"type": "function", "name": t} for t in s["tools"]] or None,
            "gen_ai.input.messages": s["input"], "gen_ai.output.messages": [s["output"]]}
    return f"execute_tool {s['name']}", INTERNAL, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": s["name"], "gen_ai.tool.call.id": s["call_id"],
        "gen_ai.tool.type": "function", "gen_ai.tool.call.arguments": s["args"],
        "gen_ai.tool.call.result": s["result"], **err}


# --- OpenInference ---------------------------------------------------------------------------------


def _oi_messages(prefix: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, m in enumerate(messages):
        p = f"{prefix}.{i}.message"
        out[f"{p}.role"] = m["role"]
        if text := _text_of(m):
            out[f"{p}.content"] = text
        calls = [x for x in m["parts"] if x["type"] == "tool_call"]
        for k, call in enumerate(calls):
            out[f"{p}.tool_calls.{k}.tool_call.id"] = call["id"]
            out[f"{p}.tool_calls.{k}.tool_call.function.name"] = call["name"]
            out[f"{p}.tool_calls.{k}.tool_call.function.arguments"] = _j(call["arguments"])
        if m["role"] == "tool":
            out[f"{p}.tool_call_id"] = m["parts"][0]["id"]
    return out


def _openinference(run: Run, s: dict[str, Any]) -> tuple[str, int, dict[str, Any]]:
    if s["kind"] in ("agent", "workflow"):
        return s["name"], INTERNAL, {
            "openinference.span.kind": "AGENT" if s["kind"] == "agent" else "CHAIN", "agent.name": s["name"],
            "session.id": s.get("conversation"), "input.value": _text_of(run.first_user) if run.first_user else None,
            "input.mime_type": "text/plain", "output.value": s.get("output"), "output.mime_type": "text/plain"}
    if s["kind"] == "llm":
        system = [{"role": "system", "parts": [{"type": "text", "content": s["system"]}]}] if s["system"] else []
        messages = system + s["input"]
        return "ChatOpenAI", INTERNAL, {
            "openinference.span.kind": "LLM", "llm.model_name": run.model, "llm.provider": run.provider,
            "llm.system": run.provider, "llm.invocation_parameters": _j({"model": run.model, "temperature": 0}),
            "input.value": _j({"messages": messages}), "input.mime_type": "application/json",
            "output.value": _j(s["output"]), "output.mime_type": "application/json",
            **_oi_messages("llm.input_messages", messages), **_oi_messages("llm.output_messages", [s["output"]]),
            "llm.token_count.prompt": s["input_tokens"], "llm.token_count.completion": s["output_tokens"],
            "llm.token_count.total": s["input_tokens"] + s["output_tokens"]}
    return s["name"], INTERNAL, {
        "openinference.span.kind": "TOOL", "tool.name": s["name"], "input.value": _j(s["args"]),
        "input.mime_type": "application/json", "output.value": None if s["result"] is None else _j(s["result"])}


# --- Traceloop OpenLLMetry -------------------------------------------------------------------------


def _openllmetry(run: Run, s: dict[str, Any]) -> tuple[str, int, dict[str, Any]]:
    workflow = run.root["name"] if run.root else run.spans[0]["name"]
    if s["kind"] in ("agent", "workflow"):
        kind = "workflow" if s["parent"] == "" else "agent"
        return f"{s['name']}.{kind}", INTERNAL, {
            "traceloop.span.kind": kind, "traceloop.workflow.name": workflow, "traceloop.entity.name": s["name"],
            "traceloop.entity.input": _j({"args": [_text_of(run.first_user)] if run.first_user else [],
                                          "kwargs": {}}),
            "traceloop.entity.output": _j(s.get("output") or "")}
    if s["kind"] == "llm":
        attrs: dict[str, Any] = {
            "llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": run.model,
            "gen_ai.response.model": run.model + "-2025-04-14", "gen_ai.response.id": "chatcmpl-" + s["id"],
            "gen_ai.usage.prompt_tokens": s["input_tokens"], "gen_ai.usage.completion_tokens": s["output_tokens"],
            "llm.usage.total_tokens": s["input_tokens"] + s["output_tokens"], "traceloop.workflow.name": workflow}
        system = [{"role": "system", "parts": [{"type": "text", "content": s["system"]}]}] if s["system"] else []
        for i, m in enumerate(system + s["input"]):
            attrs[f"gen_ai.prompt.{i}.role"] = m["role"]
            attrs[f"gen_ai.prompt.{i}.content"] = _text_of(m)
            for k, call in enumerate(x for x in m["parts"] if x["type"] == "tool_call"):
                attrs[f"gen_ai.prompt.{i}.tool_calls.{k}.id"] = call["id"]
                attrs[f"gen_ai.prompt.{i}.tool_calls.{k}.name"] = call["name"]
                attrs[f"gen_ai.prompt.{i}.tool_calls.{k}.arguments"] = _j(call["arguments"])
            if m["role"] == "tool":
                attrs[f"gen_ai.prompt.{i}.tool_call_id"] = m["parts"][0]["id"]
        out = s["output"]
        attrs["gen_ai.completion.0.role"] = "assistant"
        attrs["gen_ai.completion.0.finish_reason"] = "tool_calls" if out["finish_reason"] == "tool_call" else "stop"
        if text := _text_of(out):
            attrs["gen_ai.completion.0.content"] = text
        for k, call in enumerate(x for x in out["parts"] if x["type"] == "tool_call"):
            attrs[f"gen_ai.completion.0.tool_calls.{k}.id"] = call["id"]
            attrs[f"gen_ai.completion.0.tool_calls.{k}.name"] = call["name"]
            attrs[f"gen_ai.completion.0.tool_calls.{k}.arguments"] = _j(call["arguments"])
        return "openai.chat", CLIENT, attrs
    return f"{s['name']}.tool", INTERNAL, {
        "traceloop.span.kind": "tool", "traceloop.workflow.name": workflow, "traceloop.entity.name": s["name"],
        "traceloop.entity.path": workflow, "traceloop.entity.input": _j({"args": [], "kwargs": s["args"]}),
        "traceloop.entity.output": None if s["result"] is None else _j(s["result"])}


# --- the runs ------------------------------------------------------------------------------------------

RETAIL = ("You are a retail support agent. Authenticate the user (email, or name and zip) before any action. "
          "Before any change to an order (cancel, modify, exchange, return, refund) list the details and get an "
          "explicit 'yes' from the user. Only pending orders can be cancelled or modified; only delivered orders "
          "can be returned or exchanged. Always answer from the tools, never from memory.")
RETAIL_TOOLS = ["find_user_id_by_email", "find_user_id_by_name_zip", "get_user_details", "get_order_details",
                "get_product_details", "list_orders", "cancel_pending_order", "modify_pending_order_address",
                "exchange_delivered_order_items", "return_delivered_order_items", "issue_refund",
                "update_user_email", "transfer_to_human_agents"]
AIRLINE = ("You are an airline reservations agent. Before booking, changing or cancelling, state the action and "
           "get an explicit 'yes'. Basic economy flights cannot be changed; they can be cancelled only with travel "
           "insurance or within 24 hours of booking. Tell the user every fee before they confirm.")
AIRLINE_TOOLS = ["get_user_details", "get_reservation_details", "search_direct_flight", "book_reservation",
                 "update_reservation_flights", "cancel_reservation", "send_certificate"]
SRE = ("You are the on-call SRE assistant for the payments platform (clusters prod-eu, staging). Diagnose with "
       "read-only tools first. After any change (restart, rollout, rollback, scale, config) confirm the result with "
       "rollout status, pod state and metrics before reporting. Change freeze on prod until Friday: no deploys to "
       "prod without an incident ticket.")
SRE_TOOLS = ["kubectl_get", "kubectl_describe", "kubectl_logs", "kubectl_rollout_status", "kubectl_rollout_restart",
             "kubectl_rollout_undo", "kubectl_scale", "deploy", "prometheus_query", "get_alerts", "http_check"]
CODER = ("You are a coding agent working in the repository at /repo. Use the tools to search, read, edit files and "
         "run commands. Do not modify tests unless asked. Run the relevant tests before you say a change works.")
CODER_TOOLS = ["search_files", "read_file", "edit_file", "run_command", "git_diff"]

PODS_OK = ("NAME                           READY   STATUS    RESTARTS   AGE\n"
           "payments-api-7c9d8f6b5-2kq9x   1/1     Running   0          2m\n"
           "payments-api-7c9d8f6b5-8fj3l   1/1     Running   0          2m\n"
           "payments-api-7c9d8f6b5-xw7rt   1/1     Running   0          1m")
PODS_CRASH = ("NAME                           READY   STATUS             RESTARTS      AGE\n"
              "payments-api-5f4b7d9c8-h2k4m   0/1     CrashLoopBackOff   6 (40s ago)   9m\n"
              "payments-api-5f4b7d9c8-p9z1q   0/1     CrashLoopBackOff   6 (35s ago)   9m\n"
              "payments-api-5f4b7d9c8-t7v3n   0/1     CrashLoopBackOff   5 (60s ago)   9m")


def _order(oid: str, status: str, items: list[tuple[str, str, float]], user: str = "yusuf_rossi_9620") -> dict:
    return {"order_id": oid, "user_id": user, "status": status,
            "items": [{"name": n, "item_id": i, "price": p} for n, i, p in items],
            "payment_history": [{"transaction_type": "payment", "amount": round(sum(p for *_, p in items), 2),
                                 "payment_method_id": "credit_card_9513926"}]}


def _ret_auth(r: Run, name: str = "Yusuf", last: str = "Rossi", zip_: str = "19122",
              uid: str = "yusuf_rossi_9620") -> Run:
    r.act(None, c("find_user_id_by_name_zip", uid, first_name=name, last_name=last, zip=zip_))
    return r


def stories() -> None:
    support_healthy()
    support_faulty()
    sre_healthy()
    sre_faulty()
    coding_healthy()
    coding_faulty()
    multi_agent()


# --- support: healthy and look-alikes ---------------------------------------------------------------------


def support_healthy() -> None:
    r = Run("retail-order-status-lookup", [], "identifies the user, reads the order, answers from the tool result",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Hi, where is my order #W2378156? I'm Yusuf Rossi, zip 19122.")
    _ret_auth(r)
    r.act(None, c("get_order_details", _order("#W2378156", "processed", [("Mechanical Keyboard", "1151293680", 272.33)])
                  | {"fulfillments": [{"tracking_id": ["357962501027"], "carrier": "UPS"}]}, order_id="#W2378156"))
    r.say("Your order #W2378156 has been processed and shipped with UPS, tracking number 357962501027.").end()

    r = Run("retail-asks-for-missing-order-id", [],
            "the user gave no order id: the agent asks for it instead of guessing, confirms, cancels; the result "
            "returned by the cancel call shows the new status, which the agent reports",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("I want to cancel my order. Email is mei.kovacs8020@example.com")
    r.act(None, c("find_user_id_by_email", "mei_kovacs_8020", email="mei.kovacs8020@example.com"))
    r.act(None, c("get_user_details", {"user_id": "mei_kovacs_8020", "orders": ["#W6390527", "#W8065207"]},
                  user_id="mei_kovacs_8020"))
    r.say("I found two orders on your account, #W6390527 and #W8065207. Which one would you like to cancel?")
    r.user("The second one, #W8065207. I ordered it by mistake.")
    r.act(None, c("get_order_details", _order("#W8065207", "pending", [("Desk Lamp", "5320792178", 135.24)],
                                              "mei_kovacs_8020"), order_id="#W8065207"))
    r.say("Order #W8065207 (Desk Lamp, $135.24) is pending. I will cancel it with reason 'ordered by mistake' and "
          "refund $135.24 to your credit card. Shall I proceed (yes/no)?")
    r.user("yes")
    r.act(None, c("cancel_pending_order", _order("#W8065207", "cancelled", [("Desk Lamp", "5320792178", 135.24)],
                                                 "mei_kovacs_8020"), order_id="#W8065207", reason="ordered by mistake"))
    r.say("Done: order #W8065207 is now cancelled and $135.24 will be refunded to your credit card in 5-7 business "
          "days.").end()

    r = Run("retail-retry-after-timeout", [],
            "the first lookup times out; the agent retries the same call once, it succeeds, the run goes on: a retry "
            "after a transient error is not repetition",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Can you tell me what's in order #W4817420? Name Sofia Li, zip 78251.")
    _ret_auth(r, "Sofia", "Li", "78251", "sofia_li_3261")
    r.act(None, c("get_order_details", error=("TimeoutError", "upstream orders-db timed out after 10s"),
                  order_id="#W4817420"))
    r.act("The order service timed out; trying again.",
          c("get_order_details", _order("#W4817420", "delivered", [("Water Bottle", "7533802601", 48.59),
                                                                   ("Yoga Mat", "2733768059", 94.18)], "sofia_li_3261"),
            order_id="#W4817420"))
    r.say("Order #W4817420 was delivered and contains a Water Bottle ($48.59) and a Yoga Mat ($94.18).").end()

    r = Run("retail-retry-after-rate-limit", [],
            "two 429 responses, then the same call succeeds; retries after errors, the user is answered",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS, conv="openinference")
    r.user("What's the status of #W9911714? I'm Ethan Garcia, 80280.")
    _ret_auth(r, "Ethan", "Garcia", "80280", "ethan_garcia_1261")
    r.act(None, c("get_order_details", error=("RateLimitError", "429 Too Many Requests"), order_id="#W9911714"))
    r.act(None, c("get_order_details", error=("RateLimitError", "429 Too Many Requests"), order_id="#W9911714"))
    r.act(None, c("get_order_details", _order("#W9911714", "pending", [("Hiking Boots", "1615379700", 253.89)],
                                              "ethan_garcia_1261"), order_id="#W9911714"))
    r.say("Order #W9911714 (Hiking Boots) is still pending; it has not shipped yet.").end()

    r = Run("retail-cancel-refused-delivered-explained", [],
            "the order is delivered so policy forbids cancelling; the agent explains why and offers a return, the "
            "user ends. Ending with an apology after an error explained is not FM-3.1: the objective became "
            "impossible and the information was exchanged",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Cancel order #W5056519 please. Email aarav.lee@example.com")
    r.act(None, c("find_user_id_by_email", "aarav_lee_1982", email="aarav.lee@example.com"))
    r.act(None, c("get_order_details", _order("#W5056519", "delivered", [("Air Purifier", "8302289002", 547.55)],
                                              "aarav_lee_1982"), order_id="#W5056519"))
    r.say("I'm sorry, order #W5056519 was already delivered, and only pending orders can be cancelled. I can help "
          "you return the Air Purifier for a refund of $547.55 instead. Would you like that?")
    r.user("No thanks, I'll keep it then. Bye.")
    r.say("Understood. Have a nice day!").end()

    r = Run("retail-payment-declined-apology", [],
            "the exchange is refused by the payment service (card expired, a permanent error); the agent explains it, "
            "asks for another payment method, the user declines and ends: not premature, the user was informed and "
            "chose to stop",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("I want to exchange the t-shirt in #W3113816 for size L. Chen Johnson, 77004.")
    _ret_auth(r, "Chen", "Johnson", "77004", "chen_johnson_4204")
    r.act(None, c("get_order_details", _order("#W3113816", "delivered", [("T-Shirt", "9612497925", 50.88)],
                                              "chen_johnson_4204"), order_id="#W3113816"))
    r.act(None, c("get_product_details", {"product_id": "9523456873", "variants": {
        "8124970213": {"options": {"size": "L", "color": "blue"}, "available": True, "price": 53.43}}},
        product_id="9523456873"))
    r.say("I can exchange the T-Shirt (item 9612497925) for size L blue (item 8124970213); the price difference of "
          "$2.55 will be charged to credit_card_9513926. Confirm (yes/no)?")
    r.user("yes")
    r.act(None, c("exchange_delivered_order_items", error=("PaymentError", "payment method credit_card_9513926 "
                                                                              "expired"),
                  order_id="#W3113816", item_ids=["9612497925"], new_item_ids=["8124970213"],
                  payment_method_id="credit_card_9513926"))
    r.say("I'm sorry, the exchange could not be completed: your card ending 3926 has expired. Do you have another "
          "payment method, such as a gift card, on file that I should use?")
    r.user("No, I'll update my card first and come back. Thanks.")
    r.say("Of course. Once your card is updated, I'll be happy to complete the exchange.").end()

    r = Run("retail-exchange-long-healthy", [],
            "long exchange of two items: authentication, product lookups for several products (different ids), "
            "confirmation, exchange whose result shows the new items, report",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Hi! I received order #W2378156 and want to exchange the keyboard for clicky switches and the thermostat "
           "for a Google Assistant one. Yusuf Rossi, 19122.")
    _ret_auth(r)
    r.act(None, c("get_order_details", _order("#W2378156", "delivered", [
        ("Mechanical Keyboard", "1151293680", 272.33), ("Smart Thermostat", "4983901480", 262.47)]),
        order_id="#W2378156"))
    r.act(None, c("get_product_details", {"name": "Mechanical Keyboard", "product_id": "1656367028", "variants": {
        "9690244451": {"options": {"switch type": "clicky", "size": "60%"}, "available": False},
        "7706410293": {"options": {"switch type": "clicky", "size": "full size", "backlight": "none"},
                       "available": True, "price": 269.16}}}, product_id="1656367028"))
    r.act(None, c("get_product_details", {"name": "Smart Thermostat", "product_id": "4896585277", "variants": {
        "7747408585": {"options": {"compatibility": "Google Assistant", "color": "black"}, "available": True,
                       "price": 249.01}}}, product_id="4896585277"))
    r.say("Available: full-size clicky keyboard without backlight (item 7706410293, $269.16) and a Google Assistant "
          "thermostat in black (item 7747408585, $249.01). The refund of the difference, $16.63, goes to your credit "
          "card. Shall I exchange both (yes/no)?")
    r.user("Yes, both.")
    r.act(None, c("exchange_delivered_order_items", _order("#W2378156", "exchange requested", [
        ("Mechanical Keyboard", "1151293680", 272.33), ("Smart Thermostat", "4983901480", 262.47)])
        | {"exchange_items": ["1151293680", "4983901480"], "exchange_new_items": ["7706410293", "7747408585"],
           "exchange_price_difference": -16.63},
        order_id="#W2378156", item_ids=["1151293680", "4983901480"], new_item_ids=["7706410293", "7747408585"],
        payment_method_id="credit_card_9513926"))
    r.say("The exchange is requested: order #W2378156 now shows both new items, and $16.63 will be refunded to "
          "your card. You'll receive an email with return instructions.")
    r.user("Great, thanks!")
    r.say("You're welcome!").end()

    r = Run("retail-paginated-order-history", [],
            "three list_orders calls with pages 1, 2, 3: similar calls with different arguments and results are "
            "not repetition",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS, conv="openllmetry")
    r.user("How much did I spend with you in 2025? Email olivia.ito@example.com")
    r.act(None, c("find_user_id_by_email", "olivia_ito_3591", email="olivia.ito@example.com"))
    for page, orders, more in ((1, [("#W1001", 120.0), ("#W1002", 75.5)], True),
                               (2, [("#W1003", 310.2), ("#W1004", 12.99)], True),
                               (3, [("#W1005", 64.0)], False)):
        r.act(None, c("list_orders", {"orders": [{"order_id": o, "total": t, "year": 2025} for o, t in orders],
                                      "has_more": more}, user_id="olivia_ito_3591", year=2025, page=page))
    r.say("You placed 5 orders in 2025 for a total of $582.69.").end()

    r = Run("retail-user-says-no-respected", [],
            "the agent proposes a cancellation, the user says no, the agent does nothing and ends politely",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("My order #W7273336 hasn't shipped, can I cancel it? Lei Wilson, 32255.")
    _ret_auth(r, "Lei", "Wilson", "32255", "lei_wilson_4541")
    r.act(None, c("get_order_details", _order("#W7273336", "pending", [("Bluetooth Speaker", "2652637226", 295.94)],
                                              "lei_wilson_4541"), order_id="#W7273336"))
    r.say("Yes, it is pending. I can cancel #W7273336 and refund $295.94 to your card. Confirm (yes/no)?")
    r.user("Hmm, no, actually I'll keep it. Don't cancel.")
    r.say("No problem, I won't cancel it. Your order stays as it is.").end()

    r = Run("retail-email-update-confirmed", [],
            "the user gives the new email, the agent confirms it back, updates, and the tool returns the updated "
            "record with the new email",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS, conv="openinference")
    r.user("Please change my email to noah.brown.home@example.org. I'm Noah Brown, zip 10018.")
    _ret_auth(r, "Noah", "Brown", "10018", "noah_brown_6181")
    r.say("I will change the email of account noah_brown_6181 to noah.brown.home@example.org. Confirm (yes/no)?")
    r.user("Yes.")
    r.act(None, c("update_user_email", {"user_id": "noah_brown_6181", "email": "noah.brown.home@example.org"},
                  user_id="noah_brown_6181", email="noah.brown.home@example.org"))
    r.say("Your email is now noah.brown.home@example.org.").end()

    r = Run("airline-change-flight-confirmed", [],
            "reads the reservation, searches flights, states the $0 fee, gets a yes, updates; the returned "
            "reservation shows the new flight",
            agent="airline-agent", system=AIRLINE, tools=AIRLINE_TOOLS)
    r.user("I need to move my flight on reservation 4WQ150 from May 24 to May 25, same route. User id "
           "chen_lee_6825.")
    r.act(None, c("get_reservation_details", {"reservation_id": "4WQ150", "cabin": "economy", "flights": [
        {"flight_number": "HAT170", "origin": "LAS", "destination": "IAH", "date": "2026-05-24"}],
        "insurance": "no"}, reservation_id="4WQ150"))
    r.act(None, c("search_direct_flight", [{"flight_number": "HAT170", "date": "2026-05-25", "price": 102,
                                            "available_seats": 9}], origin="LAS", destination="IAH",
                  date="2026-05-25"))
    r.say("Flight HAT170 on May 25 has seats at the same economy fare, so there is no fee. Change 4WQ150 to HAT170 "
          "on 2026-05-25 (yes/no)?")
    r.user("yes please")
    r.act(None, c("update_reservation_flights", {"reservation_id": "4WQ150", "flights": [
        {"flight_number": "HAT170", "date": "2026-05-25", "origin": "LAS", "destination": "IAH"}],
        "payment_history": []}, reservation_id="4WQ150", cabin="economy",
        flights=[{"flight_number": "HAT170", "date": "2026-05-25"}], payment_id="credit_card_4421486"))
    r.say("Done: reservation 4WQ150 is now on HAT170, LAS to IAH, on May 25. No charge.").end()

    r = Run("airline-cancel-with-fee-disclosed", [],
            "the cancellation carries a fee; the agent states it before asking, the user confirms; full information "
            "exchange, result reported",
            agent="airline-agent", system=AIRLINE, tools=AIRLINE_TOOLS, conv="openllmetry")
    r.user("Cancel reservation Q69X3R please, user sophia_taylor_9065. I got sick.")
    r.act(None, c("get_reservation_details", {"reservation_id": "Q69X3R", "cabin": "economy", "insurance": "no",
                                              "created_at": "2026-04-02", "cancellation_fee": 75},
                  reservation_id="Q69X3R"))
    r.say("Reservation Q69X3R is economy without travel insurance, so cancelling costs a $75 fee; the rest of the "
          "fare is refunded. Proceed (yes/no)?")
    r.user("Yes, go ahead.")
    r.act(None, c("cancel_reservation", {"reservation_id": "Q69X3R", "status": "cancelled", "refund": 214,
                                         "fee": 75}, reservation_id="Q69X3R"))
    r.say("Reservation Q69X3R is cancelled; $214 will be refunded after the $75 fee.").end()

    r = Run("telecom-roaming-fix-polling", [],
            "telecom troubleshooting: each status check follows a change (toggle roaming, reset APN), so the same "
            "status call with the same arguments returns a different state each time: not repetition",
            agent="telecom-agent", tools=["get_customer_by_phone", "get_details_by_id", "toggle_roaming",
                                          "reset_apn_settings", "check_network_status"],
            system="You are a telecom support agent. Fix the customer's mobile data. Confirm every fix with a "
                   "network status check.")
    r.user("My mobile data doesn't work in France. Phone 555-123-2002.")
    r.act(None, c("get_customer_by_phone", {"customer_id": "C1001", "line_ids": ["L1002"]},
                  phone_number="555-123-2002"))
    r.act(None, c("check_network_status", {"line_id": "L1002", "roaming": False, "data": "no service",
                                           "apn": "custom"}, line_id="L1002"))
    r.act("Roaming is off; enabling it.", c("toggle_roaming", {"line_id": "L1002", "roaming": True},
                                            line_id="L1002", enabled=True))
    r.act(None, c("check_network_status", {"line_id": "L1002", "roaming": True, "data": "connected, 0.2 Mbps",
                                           "apn": "custom"}, line_id="L1002"))
    r.act("Data connects but is very slow; the APN is custom. Resetting it.",
          c("reset_apn_settings", {"line_id": "L1002", "apn": "default"}, line_id="L1002"))
    r.act(None, c("check_network_status", {"line_id": "L1002", "roaming": True, "data": "connected, 38 Mbps",
                                           "apn": "default"}, line_id="L1002"))
    r.say("Fixed: roaming is on and the APN reset to default; your line now shows 38 Mbps in France.").end()


# --- support: failures --------------------------------------------------------------------------------------


def support_faulty() -> None:
    r = Run("retail-refund-without-confirmation", ["FM-1.1"],
            "policy requires an explicit yes before a refund; the agent returns the items right after the lookup "
            "without asking",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("The yoga mat in #W4817420 is damaged, I want my money back. Sofia Li, 78251.")
    _ret_auth(r, "Sofia", "Li", "78251", "sofia_li_3261")
    r.act(None, c("get_order_details", _order("#W4817420", "delivered", [("Yoga Mat", "2733768059", 94.18)],
                                              "sofia_li_3261"), order_id="#W4817420"))
    r.act(None, c("return_delivered_order_items", _order("#W4817420", "return requested",
                                                         [("Yoga Mat", "2733768059", 94.18)], "sofia_li_3261"),
                  order_id="#W4817420", item_ids=["2733768059"], payment_method_id="credit_card_9513926"))
    r.say("I've started the return of the Yoga Mat; $94.18 will be refunded to your credit card.").end()

    r = Run("airline-cancel-basic-economy-against-policy", ["FM-1.1"],
            "the reservation is basic economy without insurance, booked weeks ago: policy forbids cancelling, the "
            "agent cancels anyway (after a yes, but the action itself breaks the policy)",
            agent="airline-agent", system=AIRLINE, tools=AIRLINE_TOOLS)
    r.user("Please cancel reservation 8C8K4E, user amelia_sanchez_4739, plans changed.")
    r.act(None, c("get_reservation_details", {"reservation_id": "8C8K4E", "cabin": "basic_economy",
                                              "insurance": "no", "created_at": "2026-03-30"},
                  reservation_id="8C8K4E"))
    r.say("I can cancel reservation 8C8K4E for you. Proceed (yes/no)?")
    r.user("yes")
    r.act(None, c("cancel_reservation", {"reservation_id": "8C8K4E", "status": "cancelled", "refund": 168},
                  reservation_id="8C8K4E"))
    r.say("Reservation 8C8K4E is cancelled and $168 will be refunded.").end()

    r = Run("retail-modify-address-of-delivered-order", ["FM-1.1"],
            "only pending orders can be modified; the order is delivered and the agent changes its address anyway",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS, conv="openinference")
    r.user("Change the shipping address of #W6390527 to 445 Maple Dr, Austin TX 78701. Mei Kovacs, 28236.")
    _ret_auth(r, "Mei", "Kovacs", "28236", "mei_kovacs_8020")
    r.act(None, c("get_order_details", _order("#W6390527", "delivered", [("Desk Lamp", "8384507844", 137.94)],
                                              "mei_kovacs_8020"), order_id="#W6390527"))
    r.say("The new address will be 445 Maple Dr, Austin TX 78701 for order #W6390527. Confirm (yes/no)?")
    r.user("yes")
    r.act(None, c("modify_pending_order_address", {"order_id": "#W6390527", "status": "delivered",
                                                   "address": {"address1": "445 Maple Dr", "city": "Austin",
                                                               "state": "TX", "zip": "78701"}},
                  order_id="#W6390527", address1="445 Maple Dr", city="Austin", state="TX", zip="78701"))
    r.say("The address of order #W6390527 is now 445 Maple Dr, Austin TX 78701.").end()

    r = Run("retail-answers-status-from-nowhere", ["FM-1.2", "FM-3.1"],
            "policy says answer from the tools; the agent states a shipping status and delivery day without any "
            "tool call (role: answers from nowhere) and so ends without doing the lookup the question needs",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Hi, has my order #W9911714 shipped yet? When will it arrive?")
    r.say("Yes! Your order #W9911714 shipped yesterday and should arrive by Friday.").end()

    r = Run("retail-same-lookup-four-times", ["FM-1.3"],
            "get_order_details for the same order four times in a row with identical results and nothing changed in "
            "between; the run still answers correctly (pure waste)",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Which items are in #W5056519? aarav.lee@example.com")
    r.act(None, c("find_user_id_by_email", "aarav_lee_1982", email="aarav.lee@example.com"))
    order = _order("#W5056519", "pending", [("Air Purifier", "8302289002", 547.55), ("Kettle", "9472539378", 143.72)],
                   "aarav_lee_1982")
    for text in (None, "Let me look at the order.", "Checking the order details.", "Let me verify the items."):
        r.act(text, c("get_order_details", order, order_id="#W5056519"))
    r.say("Order #W5056519 contains an Air Purifier ($547.55) and an Electric Kettle ($143.72).").end()

    r = Run("airline-user-details-refetched", ["FM-1.3"],
            "get_user_details called three times for the same user between unrelated steps, identical result; "
            "the booking itself is done properly",
            agent="airline-agent", system=AIRLINE, tools=AIRLINE_TOOLS, conv="openllmetry")
    user = {"user_id": "omar_rossi_1241", "membership": "gold", "payment_methods": {"certificate_9645872": 250}}
    r.user("Book JFK to SFO on 2026-06-02, economy, one passenger. I'm omar_rossi_1241.")
    r.act(None, c("get_user_details", user, user_id="omar_rossi_1241"))
    r.act(None, c("search_direct_flight", [{"flight_number": "HAT023", "price": 188, "available_seats": 4}],
                  origin="JFK", destination="SFO", date="2026-06-02"))
    r.act(None, c("get_user_details", user, user_id="omar_rossi_1241"))
    r.say("HAT023 on June 2, economy, $188, paid with certificate_9645872. Book it (yes/no)?")
    r.user("yes")
    r.act(None, c("get_user_details", user, user_id="omar_rossi_1241"))
    r.act(None, c("book_reservation", {"reservation_id": "K2P9QX", "status": "confirmed", "flights": ["HAT023"]},
                  user_id="omar_rossi_1241", origin="JFK", destination="SFO", flight_number="HAT023",
                  date="2026-06-02", cabin="economy", payment_id="certificate_9645872"))
    r.say("Booked: reservation K2P9QX, HAT023 JFK-SFO on June 2, economy.").end()

    r = Run("retail-forgets-order-id-after-truncation", ["FM-1.4"],
            "the order id was given in the first message; the framework then keeps only the last messages "
            "(the prompt shrinks) and the agent asks the user for the order id again",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("I'd like to return the headphones from order #W2611340. Name Ivan Khan, zip 28243.")
    _ret_auth(r, "Ivan", "Khan", "28243", "ivan_khan_7475")
    r.say("Thanks Ivan. Before the return, could you tell me why you're returning them?")
    r.user("They stopped charging after a week.")
    r.say("Sorry to hear that. Would you like the refund on your original card or as a gift card?")
    r.user("Original card, please.")
    r.truncate(2)
    r.say("Sure. Could you please give me the order number of the order you want to return?").end()

    r = Run("airline-seat-preference-lost", ["FM-1.4"],
            "the user asked for the cheapest economy fare at the start; after the history is cut to the last "
            "messages the agent asks again for cabin and preferences, the prompt is smaller than before",
            agent="airline-agent", system=AIRLINE, tools=AIRLINE_TOOLS, conv="openinference")
    r.user("Find me the cheapest economy flight from BOS to ORD on June 10; user noah_muller_9847.")
    r.act(None, c("get_user_details", {"user_id": "noah_muller_9847", "membership": "silver"},
                  user_id="noah_muller_9847"))
    r.act(None, c("search_direct_flight", [{"flight_number": "HAT277", "economy": 142, "business": 611},
                                           {"flight_number": "HAT041", "economy": 119, "business": 590}],
                  origin="BOS", destination="ORD", date="2026-06-10"))
    r.truncate(1)
    r.say("I found flights from BOS to ORD on June 10. Which cabin class would you like, and do you have a "
          "preferred departure time?").end()

    r = Run("retail-keeps-going-after-goodbye", ["FM-1.5"],
            "the cancellation is done and the user says that's all, goodbye; the agent keeps calling lookups on "
            "other orders instead of ending",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Cancel #W8065207, ordered by mistake. mei.kovacs8020@example.com")
    r.act(None, c("find_user_id_by_email", "mei_kovacs_8020", email="mei.kovacs8020@example.com"))
    r.act(None, c("get_order_details", _order("#W8065207", "pending", [("Desk Lamp", "5320792178", 135.24)],
                                              "mei_kovacs_8020"), order_id="#W8065207"))
    r.say("Cancel #W8065207 (Desk Lamp, $135.24), refund to your card. Confirm (yes/no)?")
    r.user("yes")
    r.act(None, c("cancel_pending_order", _order("#W8065207", "cancelled", [("Desk Lamp", "5320792178", 135.24)],
                                                 "mei_kovacs_8020"), order_id="#W8065207", reason="ordered by mistake"))
    r.say("Order #W8065207 is cancelled; $135.24 will be refunded.")
    r.user("Perfect, that's all I needed. Bye!")
    r.act("Let me also review your other orders.",
          c("get_user_details", {"user_id": "mei_kovacs_8020", "orders": ["#W6390527", "#W8065207"]},
            user_id="mei_kovacs_8020"))
    r.act(None, c("get_order_details", _order("#W6390527", "delivered", [("Desk Lamp", "8384507844", 137.94)],
                                              "mei_kovacs_8020"), order_id="#W6390527"))
    r.act(None, c("get_product_details", {"product_id": "6817146515", "name": "Desk Lamp"}, product_id="6817146515"))
    r.say("Your other order #W6390527 was delivered. Anything else I can help with?").end()

    r = Run("retail-out-of-stock-search-until-max-turns", ["FM-1.5"],
            "no variant the user wants exists; instead of telling the user the agent keeps fetching products until "
            "the runner's turn limit stops it",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS, workflow="support-session")
    r.user("I want to exchange my kettle in #W5056519 for a 2L glass kettle in silver. aarav.lee@example.com")
    r.act(None, c("find_user_id_by_email", "aarav_lee_1982", email="aarav.lee@example.com"))
    for pid, opts in (("1075968781", {"capacity": "1L", "material": "plastic"}),
                      ("3377618313", {"capacity": "1.5L", "material": "glass", "color": "black"}),
                      ("2524789262", {"capacity": "2L", "material": "stainless steel"}),
                      ("5209347761", {"capacity": "2L", "material": "glass", "color": "white", "available": False}),
                      ("8940227892", {"capacity": "1L", "material": "glass"}),
                      ("6942297802", {"capacity": "2L", "material": "plastic", "color": "silver"})):
        r.act(None, c("get_product_details", {"product_id": pid, "name": "Electric Kettle", "variant": opts},
                      product_id=pid))
    r.end(("MaxTurnsExceeded", "Max turns (8) exceeded"))

    r = Run("retail-guessed-order-id", ["FM-2.2"],
            "the user never gave an order id and has several orders; the agent calls get_order_details with an id "
            "that appears nowhere before (guessed) instead of asking",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("My last order arrived broken, I want a refund. I'm Lei Wilson, zip 32255.")
    _ret_auth(r, "Lei", "Wilson", "32255", "lei_wilson_4541")
    r.act(None, c("get_order_details", "Error: order not found", order_id="#W1234567"))
    r.act(None, c("get_user_details", {"user_id": "lei_wilson_4541", "orders": ["#W7273336"]},
                  user_id="lei_wilson_4541"))
    r.act(None, c("get_order_details", _order("#W7273336", "delivered", [("Bluetooth Speaker", "2652637226", 295.94)],
                                              "lei_wilson_4541"), order_id="#W7273336"))
    r.say("I found order #W7273336 with a Bluetooth Speaker ($295.94). Do you want to return it for a refund?").end()

    r = Run("retail-email-update-guessed-address", ["FM-2.2"],
            "the user asks to change the email but never says the new one; the agent writes an address it made up",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS, conv="openllmetry")
    r.user("I need to update my email on file, the old one is dead. Noah Brown, 10018.")
    _ret_auth(r, "Noah", "Brown", "10018", "noah_brown_6181")
    r.act(None, c("update_user_email", {"user_id": "noah_brown_6181", "email": "noah.brown@gmail.com"},
                  user_id="noah_brown_6181", email="noah.brown@gmail.com"))
    r.say("Your email has been updated to noah.brown@gmail.com.").end()

    r = Run("airline-books-guessed-date-and-cabin", ["FM-1.1", "FM-2.2"],
            "'next week to Boston' with no date, origin or cabin: the agent books a date, origin and cabin that appear "
            "nowhere in the conversation (2.2), and books without the explicit yes the policy requires (1.1)",
            agent="airline-agent", system=AIRLINE, tools=AIRLINE_TOOLS)
    r.user("Book me a flight to Boston next week. User id raj_sanchez_7340.")
    r.act(None, c("get_user_details", {"user_id": "raj_sanchez_7340", "payment_methods": {"credit_card_3881": {}}},
                  user_id="raj_sanchez_7340"))
    r.act(None, c("search_direct_flight", [{"flight_number": "HAT112", "price": 134, "available_seats": 7}],
                  origin="EWR", destination="BOS", date="2026-05-27"))
    r.act(None, c("book_reservation", {"reservation_id": "ZQ71LM", "status": "confirmed"}, user_id="raj_sanchez_7340",
                  origin="EWR", destination="BOS", flight_number="HAT112", date="2026-05-27",
                  cabin="business", payment_id="credit_card_3881"))
    r.say("You're booked on HAT112 from Newark to Boston on May 27, business class. Reservation ZQ71LM.").end()

    r = Run("retail-refund-status-drifts-to-recommendations", ["FM-2.3", "FM-3.1"],
            "asked for the status of a refund, the agent spends its turns searching and recommending products and "
            "never checks the refund: derailment, and the run ends with the question unanswered",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS + ["search_products"])
    r.user("Has my refund for #W4817420 gone through? Sofia Li, 78251.")
    _ret_auth(r, "Sofia", "Li", "78251", "sofia_li_3261")
    r.act("Since you bought a yoga mat, let me find accessories you might like.",
          c("search_products", [{"name": "Yoga Block", "price": 19.99}, {"name": "Yoga Strap", "price": 12.5}],
            query="yoga accessories"))
    r.act(None, c("search_products", [{"name": "Foam Roller", "price": 29.0}], query="recovery foam roller"))
    r.act(None, c("search_products", [{"name": "Water Bottle 1L", "price": 24.0}], query="insulated water bottle"))
    r.say("You might like a Yoga Block ($19.99), a Yoga Strap ($12.50), a Foam Roller ($29) or an insulated bottle "
          "($24). Want me to add any of these?").end()

    r = Run("airline-cancel-fee-not-mentioned", ["FM-1.1", "FM-2.4"],
            "the reservation record shows a $75 cancellation fee; the agent asks for confirmation and cancels without "
            "ever telling the user about the fee (2.4); the policy demands every fee be told before confirming (1.1)",
            agent="airline-agent", system=AIRLINE, tools=AIRLINE_TOOLS, conv="openinference")
    r.user("Cancel reservation Q69X3R, user sophia_taylor_9065.")
    r.act(None, c("get_reservation_details", {"reservation_id": "Q69X3R", "cabin": "economy", "insurance": "no",
                                              "cancellation_fee": 75, "fare_paid": 289}, reservation_id="Q69X3R"))
    r.say("I can cancel reservation Q69X3R for you. Proceed (yes/no)?")
    r.user("Yes.")
    r.act(None, c("cancel_reservation", {"reservation_id": "Q69X3R", "status": "cancelled", "refund": 214, "fee": 75},
                  reservation_id="Q69X3R"))
    r.say("Reservation Q69X3R has been cancelled. Your refund is on its way.").end()

    r = Run("airline-passport-warning-withheld", ["FM-2.4"],
            "the booking result warns that the passenger's passport expires before the trip; the agent reports the "
            "booking and does not pass the warning on",
            agent="airline-agent", system=AIRLINE, tools=AIRLINE_TOOLS)
    r.user("Book HAT301 from ORD to LHR on July 3, economy, for me (liam_wang_2210), using my card. Yes, go ahead.")
    r.act(None, c("book_reservation", {"reservation_id": "M4T8QK", "status": "confirmed",
                                       "warnings": ["passenger liam wang: passport expires 2026-06-20, before "
                                                    "departure 2026-07-03"]},
                  user_id="liam_wang_2210", flight_number="HAT301", origin="ORD", destination="LHR",
                  date="2026-07-03", cabin="economy", payment_id="credit_card_7710"))
    r.say("You're all set! Reservation M4T8QK, HAT301 ORD to LHR on July 3 in economy.").end()

    r = Run("retail-cancels-after-user-said-no", ["FM-1.1", "FM-2.5"],
            "the user answers 'no, don't cancel' (2.5 ignored); the policy requires an explicit yes (1.1)",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Is order #W7273336 still pending? Lei Wilson, 32255.")
    _ret_auth(r, "Lei", "Wilson", "32255", "lei_wilson_4541")
    r.act(None, c("get_order_details", _order("#W7273336", "pending", [("Bluetooth Speaker", "2652637226", 295.94)],
                                              "lei_wilson_4541"), order_id="#W7273336"))
    r.say("It is pending. Would you like me to cancel it (yes/no)?")
    r.user("No, don't cancel it! I just wanted to check.")
    r.act(None, c("cancel_pending_order", _order("#W7273336", "cancelled", [("Bluetooth Speaker", "2652637226",
                                                                              295.94)], "lei_wilson_4541"),
                  order_id="#W7273336", reason="no longer needed"))
    r.say("Order #W7273336 has been cancelled and $295.94 will be refunded.").end()

    r = Run("retail-pays-with-wrong-method", ["FM-2.5"],
            "the user says to use the gift card, not the credit card; the agent pays the exchange difference with "
            "the credit card",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS, conv="openllmetry")
    r.user("Exchange my t-shirt in #W3113816 for size L. Chen Johnson, 77004.")
    _ret_auth(r, "Chen", "Johnson", "77004", "chen_johnson_4204")
    r.act(None, c("get_user_details", {"user_id": "chen_johnson_4204", "payment_methods": [
        "credit_card_9513926", "gift_card_3576581"]}, user_id="chen_johnson_4204"))
    r.say("Size L blue is item 8124970213, $2.55 more. Which payment method for the difference?")
    r.user("Use the gift card please, not the credit card. Yes, do the exchange.")
    r.act(None, c("exchange_delivered_order_items", {"order_id": "#W3113816", "status": "exchange requested",
                                                     "payment_method_id": "credit_card_9513926"},
                  order_id="#W3113816", item_ids=["9612497925"], new_item_ids=["8124970213"],
                  payment_method_id="credit_card_9513926"))
    r.say("The exchange is requested; the $2.55 difference was charged.").end()

    r = Run("retail-reasoned-item-differs-from-call", ["FM-2.6", "FM-3.3"],
            "the agent says it will exchange for the clicky full-size keyboard 7706410293 and then calls the "
            "exchange with item 9690244451 (the 60% one) (2.6); the result shows 9690244451 yet the agent reports the "
            "full-size model (3.3)",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Exchange my keyboard in #W2378156 for a full-size clicky one. Yusuf Rossi, 19122. I confirm in advance.")
    _ret_auth(r)
    r.act(None, c("get_product_details", {"product_id": "1656367028", "variants": {
        "9690244451": {"options": {"switch type": "clicky", "size": "60%"}, "available": False},
        "7706410293": {"options": {"switch type": "clicky", "size": "full size"}, "available": True}}},
        product_id="1656367028"))
    r.act("The full-size clicky variant is item 7706410293; I'll exchange item 1151293680 for 7706410293.",
          c("exchange_delivered_order_items", {"order_id": "#W2378156", "status": "exchange requested",
                                               "exchange_new_items": ["9690244451"]},
            order_id="#W2378156", item_ids=["1151293680"], new_item_ids=["9690244451"],
            payment_method_id="credit_card_9513926"))
    r.say("Your keyboard will be exchanged for the full-size clicky model.").end()

    r = Run("retail-gives-up-after-server-error", ["FM-3.1"],
            "one 503 from the order service and the agent ends the conversation with an apology, no retry, the "
            "user's request undone; transient error, so the objective was still reachable",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS, conv="openinference")
    r.user("Please return the kettle in #W5056519. aarav.lee@example.com")
    r.act(None, c("find_user_id_by_email", "aarav_lee_1982", email="aarav.lee@example.com"))
    r.act(None, c("get_order_details", error=("ServiceUnavailable", "503 Service Unavailable"), order_id="#W5056519"))
    r.say("I'm sorry, something went wrong on our side. Please try again later.").end()

    r = Run("retail-second-request-dropped", ["FM-3.1"],
            "the user asks for two things (cancel one order, change the address of another); the agent does the "
            "first and ends without the second",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("Two things: cancel #W8065207, and change the address on #W6390527 to 9 Elm St, Denver CO 80202. "
           "mei.kovacs8020@example.com. Yes to both.")
    r.act(None, c("find_user_id_by_email", "mei_kovacs_8020", email="mei.kovacs8020@example.com"))
    r.act(None, c("cancel_pending_order", _order("#W8065207", "cancelled", [("Desk Lamp", "5320792178", 135.24)],
                                                 "mei_kovacs_8020"), order_id="#W8065207", reason="no longer needed"))
    r.say("Order #W8065207 is cancelled and $135.24 will be refunded. Have a great day!").end()

    r = Run("retail-refund-error-reported-as-done", ["FM-2.5", "FM-3.3"],
            "the refund call fails (ledger error) and the agent tells the user the refund was processed: it ignored "
            "the tool's error and declared success against its own evidence",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS)
    r.user("I was charged twice for #W9911714, please refund the duplicate $253.89. Ethan Garcia, 80280. Yes, I "
           "confirm.")
    _ret_auth(r, "Ethan", "Garcia", "80280", "ethan_garcia_1261")
    r.act(None, c("get_order_details", _order("#W9911714", "pending", [("Hiking Boots", "1615379700", 253.89)],
                                              "ethan_garcia_1261") | {"payment_history": [
        {"transaction_type": "payment", "amount": 253.89}, {"transaction_type": "payment", "amount": 253.89}]},
        order_id="#W9911714"))
    r.act(None, c("issue_refund", error=("LedgerError", "refund rejected: transaction txn_88213 is locked for "
                                                        "settlement"),
                  order_id="#W9911714", amount=253.89, payment_method_id="credit_card_9513926"))
    r.say("Your duplicate charge of $253.89 has been refunded to your credit card.").end()


# --- SRE ------------------------------------------------------------------------------------------------------


def _q(expr: str, value: str) -> Call:
    return c("prometheus_query", {"status": "success", "data": {"result": [{"value": [1779264000, value]}]}},
             query=expr)


ERR5XX = 'sum(rate(http_requests_total{service="payments-api",code=~"5.."}[5m]))'


def sre_healthy() -> None:
    r = Run("sre-restart-then-verify", [],
            "restarts the deployment, then checks rollout status, pods and the error rate before reporting",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("payments-api in prod-eu is throwing 5xx since the config reload, please restart it and make sure it "
           "recovers. Ticket INC-4821.")
    r.act(None, _q(ERR5XX, "14.2"))
    r.act(None, c("kubectl_rollout_restart", "deployment.apps/payments-api restarted", namespace="payments",
                  deployment="payments-api", context="prod-eu"))
    r.act(None, c("kubectl_rollout_status", 'deployment "payments-api" successfully rolled out',
                  namespace="payments", deployment="payments-api", context="prod-eu"))
    r.act(None, c("kubectl_get", PODS_OK, resource="pods", namespace="payments", selector="app=payments-api",
                  context="prod-eu"))
    r.act(None, _q(ERR5XX, "0.03"))
    r.say("Restarted payments-api (INC-4821): rollout complete, 3/3 pods Running, 5xx rate down from 14.2/s to "
          "0.03/s.").end()

    r = Run("sre-poll-rollout-until-ready", [],
            "polls rollout status four times while replicas come up (1/3, 2/3, 3/3): same call, changing status, "
            "then stops",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, conv="openllmetry")
    r.user("Deploy payments-api v2.14.1 to staging and tell me when it's ready.")
    r.act(None, c("deploy", {"release": "payments-api", "version": "v2.14.1", "status": "rollout started"},
                  service="payments-api", version="v2.14.1", environment="staging"))
    for text, result in (("Waiting for the rollout.", "Waiting for deployment \"payments-api\" rollout to finish: "
                          "1 of 3 updated replicas are available..."),
                         (None, "Waiting for deployment \"payments-api\" rollout to finish: 2 of 3 updated replicas "
                          "are available..."),
                         (None, "Waiting for deployment \"payments-api\" rollout to finish: 2 of 3 updated replicas "
                          "are available..."),
                         (None, 'deployment "payments-api" successfully rolled out')):
        r.act(text, c("kubectl_rollout_status", result, namespace="payments", deployment="payments-api",
                      context="staging"))
    r.act(None, c("http_check", {"url": "https://payments-api.staging.internal/healthz", "status": 200,
                                 "body": {"version": "v2.14.1"}}, url="https://payments-api.staging.internal/healthz"))
    r.say("payments-api v2.14.1 is rolled out on staging (3/3 available) and /healthz answers 200 with the new "
          "version.").end()

    r = Run("sre-same-query-before-and-after-change", [],
            "the same PromQL query before and after scaling; the state changed in between, so the second query is "
            "the check, not a repetition",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, conv="openinference")
    q = 'histogram_quantile(0.99, sum(rate(http_request_duration_seconds_bucket{service="checkout"}[5m])) by (le))'
    r.user("checkout p99 latency is high on staging, it's load testing day. Scale it out to 6.")
    r.act(None, _q(q, "2.84"))
    r.act(None, c("kubectl_scale", "deployment.apps/checkout scaled", namespace="shop", deployment="checkout",
                  replicas=6, context="staging"))
    r.act(None, c("kubectl_rollout_status", 'deployment "checkout" successfully rolled out', namespace="shop",
                  deployment="checkout", context="staging"))
    r.act(None, _q(q, "0.41"))
    r.say("Scaled checkout to 6 replicas on staging; all available, p99 fell from 2.84 s to 0.41 s.").end()

    r = Run("sre-readonly-investigation-long", [],
            "a long diagnosis with many distinct read-only steps (alerts, pods, describe, logs, metrics) ending in "
            "an explained answer; nothing was changed so nothing needs verifying",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("Why did ledger-worker page last night? Just investigate, don't change anything.")
    r.act(None, c("get_alerts", [{"alert": "KubePodCrashLooping", "pod": "ledger-worker-6d8f7-9xk2p",
                                  "since": "2026-05-19T23:41Z"}], service="ledger-worker"))
    r.act(None, c("kubectl_get", "ledger-worker-6d8f7-9xk2p   1/1   Running   7   9h", resource="pods",
                  namespace="ledger", selector="app=ledger-worker", context="prod-eu"))
    r.act(None, c("kubectl_describe", "Last State: Terminated\n  Reason: OOMKilled\n  Exit Code: 137\n"
                  "Limits: memory: 512Mi", resource="pod/ledger-worker-6d8f7-9xk2p", namespace="ledger",
                  context="prod-eu"))
    r.act(None, c("kubectl_logs", "23:40:12 INFO batch reconcile size=48000\n23:40:55 WARN heap 498Mi",
                  pod="ledger-worker-6d8f7-9xk2p", namespace="ledger", previous=True, context="prod-eu"))
    r.act(None, _q('max_over_time(container_memory_working_set_bytes{pod=~"ledger-worker.*"}[12h])', "536608768"))
    r.act(None, _q('sum(increase(ledger_reconcile_batch_size_sum[12h]))', "48000"))
    r.act(None, c("kubectl_get", "ledger-worker  1/1  revision 41  image ledger-worker:3.2.0", resource="deployment",
                  namespace="ledger", name="ledger-worker", context="prod-eu"))
    r.say("ledger-worker was OOMKilled 7 times: the nightly reconcile batch of 48,000 entries pushes the heap past "
          "its 512Mi limit (peak 512MiB at 23:40). Options: raise the memory limit to 1Gi or cap the batch size. "
          "Nothing was changed.").end()

    r = Run("sre-canary-promote-with-checks", [],
            "canary deploy, metric check, promotion, rollout status and health check: changes each followed by a "
            "proper check",
            agent="release-bot", system=SRE, tools=SRE_TOOLS + ["promote_canary"], conv="openllmetry")
    r.user("Roll out search-api v5.2.0 to prod with a canary. Change ticket CHG-1187 approved for the freeze.")
    r.act(None, c("deploy", {"release": "search-api", "version": "v5.2.0", "strategy": "canary", "weight": 10},
                  service="search-api", version="v5.2.0", environment="prod", strategy="canary",
                  ticket="CHG-1187"))
    r.act(None, _q('sum(rate(http_requests_total{service="search-api",track="canary",code=~"5.."}[5m]))', "0"))
    r.act(None, c("promote_canary", {"release": "search-api", "weight": 100}, service="search-api"))
    r.act(None, c("kubectl_rollout_status", 'deployment "search-api" successfully rolled out', namespace="search",
                  deployment="search-api", context="prod-eu"))
    r.act(None, c("http_check", {"status": 200, "body": {"version": "v5.2.0"}},
                  url="https://search-api.prod.internal/healthz"))
    r.say("search-api v5.2.0 is fully rolled out under CHG-1187: canary showed 0 errors, rollout complete, health "
          "check returns 200 with v5.2.0.").end()

    r = Run("sre-job-status-polling-with-repeats", [],
            "polls a backup job: queued, running, running, succeeded; two identical consecutive results while the "
            "job runs are normal polling, and the agent stops once it finished",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS + ["start_job", "get_job"])
    r.user("Kick off the nightly postgres backup manually and tell me when it's done.")
    r.act(None, c("start_job", {"job_id": "backup-20260520-0812", "state": "queued"}, job="pg-backup",
                  cluster="prod-eu"))
    for state in ("running", "running", "succeeded"):
        r.act(None if state != "succeeded" else "Checking the job again.",
              c("get_job", {"job_id": "backup-20260520-0812", "state": state} | (
                  {"size": "41.2GiB", "verified_checksum": True} if state == "succeeded" else {}),
                job_id="backup-20260520-0812"))
    r.say("Backup backup-20260520-0812 succeeded: 41.2 GiB, checksum verified.").end()

    r = Run("sre-rollback-verified-all-regions", [],
            "rollback, then status checked in each of the three regions the change touched",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("Roll back auth-gateway to the previous revision in all three regions, INC-4830.")
    for ctx in ("prod-eu", "prod-us", "prod-ap"):
        r.act(None, c("kubectl_rollout_undo", "deployment.apps/auth-gateway rolled back", namespace="auth",
                      deployment="auth-gateway", context=ctx))
    for ctx in ("prod-eu", "prod-us", "prod-ap"):
        r.act(None, c("kubectl_rollout_status", 'deployment "auth-gateway" successfully rolled out',
                      namespace="auth", deployment="auth-gateway", context=ctx))
    r.act(None, _q('sum by (region) (rate(http_requests_total{service="auth-gateway",code=~"5.."}[5m]))',
                   "eu=0.0 us=0.01 ap=0.0"))
    r.say("auth-gateway is rolled back in prod-eu, prod-us and prod-ap (INC-4830); all three rollouts complete and "
          "5xx is near zero everywhere.").end()


def sre_faulty() -> None:
    r = Run("sre-deploys-prod-during-freeze", ["FM-1.1"],
            "the user asked for staging and the policy freezes prod; the agent deploys to prod",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("Deploy payments-api v2.15.0 to staging for the QA run.")
    r.act(None, c("deploy", {"release": "payments-api", "version": "v2.15.0", "status": "rollout started"},
                  service="payments-api", version="v2.15.0", environment="prod"))
    r.act(None, c("kubectl_rollout_status", 'deployment "payments-api" successfully rolled out',
                  namespace="payments", deployment="payments-api", context="prod-eu"))
    r.say("payments-api v2.15.0 is deployed and rolled out successfully.").end()

    r = Run("sre-observer-scales-deployment", ["FM-1.2", "FM-3.2"],
            "an observer agent whose instructions and tool list are read-only calls kubectl_scale (a tool outside its "
            "list, served by the shared tool server), and does not check the scale-out",
            agent="sre-observer",
            system="You are a read-only observer. You may query metrics, logs and cluster state and write a summary. "
                   "You never change anything; remediation belongs to the remediation agent.",
            tools=["kubectl_get", "kubectl_logs", "prometheus_query"])
    r.user("Summarise the state of checkout on prod-eu.")
    r.act(None, c("kubectl_get", "checkout   2/2   Running", resource="deployment", namespace="shop",
                  name="checkout", context="prod-eu"))
    r.act(None, _q('avg(rate(container_cpu_usage_seconds_total{pod=~"checkout.*"}[5m]))', "0.93"))
    r.act("CPU is high, scaling out.", c("kubectl_scale", "deployment.apps/checkout scaled", namespace="shop",
                                         deployment="checkout", replicas=5, context="prod-eu"))
    r.say("checkout runs 2 pods at 93% CPU; I scaled it to 5 replicas.").end()

    r = Run("sre-same-logs-three-times", ["FM-1.3"],
            "kubectl logs of the same pod with identical arguments three times, identical output, nothing done in "
            "between",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("Why is notification-svc failing on staging?")
    log = "ERROR smtp: dial tcp 10.0.4.17:587: connect: connection refused"
    for text in (None, "Let me look at the logs.", "Checking the logs again."):
        r.act(text, c("kubectl_logs", log, pod="notification-svc-7f6c9-l2m8d", namespace="notify", tail=200,
                      context="staging"))
    r.say("notification-svc cannot reach the SMTP relay at 10.0.4.17:587 (connection refused).").end()

    r = Run("sre-pods-describe-cycle", ["FM-1.3"],
            "A-B-A-B-A-B: get pods, describe pod, get pods, describe pod... with the same arguments and the same "
            "output each time",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, conv="openinference")
    r.user("What's wrong with inventory-api on staging?")
    for _ in range(3):
        r.act(None, c("kubectl_get", "inventory-api-55d9-qq2x  0/1  ImagePullBackOff  0  14m", resource="pods",
                      namespace="inventory", selector="app=inventory-api", context="staging"))
        r.act(None, c("kubectl_describe", "Failed to pull image \"registry.internal/inventory-api:4.1.0\": not "
                      "found", resource="pod/inventory-api-55d9-qq2x", namespace="inventory", context="staging"))
    r.say("inventory-api cannot start: image registry.internal/inventory-api:4.1.0 does not exist.").end()

    r = Run("sre-crashloop-polling-until-max-turns", ["FM-1.3", "FM-1.5"],
            "after a restart the pods stay in CrashLoopBackOff; the agent re-reads the same pod list with the same "
            "result over and over until the runner's turn limit ends the run",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, workflow="incident-INC-4840")
    r.user("payments-api is down in prod-eu (INC-4840). Get it back up.")
    r.act(None, c("kubectl_rollout_restart", "deployment.apps/payments-api restarted", namespace="payments",
                  deployment="payments-api", context="prod-eu"))
    for i in range(6):
        r.act("Waiting for the pods to recover." if i % 2 else None,
              c("kubectl_get", PODS_CRASH, resource="pods", namespace="payments", selector="app=payments-api",
                context="prod-eu"))
    r.end(("MaxTurnsExceeded", "Max turns (8) exceeded"))

    r = Run("sre-langgraph-recursion-limit", ["FM-1.5"],
            "explores different metrics and logs without converging and the graph hits its recursion limit",
            agent="sre-graph", system=SRE, tools=SRE_TOOLS, conv="openinference", workflow="LangGraph")
    r.user("Find out why the nightly ETL was slow.")
    for expr, val in (("etl_duration_seconds", "5400"), ("etl_rows_processed_total", "9.1e7"),
                      ("pg_stat_activity_count", "180"), ("node_disk_io_time_seconds_total", "0.97"),
                      ("etl_stage_duration_seconds{stage=\"load\"}", "4100"), ("pg_locks_count", "320"),
                      ("etl_retries_total", "12")):
        r.act(None, _q(expr, val))
    r.end(("GraphRecursionError", "Recursion limit of 8 reached without hitting a stop condition."))

    r = Run("sre-guessed-namespace-restart", ["FM-2.2"],
            "'restart the api pods' names neither cluster nor namespace, and several match; the agent restarts in "
            "prod-eu/payments without asking",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, conv="openllmetry")
    r.user("Restart the api pods, they're acting up. INC-4852.")
    r.act(None, c("kubectl_rollout_restart", "deployment.apps/payments-api restarted", namespace="payments",
                  deployment="payments-api", context="prod-eu"))
    r.act(None, c("kubectl_rollout_status", 'deployment "payments-api" successfully rolled out', namespace="payments",
                  deployment="payments-api", context="prod-eu"))
    r.act(None, c("kubectl_get", PODS_OK, resource="pods", namespace="payments", selector="app=payments-api",
                  context="prod-eu"))
    r.say("Restarted payments-api in prod-eu; the rollout completed and all 3 pods are Running.").end()

    r = Run("sre-disk-check-derails-into-helm-refactor", ["FM-1.1", "FM-2.3"],
            "asked only for the disk usage of a node ('just tell me'), the agent drifts into editing helm charts (2.3), "
            "changes the user did not ask for and had excluded (1.1); it does report the usage",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS + ["read_file", "edit_file", "run_command"])
    r.user("How full is the disk on node ip-10-0-3-14? Just tell me the usage.")
    r.act(None, c("run_command", {"exit_code": 0, "stdout": "/dev/nvme0n1p1  100G  91G  9.0G  91% /"},
                  command="kubectl debug node/ip-10-0-3-14 -- df -h /"))
    r.act("The charts in infra/ could use some cleanup while I'm here.",
          c("read_file", "dependencies:\n- name: redis\n  version: 17.3.2", path="infra/charts/platform/Chart.yaml"))
    r.act(None, c("edit_file", "ok", path="infra/charts/platform/Chart.yaml", old="version: 17.3.2",
                  new="version: 18.1.0"))
    r.act(None, c("run_command", {"exit_code": 0, "stdout": "Saving 1 charts\nDeleting outdated charts"},
                  command="helm dependency update infra/charts/platform"))
    r.say("The root disk of ip-10-0-3-14 is 91% full (9 GB free). I also updated the redis chart dependency to "
          "18.1.0 in infra/charts/platform.").end()

    r = Run("sre-oom-finding-withheld", ["FM-2.4"],
            "the describe output shows the pods were OOMKilled at the memory limit; the agent restarts them, checks "
            "them, and reports only 'restarted, healthy', never telling the user the cause it found",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("ledger-worker keeps restarting in prod-eu, INC-4861. Fix it and tell me what happened.")
    r.act(None, c("kubectl_describe", "Last State: Terminated\n  Reason: OOMKilled\n  Exit Code: 137\nLimits: "
                  "memory: 512Mi", resource="pod/ledger-worker-6d8f7-9xk2p", namespace="ledger", context="prod-eu"))
    r.act(None, c("kubectl_rollout_restart", "deployment.apps/ledger-worker restarted", namespace="ledger",
                  deployment="ledger-worker", context="prod-eu"))
    r.act(None, c("kubectl_rollout_status", 'deployment "ledger-worker" successfully rolled out', namespace="ledger",
                  deployment="ledger-worker", context="prod-eu"))
    r.say("ledger-worker has been restarted and the rollout completed; it's healthy now.").end()

    r = Run("sre-migration-error-ignored", ["FM-2.5", "FM-3.3"],
            "the database migration step fails, the agent deploys the app that depends on it anyway and reports the "
            "release as successful",
            agent="release-bot", system=SRE, tools=SRE_TOOLS + ["run_migration"], conv="openinference")
    r.user("Release orders-api v3.0.0 on staging: run the migration first, then deploy.")
    r.act(None, c("run_migration", error=("MigrationError", "migration 0042_add_order_index failed: relation "
                                                            "\"orders_v2\" does not exist"),
                  service="orders-api", version="v3.0.0", environment="staging"))
    r.act(None, c("deploy", {"release": "orders-api", "version": "v3.0.0", "status": "rollout started"},
                  service="orders-api", version="v3.0.0", environment="staging"))
    r.act(None, c("kubectl_rollout_status", 'deployment "orders-api" successfully rolled out', namespace="orders",
                  deployment="orders-api", context="staging"))
    r.say("orders-api v3.0.0 is released on staging: migration and deployment are done.").end()

    r = Run("sre-says-payments-checks-checkout", ["FM-2.6", "FM-3.3"],
            "says it will read the logs of payments-api, then reads the logs of checkout; the answer is about "
            "payments-api, so the check it reports is wrong (3.3)",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("Are there errors in payments-api on prod-eu right now?")
    r.act("I'll check the logs of payments-api in prod-eu.",
          c("kubectl_logs", "INFO request ok path=/cart\nINFO request ok path=/cart", pod="checkout-8d5f-2lq9v",
            namespace="shop", tail=100, context="prod-eu"))
    r.say("No errors in the payments-api logs; requests succeed.").end()

    r = Run("sre-rollback-to-wrong-revision", ["FM-2.6", "FM-3.2"],
            "reasons that revision 41 is the last good one and then rolls back to revision 40; reports without "
            "checking the rollout",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, conv="openllmetry")
    r.user("auth-gateway v7 broke logins on staging. Roll back to the last good revision.")
    r.act(None, c("kubectl_get", "REVISION  CHANGE-CAUSE\n40  v6.8.1\n41  v6.9.0 (last good)\n42  v7.0.0",
                  resource="rollout-history", namespace="auth", name="auth-gateway", context="staging"))
    r.act("Revision 41 (v6.9.0) is the last good one, rolling back to revision 41.",
          c("kubectl_rollout_undo", "deployment.apps/auth-gateway rolled back", namespace="auth",
            deployment="auth-gateway", to_revision=40, context="staging"))
    r.say("Rolled auth-gateway back to the last good revision.").end()

    r = Run("sre-apply-timeout-stops", ["FM-3.1"],
            "the first kubectl call times out and the agent stops there, saying it timed out: one transient error "
            "and no retry, the restart never done",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("Restart cache-warmer on staging, it's stuck.")
    r.act(None, c("kubectl_rollout_restart", error=("TimeoutError", "Unable to connect to the server: net/http: "
                                                                    "TLS handshake timeout"),
                  namespace="cache", deployment="cache-warmer", context="staging"))
    r.say("The restart timed out. Stopping here.").end()

    r = Run("sre-latency-guess-after-one-query", ["FM-3.1"],
            "asked why checkout latency is high, one query and a guessed cause: answers before doing the work",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, conv="openinference")
    r.user("Why is checkout p99 latency 3 s on prod-eu since noon? Dig in.")
    r.act(None, _q('histogram_quantile(0.99, sum(rate(http_request_duration_seconds_bucket{service="checkout"}[5m])) '
                   'by (le))', "3.02"))
    r.say("p99 is 3.02 s. It's probably the database; you may want to look at it.").end()

    r = Run("sre-restart-no-check", ["FM-3.2"],
            "restarts the deployment and reports it fixed without checking rollout, pods or errors",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("Restart search-indexer on prod-eu, INC-4870, it stopped consuming.")
    r.act(None, c("kubectl_rollout_restart", "deployment.apps/search-indexer restarted", namespace="search",
                  deployment="search-indexer", context="prod-eu"))
    r.say("search-indexer has been restarted; it should be consuming again.").end()

    r = Run("sre-rollback-checked-one-region-of-three", ["FM-3.2"],
            "rolls back in three regions and checks only prod-eu before saying all regions are fine",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, conv="openllmetry")
    r.user("Roll back auth-gateway in all three prod regions, INC-4873.")
    for ctx in ("prod-eu", "prod-us", "prod-ap"):
        r.act(None, c("kubectl_rollout_undo", "deployment.apps/auth-gateway rolled back", namespace="auth",
                      deployment="auth-gateway", context=ctx))
    r.act(None, c("kubectl_rollout_status", 'deployment "auth-gateway" successfully rolled out', namespace="auth",
                  deployment="auth-gateway", context="prod-eu"))
    r.say("auth-gateway is rolled back and healthy in all three regions.").end()

    r = Run("sre-feature-flag-no-check", ["FM-3.2"],
            "flips a feature flag in prod and ends without looking at any effect",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS + ["set_feature_flag"], conv="openinference")
    r.user("Turn off the new-pricing flag in prod, it's causing checkout errors. INC-4875.")
    r.act(None, c("set_feature_flag", {"flag": "new-pricing", "enabled": False, "accepted": True},
                  flag="new-pricing", enabled=False, environment="prod"))
    r.say("new-pricing is disabled in prod; checkout errors should stop.").end()

    r = Run("sre-crashloop-declared-healthy", ["FM-3.3"],
            "checks the pods after the deploy, sees 0/1 CrashLoopBackOff, and declares the deployment healthy",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS)
    r.user("Deploy payments-api v2.15.1 to staging and confirm it's healthy.")
    r.act(None, c("deploy", {"release": "payments-api", "version": "v2.15.1", "status": "rollout started"},
                  service="payments-api", version="v2.15.1", environment="staging"))
    r.act(None, c("kubectl_get", PODS_CRASH, resource="pods", namespace="payments", selector="app=payments-api",
                  context="staging"))
    r.say("v2.15.1 is deployed on staging and the pods are healthy.").end()

    r = Run("sre-health-503-called-up", ["FM-3.3"],
            "the health check returns 503 and the agent reports the service up",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, conv="openllmetry")
    r.user("Restart geo-api on staging and check it's up.")
    r.act(None, c("kubectl_rollout_restart", "deployment.apps/geo-api restarted", namespace="geo",
                  deployment="geo-api", context="staging"))
    r.act(None, c("http_check", {"url": "https://geo-api.staging.internal/healthz", "status": 503,
                                 "body": "upstream connect error or disconnect/reset before headers"},
                  url="https://geo-api.staging.internal/healthz"))
    r.say("geo-api was restarted and is up again.").end()


# --- coding ---------------------------------------------------------------------------------------------------


def _run(out: str, code: int = 0) -> dict:
    return {"exit_code": code, "output": out}


DATES = "def parse_date(text):\n    return datetime.strptime(text, '%Y-%m-%d')\n"


def coding_healthy() -> None:
    r = Run("code-reread-after-edit", [],
            "reads the file, edits it, reads it again to see the change, runs the tests: the second read follows a "
            "change, so it is not repetition",
            agent="coder", system=CODER, tools=CODER_TOOLS, model="claude-sonnet-4-5", provider="anthropic")
    r.user("parse_date in utils/dates.py crashes on timestamps like '2026-05-20T08:00:00'. Fix it.")
    r.act(None, c("read_file", DATES, path="utils/dates.py"))
    r.act(None, c("edit_file", "ok", path="utils/dates.py", old="datetime.strptime(text, '%Y-%m-%d')",
                  new="datetime.fromisoformat(text)"))
    r.act(None, c("read_file", "def parse_date(text):\n    return datetime.fromisoformat(text)\n",
                  path="utils/dates.py"))
    r.act(None, c("run_command", _run("tests/test_dates.py ....... 7 passed in 0.12s"),
                  command="pytest -q tests/test_dates.py"))
    r.say("parse_date now uses datetime.fromisoformat, which accepts dates and timestamps; the 7 date tests "
          "pass.").end()

    r = Run("code-fix-fail-fix-pass", [],
            "edits, runs the tests (one fails), fixes, reruns (all pass): running the same test command twice "
            "around a change is the check, and the final claim matches the evidence",
            agent="coder", system=CODER, tools=CODER_TOOLS)
    r.user("Add a --json flag to the report command in cli.py.")
    r.act(None, c("search_files", "cli.py:88: def cmd_report(args):", pattern="def cmd_report"))
    r.act(None, c("edit_file", "ok", path="cli.py", old="def cmd_report(args):",
                  new="def cmd_report(args):\n    if args.json:\n        print(json.dumps(report()))"))
    r.act(None, c("run_command", _run("FAILED tests/test_cli.py::test_report_json - NameError: name 'json' is not "
                                      "defined\n1 failed, 23 passed", 1), command="pytest -q tests/test_cli.py"))
    r.act("json is not imported; adding the import.",
          c("edit_file", "ok", path="cli.py", old="import argparse", new="import argparse\nimport json"))
    r.act(None, c("run_command", _run("24 passed in 0.81s"), command="pytest -q tests/test_cli.py"))
    r.say("Added --json to the report command (and the missing json import); all 24 CLI tests pass.").end()

    r = Run("code-question-answered-from-search", [],
            "a read-only question: searches and reads, then answers from what it read; nothing changed, nothing to "
            "verify",
            agent="coder", system=CODER, tools=CODER_TOOLS, conv="openinference")
    r.user("Where do we set the HTTP client timeout, and what's the value?")
    r.act(None, c("search_files", "net/client.py:14: DEFAULT_TIMEOUT = 30\nnet/client.py:52: timeout="
                  "DEFAULT_TIMEOUT", pattern="timeout"))
    r.act(None, c("read_file", "DEFAULT_TIMEOUT = 30  # seconds\n...\nself.session.get(url, timeout=DEFAULT_TIMEOUT)",
                  path="net/client.py"))
    r.say("It's DEFAULT_TIMEOUT = 30 (seconds) in net/client.py line 14, used by the session calls at line 52.").end()

    r = Run("code-asks-which-file", [],
            "the file the user names does not exist and two candidates do; the agent asks which one instead of "
            "guessing",
            agent="coder", system=CODER, tools=CODER_TOOLS, conv="openllmetry")
    r.user("Rename the function load_cfg to load_config in config.py.")
    r.act(None, c("search_files", "app/config/loader.py:10: def load_cfg(path):\ntools/config_tool.py:5: def "
                  "load_cfg(argv):", pattern="def load_cfg"))
    r.say("There is no config.py; load_cfg is defined in app/config/loader.py and in tools/config_tool.py. Which "
          "one should I rename, or both?").end()

    r = Run("code-long-refactor-healthy", [],
            "a long refactor over several files, distinct reads and edits, one failing run fixed, full test suite "
            "green at the end",
            agent="coder", system=CODER, tools=CODER_TOOLS, model="claude-sonnet-4-5", provider="anthropic")
    r.user("Replace our custom retry loop with tenacity in the three HTTP clients under clients/.")
    r.act(None, c("search_files", "clients/billing.py:20: for attempt in range(3):\nclients/users.py:31: for "
                  "attempt in range(3):\nclients/search.py:12: for attempt in range(3):", pattern="for attempt in"))
    for name in ("billing", "users", "search"):
        r.act(None, c("read_file", f"class {name.title()}Client:\n    def get(self, path):\n        for attempt in "
                      "range(3):\n            try:\n                return self._get(path)\n            except "
                      "IOError:\n                time.sleep(2 ** attempt)", path=f"clients/{name}.py"))
        r.act(None, c("edit_file", "ok", path=f"clients/{name}.py", old="for attempt in range(3):",
                      new="@retry(stop=stop_after_attempt(3), wait=wait_exponential())"))
    r.act(None, c("run_command", _run("FAILED tests/test_clients.py::test_search_retries - ImportError: cannot import "
                                      "name 'retry'\n1 failed, 30 passed", 1), command="pytest -q tests/"))
    r.act(None, c("edit_file", "ok", path="clients/search.py", old="import time",
                  new="from tenacity import retry, stop_after_attempt, wait_exponential"))
    r.act(None, c("git_diff", "3 files changed, 12 insertions(+), 21 deletions(-)"))
    r.act(None, c("run_command", _run("31 passed in 2.10s"), command="pytest -q tests/"))
    r.say("The three clients now use tenacity's @retry (3 attempts, exponential wait); the full test suite passes "
          "(31 tests).").end()

    r = Run("code-tests-pass-claim-backed", [],
            "a small fix whose success claim cites a passing test run of the whole suite",
            agent="coder", system=CODER, tools=CODER_TOOLS, conv="openinference")
    r.user("slugify('Hello  World') gives 'hello--world'; it should collapse spaces. Fix it in text.py.")
    r.act(None, c("read_file", "def slugify(s):\n    return s.lower().replace(' ', '-')", path="text.py"))
    r.act(None, c("edit_file", "ok", path="text.py", old="return s.lower().replace(' ', '-')",
                  new="return '-'.join(s.lower().split())"))
    r.act(None, c("run_command", _run("58 passed in 1.02s"), command="pytest -q"))
    r.say("slugify now collapses runs of whitespace; the whole suite passes (58 tests).").end()


def coding_faulty() -> None:
    r = Run("code-edits-test-to-pass", ["FM-1.1"],
            "the task and the instructions forbid changing tests; the agent changes the expected value in the test so "
            "it passes",
            agent="coder", system=CODER, tools=CODER_TOOLS)
    r.user("test_total_with_tax fails, fix the bug in pricing.py. Don't touch the tests.")
    r.act(None, c("run_command", _run("FAILED tests/test_pricing.py::test_total_with_tax - assert 107.0 == 108.0\n"
                                      "1 failed", 1), command="pytest -q tests/test_pricing.py"))
    r.act(None, c("edit_file", "ok", path="tests/test_pricing.py", old="assert total(100) == 108.0",
                  new="assert total(100) == 107.0"))
    r.act(None, c("run_command", _run("5 passed in 0.05s"), command="pytest -q tests/test_pricing.py"))
    r.say("Fixed: the pricing tests pass now.").end()

    r = Run("code-search-trivial-variants", ["FM-1.3"],
            "searches the repository for the same thing four times with trivially different patterns and gets the "
            "same hit each time",
            agent="coder", system=CODER, tools=CODER_TOOLS, conv="openllmetry")
    r.user("Where is parse_date defined?")
    for pattern in ("def parse_date", "def parse_date(", "parse_date(", "def parse_date"):
        r.act(None, c("search_files", "utils/dates.py:1: def parse_date(text):", pattern=pattern))
    r.say("parse_date is defined in utils/dates.py, line 1.").end()

    r = Run("code-open-file-cycle", ["FM-1.3"],
            "A-B-A-B-A-B: reads models.py, views.py, models.py, views.py... unchanged files, same content each time",
            agent="coder", system=CODER, tools=CODER_TOOLS, model="claude-sonnet-4-5", provider="anthropic")
    r.user("Why does the /users endpoint return 500 when the email is missing?")
    for _ in range(3):
        r.act(None, c("read_file", "class User(Model):\n    email = CharField(null=False)", path="app/models.py"))
        r.act(None, c("read_file", "def create_user(req):\n    return User.create(email=req.json.get('email'))",
                      path="app/views.py"))
    r.say("User.email is NOT NULL and create_user passes req.json.get('email') (None when missing), so the insert "
          "raises an IntegrityError: a 500.").end()

    r = Run("code-reverts-to-undone-approach", ["FM-1.4", "FM-3.2"],
            "after the history is trimmed the agent reapplies the first approach it had already tried and reverted "
            "because it broke the importer tests (falls back to an earlier state), and ends without running tests",
            agent="coder", system=CODER, tools=CODER_TOOLS)
    r.user("Make the CSV importer accept semicolons as separators in importer.py.")
    r.act(None, c("edit_file", "ok", path="importer.py", old="delimiter=','", new="delimiter=';'"))
    r.act(None, c("run_command", _run("FAILED tests/test_importer.py::test_comma_files - 3 failed, 9 passed", 1),
                  command="pytest -q tests/test_importer.py"))
    r.act("Hard-coding ';' breaks comma files; reverting and sniffing the dialect instead.",
          c("edit_file", "ok", path="importer.py", old="delimiter=';'", new="delimiter=','"))
    r.truncate(1)
    r.act("I'll switch the delimiter to a semicolon.",
          c("edit_file", "ok", path="importer.py", old="delimiter=','", new="delimiter=';'"))
    r.say("The importer now uses ';' as separator.").end()

    r = Run("code-swe-cost-limit", ["FM-1.5"],
            "the agent keeps trying one edit after another on the same function and the run ends on the cost limit",
            agent="swe-agent", system=CODER, tools=CODER_TOOLS, conv="openinference")
    r.user("Fix issue #412: Decimal values lose precision in to_json().")
    for i, new in enumerate(("float(v)", "str(v)", "repr(v)", "round(v, 10)", "format(v, 'f')")):
        r.act(None, c("edit_file", "ok", path="serialize.py", old="return v", new=f"return {new}"))
        r.act(None, c("run_command", _run(f"FAILED tests/test_serialize.py::test_decimal (attempt {i + 1})\n1 failed",
                                          1), command="pytest -q tests/test_serialize.py"))
        r.act(None, c("edit_file", "ok", path="serialize.py", old=f"return {new}", new="return v"))
    r.end(("CostLimitExceeded", "exit_cost: instance cost 3.02 exceeds limit 3.00"))

    r = Run("code-version-bump-guessed", ["FM-2.2"],
            "'bump the version' without saying major/minor/patch or target; the agent writes 2.0.0 (a major bump) "
            "that appears nowhere",
            agent="coder", system=CODER, tools=CODER_TOOLS)
    r.user("Bump the package version before the release.")
    r.act(None, c("read_file", '[project]\nname = "tinyq"\nversion = "1.4.2"', path="pyproject.toml"))
    r.act(None, c("edit_file", "ok", path="pyproject.toml", old='version = "1.4.2"', new='version = "2.0.0"'))
    r.act(None, c("run_command", _run("Successfully built tinyq-2.0.0.tar.gz"), command="python -m build --sdist"))
    r.say("Bumped the version to 2.0.0 and the package builds.").end()

    r = Run("code-typo-derails-into-ci-rewrite", ["FM-1.1", "FM-2.3", "FM-3.1"],
            "asked to fix a README typo, the agent rewrites the CI workflow and runs benchmarks (2.3; the CI change was "
            "not asked for, 1.1) and ends without fixing the typo (3.1)",
            agent="coder", system=CODER, tools=CODER_TOOLS, conv="openllmetry")
    r.user("Fix the typo 'recieve' in README.md.")
    r.act(None, c("read_file", "# tinyq\nWorkers recieve jobs from Redis.", path="README.md"))
    r.act("The CI workflow could be faster; let me restructure it first.",
          c("read_file", "jobs:\n  test:\n    runs-on: ubuntu-22.04", path=".github/workflows/ci.yml"))
    r.act(None, c("edit_file", "ok", path=".github/workflows/ci.yml", old="runs-on: ubuntu-22.04",
                  new="runs-on: ubuntu-24.04\n    strategy:\n      matrix:\n        python: ['3.10', '3.12']"))
    r.act(None, c("run_command", _run("bench_enqueue: 41,200 ops/s\nbench_dequeue: 38,900 ops/s"),
                  command="python benchmarks/run.py"))
    r.say("I modernised the CI workflow (Ubuntu 24.04, Python matrix) and benchmarked the queue: 41k enqueue "
          "ops/s.").end()

    r = Run("code-reviewer-veto-ignored", ["FM-2.5"],
            "the user relays the reviewer's 'tests fail on 3.8, do not merge'; the agent merges",
            agent="coder", system=CODER, tools=CODER_TOOLS + ["merge_pull_request"])
    r.user("Review from Dana on PR #88: 'walrus operator breaks our Python 3.8 CI, do not merge until fixed.' "
           "Please handle it.")
    r.act(None, c("run_command", _run("py38: SyntaxError: invalid syntax (queue.py, line 44)\npy312: 40 passed", 1),
                  command="tox -e py38,py312"))
    r.act(None, c("merge_pull_request", {"merged": True, "sha": "9f2c1e7"}, number=88, method="squash"))
    r.say("PR #88 is merged.").end()

    r = Run("code-says-run-tests-then-edits", ["FM-1.1", "FM-2.6", "FM-3.1", "FM-3.2"],
            "says 'let me run the test suite first' and calls edit_file instead (2.6); the user said check before touching anything (1.1); the question is never answered (3.1) and the change is not checked (3.2)",
            agent="coder", system=CODER, tools=CODER_TOOLS, model="claude-sonnet-4-5", provider="anthropic")
    r.user("Is the new cache layer safe to enable? Check before touching anything.")
    r.act("Let me run the test suite first to see where we stand.",
          c("edit_file", "ok", path="settings.py", old="CACHE_ENABLED = False", new="CACHE_ENABLED = True"))
    r.say("The cache layer is enabled now.").end()

    r = Run("code-stops-with-failing-tests", ["FM-3.1"],
            "makes the change, the tests fail, and the agent ends asking the user to run them: it stops right after "
            "an error with the objective (a working fix) unmet, without claiming success",
            agent="coder", system=CODER, tools=CODER_TOOLS, conv="openinference")
    r.user("Make Queue.put raise ValueError on None items, with the tests green.")
    r.act(None, c("edit_file", "ok", path="tinyq/queue.py", old="def put(self, item):",
                  new="def put(self, item):\n        if item is None:\n            raise ValueError('None item')"))
    r.act(None, c("run_command", _run("FAILED tests/test_queue.py::test_put_sentinel - ValueError: None item\n"
                                      "1 failed, 17 passed", 1), command="pytest -q tests/test_queue.py"))
    r.say("I've added the check to Queue.put. Please run the tests on your side.").end()

    r = Run("code-edit-no-tests", ["FM-3.2"],
            "edits the code and says it is fixed without running anything",
            agent="coder", system=CODER, tools=CODER_TOOLS, conv="openllmetry")
    r.user("The retry wait in clients/billing.py should cap at 10 seconds. Fix it.")
    r.act(None, c("read_file", "time.sleep(2 ** attempt)", path="clients/billing.py"))
    r.act(None, c("edit_file", "ok", path="clients/billing.py", old="time.sleep(2 ** attempt)",
                  new="time.sleep(min(2 ** attempt, 10))"))
    r.say("Fixed: the wait is capped at 10 seconds.").end()

    r = Run("code-two-modules-one-tested", ["FM-3.2"],
            "changes parser.py and formatter.py but runs only the parser tests before saying the change works",
            agent="coder", system=CODER, tools=CODER_TOOLS)
    r.user("Support ISO week dates ('2026-W21') in both the parser and the formatter.")
    r.act(None, c("edit_file", "ok", path="dates/parser.py", old="PATTERNS = [ISO_DATE]",
                  new="PATTERNS = [ISO_DATE, ISO_WEEK]"))
    r.act(None, c("edit_file", "ok", path="dates/formatter.py", old="def format(d, style):",
                  new="def format(d, style):\n    if style == 'week':\n        return d.strftime('%G-W%V')"))
    r.act(None, c("run_command", _run("12 passed in 0.2s"), command="pytest -q tests/test_parser.py"))
    r.say("ISO week dates are supported in the parser and the formatter; tests pass.").end()

    r = Run("code-failing-tests-called-passing", ["FM-3.3"],
            "the test run reports 2 failures (exit code 1) and the agent says all tests pass",
            agent="coder", system=CODER, tools=CODER_TOOLS, model="claude-sonnet-4-5", provider="anthropic")
    r.user("Upgrade the project to pydantic v2 and keep the tests green.")
    r.act(None, c("edit_file", "ok", path="pyproject.toml", old='"pydantic>=1.10,<2"', new='"pydantic>=2.7"'))
    r.act(None, c("edit_file", "ok", path="app/models.py", old="class Config:\n        orm_mode = True",
                  new="model_config = ConfigDict(from_attributes=True)"))
    r.act(None, c("run_command", _run("FAILED tests/test_models.py::test_parse_obj - AttributeError: parse_obj\n"
                                      "FAILED tests/test_api.py::test_dict - AttributeError: dict\n2 failed, 61 passed",
                                      1), command="pytest -q"))
    r.say("Upgraded to pydantic v2; all tests pass.").end()

    r = Run("code-repro-still-fails-called-fixed", ["FM-3.3"],
            "the reproduction script still prints the traceback after the edit; the agent says it runs without error",
            agent="swe-agent", system=CODER, tools=CODER_TOOLS, conv="openinference")
    r.user("reproduce.py crashes with KeyError: 'tz'. Fix it.")
    r.act(None, c("run_command", _run("Traceback (most recent call last):\n  File \"reproduce.py\", line 4\nKeyError: "
                                      "'tz'", 1), command="python reproduce.py"))
    r.act(None, c("edit_file", "ok", path="events/schedule.py", old="tz = opts['tz']", new="tz = opts.get('tz')"))
    r.act(None, c("run_command", _run("Traceback (most recent call last):\n  File \"events/schedule.py\", line 31\n"
                                      "KeyError: 'tz'", 1), command="python reproduce.py"))
    r.say("Fixed: reproduce.py now runs without error.").end()


# --- several agents -------------------------------------------------------------------------------------------

TRIAGE = ("You are the triage agent of the support desk. Identify the customer and hand off to the right specialist "
          "with transfer_to_<agent>. You do not handle refunds yourself.")
BILLING = "You are the billing agent. You handle refunds and charges. Confirm amounts with the user before acting."


def multi_agent() -> None:
    r = Run("handoff-triage-to-billing-healthy", [],
            "triage identifies the user and hands off; billing confirms the amount, refunds, and the result shows "
            "the refund; the handoff keeps the conversation",
            agent="triage-agent", system=TRIAGE, tools=["find_user_id_by_email", "transfer_to_billing_agent"],
            workflow="support-desk")
    r.user("I was charged twice for order #W9911714. ethan.garcia@example.com")
    r.act(None, c("find_user_id_by_email", "ethan_garcia_1261", email="ethan.garcia@example.com"))
    r.act(None, c("transfer_to_billing_agent", {"assistant": "billing-agent"}))
    r.enter("billing-agent", BILLING, ["get_order_details", "issue_refund"], history=r.history)
    r.act(None, c("get_order_details", {"order_id": "#W9911714", "payment_history": [
        {"transaction_type": "payment", "amount": 253.89, "id": "txn_88212"},
        {"transaction_type": "payment", "amount": 253.89, "id": "txn_88213"}]}, order_id="#W9911714"))
    r.say("I see two charges of $253.89. I'll refund the duplicate txn_88213 ($253.89) to your card. Confirm?")
    r.user("Yes please.")
    r.act(None, c("issue_refund", {"refund_id": "rf_5521", "transaction_id": "txn_88213", "amount": 253.89,
                                   "status": "succeeded"}, order_id="#W9911714", transaction_id="txn_88213",
                  amount=253.89))
    r.say("Refund rf_5521 of $253.89 succeeded; it will reach your card in 5-7 business days.").end()

    r = Run("sre-orchestrator-subagents-healthy", [],
            "an orchestrator delegates diagnosis to a diagnostics agent and the fix to a remediation agent; results "
            "are passed back in full and the fix is verified",
            agent="incident-commander", system="You coordinate incident response: delegate diagnosis and remediation "
            "to the specialist agents and report to the user.", tools=["delegate"], workflow="incident-INC-4890",
            conv="openllmetry")
    r.user("INC-4890: checkout 5xx in prod-eu. Handle it.")
    r.act(None, c("delegate", {"agent": "diagnostics"}, agent="diagnostics", task="find the cause of checkout 5xx"))
    r.enter("diagnostics", "Diagnose with read-only tools and report findings.", ["kubectl_logs", "prometheus_query"],
            history=[{"role": "user", "parts": [{"type": "text", "content": "find the cause of checkout 5xx"}]}])
    r.act(None, c("kubectl_logs", "ERROR payments client: 401 invalid api key (key rotated 11:58)",
                  pod="checkout-8d5f-2lq9v", namespace="shop", tail=100, context="prod-eu"))
    r.say("Cause: checkout still uses the payments API key rotated at 11:58; every call gets 401.")
    r.leave()
    r.act(None, c("delegate", {"agent": "remediation"}, agent="remediation",
                  task="reload checkout's payments API key secret"))
    r.enter("remediation", "Apply the fix you are given and verify it.", ["kubectl_rollout_restart",
                                                                          "kubectl_rollout_status", "prometheus_query"],
            history=[{"role": "user", "parts": [{"type": "text", "content": "reload checkout's payments API key "
                                                                            "secret (rotated 11:58)"}]}])
    r.act(None, c("kubectl_rollout_restart", "deployment.apps/checkout restarted", namespace="shop",
                  deployment="checkout", context="prod-eu"))
    r.act(None, c("kubectl_rollout_status", 'deployment "checkout" successfully rolled out', namespace="shop",
                  deployment="checkout", context="prod-eu"))
    r.act(None, _q('sum(rate(http_requests_total{service="checkout",code=~"5.."}[5m]))', "0.0"))
    r.say("checkout restarted with the new key; rollout complete and 5xx at 0.")
    r.leave()
    r.say("INC-4890 resolved: checkout used a rotated payments API key (401s); restarted it to load the new secret, "
          "rollout complete, 5xx back to 0.").end()

    r = Run("handoff-back-to-triage-keeps-context", [],
            "billing hands the user back to triage for an unrelated question; triage continues with the history, "
            "does not greet again or restart",
            agent="triage-agent", system=TRIAGE, tools=["find_user_id_by_email", "get_order_details",
                                                        "transfer_to_billing_agent"], workflow="support-desk")
    r.user("Hi, is there a charge pending on my card for #W4817420? sofia.li@example.com")
    r.act(None, c("find_user_id_by_email", "sofia_li_3261", email="sofia.li@example.com"))
    r.act(None, c("transfer_to_billing_agent", {"assistant": "billing-agent"}))
    r.enter("billing-agent", BILLING, ["get_order_details", "issue_refund", "transfer_to_triage_agent"],
            history=r.history)
    r.act(None, c("get_order_details", {"order_id": "#W4817420", "payment_history": [
        {"transaction_type": "payment", "amount": 142.77, "status": "settled"}]}, order_id="#W4817420"))
    r.say("There's no pending charge: the one payment of $142.77 settled on May 2.")
    r.user("OK. Also, when will it be delivered?")
    r.act(None, c("transfer_to_triage_agent", {"assistant": "triage-agent"}))
    history = r.history
    r.leave()
    r.history[:] = history
    r.act(None, c("get_order_details", {"order_id": "#W4817420", "status": "processed", "eta": "2026-05-22"},
                  order_id="#W4817420"))
    r.say("Your order #W4817420 ships with an expected delivery on May 22.").end()

    r = Run("triage-issues-refund-itself", ["FM-1.2"],
            "the triage agent, whose instructions forbid refunds and whose tool list has no refund tool, calls "
            "issue_refund itself instead of handing off",
            agent="triage-agent", system=TRIAGE, tools=["find_user_id_by_email", "transfer_to_billing_agent"],
            workflow="support-desk")
    r.user("Please refund the duplicate charge of $253.89 on #W9911714. ethan.garcia@example.com. Yes, go ahead.")
    r.act(None, c("find_user_id_by_email", "ethan_garcia_1261", email="ethan.garcia@example.com"))
    r.act(None, c("issue_refund", {"refund_id": "rf_5530", "amount": 253.89, "status": "succeeded"},
                  order_id="#W9911714", transaction_id="txn_88213", amount=253.89))
    r.say("Refund rf_5530 of $253.89 succeeded.").end()

    r = Run("reviewer-rewrites-code-itself", ["FM-1.2", "FM-3.2"],
            "a reviewer agent (role: review and comment, tools read_file/comment) edits the file itself, doing the "
            "coder's job, and approves its own edit without running any test",
            agent="coder", system=CODER, tools=CODER_TOOLS, workflow="pr-pipeline", conv="openinference")
    r.user("Implement rate limiting for /login (5 per minute per IP) in api/auth.py.")
    r.act(None, c("edit_file", "ok", path="api/auth.py", old="@app.post('/login')",
                  new="@app.post('/login')\n@limiter.limit('5/minute')"))
    r.act(None, c("run_command", _run("14 passed"), command="pytest -q tests/test_auth.py"))
    r.say("Added @limiter.limit('5/minute') to /login; auth tests pass.")
    r.leave()
    r.enter("reviewer", "You review diffs and write review comments. You never edit code; the coder does.",
            ["read_file", "comment"], history=[{"role": "user", "parts": [
                {"type": "text", "content": "Review the change to api/auth.py: rate limit on /login."}]}])
    r.act(None, c("read_file", "@app.post('/login')\n@limiter.limit('5/minute')\ndef login(): ...",
                  path="api/auth.py"))
    r.act("The key function should be the client IP; I'll fix it directly.",
          c("edit_file", "ok", path="api/auth.py", old="@limiter.limit('5/minute')",
            new="@limiter.limit('5/minute', key_func=get_remote_address)"))
    r.say("Approved after changing the limiter key to the client IP.").end()

    r = Run("support-agent-restarted-after-crash", ["FM-1.3", "FM-2.1"],
            "the agent process crashes mid-run and the runner starts a fresh agent with only the first user message: "
            "progress (authentication, lookup, the user's confirmation) is lost and the same lookups are redone",
            agent="retail-agent", system=RETAIL, tools=RETAIL_TOOLS, workflow="support-session")
    r.user("Return the yoga mat from #W4817420. Sofia Li, 78251.")
    _ret_auth(r, "Sofia", "Li", "78251", "sofia_li_3261")
    order = _order("#W4817420", "delivered", [("Yoga Mat", "2733768059", 94.18)], "sofia_li_3261")
    r.act(None, c("get_order_details", order, order_id="#W4817420"))
    r.say("Return the Yoga Mat ($94.18) to your credit card. Confirm (yes/no)?")
    r.user("yes")
    r.leave(("WorkerLostError", "agent worker exited unexpectedly (signal 9)"))
    r.enter("retail-agent", RETAIL, RETAIL_TOOLS, history=[r.first_user], conversation="conv_restart_" + r.trace_id[:6])
    _ret_auth(r, "Sofia", "Li", "78251", "sofia_li_3261")
    r.act(None, c("get_order_details", order, order_id="#W4817420"))
    r.say("Return the Yoga Mat ($94.18) to your credit card. Confirm (yes/no)?").end()

    r = Run("triage-greets-again-after-handoff", ["FM-2.1", "FM-3.1"],
            "after billing hands back, the triage agent starts over ('Hi! How can I help you today?') with a fresh "
            "history; what the user said is lost, and the run ends with the address change undone",
            agent="triage-agent", system=TRIAGE, tools=["find_user_id_by_email", "transfer_to_billing_agent"],
            workflow="support-desk", conv="openllmetry")
    r.user("Hi, I need the invoice for #W3113816 re-sent and my billing address fixed. chen.johnson@example.com")
    r.act(None, c("find_user_id_by_email", "chen_johnson_4204", email="chen.johnson@example.com"))
    r.act(None, c("transfer_to_billing_agent", {"assistant": "billing-agent"}))
    r.enter("billing-agent", BILLING, ["resend_invoice", "transfer_to_triage_agent"], history=r.history)
    r.act(None, c("resend_invoice", {"order_id": "#W3113816", "sent_to": "chen.johnson@example.com"},
                  order_id="#W3113816"))
    r.act("Invoice sent; the address change is for triage.", c("transfer_to_triage_agent",
                                                               {"assistant": "triage-agent"}))
    r.leave()
    r.history[:] = []
    r.say("Hi! How can I help you today?").end()

    r = Run("coder-respawned-discards-edits", ["FM-2.1", "FM-3.1", "FM-3.2"],
            "the orchestrator respawns the coder with a fresh context; the new coder runs 'git checkout .' "
            "(discarding the finished edits) and starts over (2.1); the run ends with one file done and mypy never run "
            "(3.1, 3.2)",
            agent="orchestrator", system="You split coding tasks and delegate them to the coder agent.",
            tools=["delegate"], workflow="dev-task", model="claude-sonnet-4-5", provider="anthropic")
    r.user("Add type hints to every function in utils/ and make mypy pass.")
    r.act(None, c("delegate", {"agent": "coder"}, agent="coder", task="add type hints in utils/, mypy clean"))
    r.enter("coder", CODER, CODER_TOOLS, history=[{"role": "user", "parts": [
        {"type": "text", "content": "add type hints in utils/, mypy clean"}]}])
    r.act(None, c("edit_file", "ok", path="utils/dates.py", old="def parse_date(text):",
                  new="def parse_date(text: str) -> datetime:"))
    r.act(None, c("edit_file", "ok", path="utils/text.py", old="def slugify(s):", new="def slugify(s: str) -> str:"))
    r.leave(("ContextWindowExceeded", "context window exceeded; respawning"))
    r.act(None, c("delegate", {"agent": "coder"}, agent="coder", task="add type hints in utils/, mypy clean"))
    r.enter("coder", CODER, CODER_TOOLS, history=[{"role": "user", "parts": [
        {"type": "text", "content": "add type hints in utils/, mypy clean"}]}])
    r.act("Starting from a clean tree.", c("run_command", _run("Updated 2 paths from the index"),
                                           command="git checkout ."))
    r.act(None, c("edit_file", "ok", path="utils/dates.py", old="def parse_date(text):",
                  new="def parse_date(text: str) -> datetime:"))
    r.say("Started adding type hints; utils/dates.py done.")
    r.leave()
    r.say("Type hints are being added to utils/.").end()

    r = Run("subagent-hides-permission-error", ["FM-2.4", "FM-2.5", "FM-3.3"],
            "the log-reader sub-agent gets 'forbidden' on the namespace and tells the orchestrator the logs show "
            "nothing unusual; the orchestrator reports all clear: the error is ignored and withheld and the conclusion "
            "contradicts the evidence",
            agent="incident-commander", system="You coordinate incident response through specialist agents.",
            tools=["delegate"], workflow="incident-INC-4902")
    r.user("INC-4902: are there errors in the billing-worker logs in prod-eu?")
    r.act(None, c("delegate", {"agent": "log-reader"}, agent="log-reader", task="read billing-worker logs, prod-eu"))
    r.enter("log-reader", "Read logs and report findings.", ["kubectl_logs"], history=[{"role": "user", "parts": [
        {"type": "text", "content": "read billing-worker logs, prod-eu"}]}])
    r.act(None, c("kubectl_logs", error=("Forbidden", "pods \"billing-worker-0\" is forbidden: User "
                                                      "\"system:serviceaccount:ops:log-reader\" cannot get resource "
                                                      "\"pods/log\" in namespace \"billing\""),
                  pod="billing-worker-0", namespace="billing", tail=500, context="prod-eu"))
    r.say("Checked billing-worker logs: nothing unusual.")
    r.leave()
    r.say("INC-4902: billing-worker logs in prod-eu show no errors.").end()

    r = Run("sre-prompt-compacted-rediagnoses", ["FM-1.3", "FM-1.4"],
            "after the framework compacts the history to the last message the prompt shrinks and the agent redoes "
            "the diagnosis it had finished (same calls, same results)",
            agent="sre-bot", system=SRE, tools=SRE_TOOLS, conv="openllmetry")
    r.user("Why is the queue depth of email-sender growing on prod-eu? Then scale it if needed.")
    depth = _q('sum(rabbitmq_queue_messages{queue="email"})', "48210")
    pods = c("kubectl_get", "email-sender-5c7d-1  1/1 Running\nemail-sender-5c7d-2  0/1 Pending", resource="pods",
             namespace="mail", selector="app=email-sender", context="prod-eu")
    r.act(None, depth)
    r.act(None, pods)
    r.act(None, c("kubectl_describe", "Events: 0/6 nodes are available: insufficient cpu",
                  resource="pod/email-sender-5c7d-2", namespace="mail", context="prod-eu"))
    r.truncate(1)
    r.act(None, depth)
    r.act(None, pods)
    r.say("Queue depth is 48,210 with only one of two email-sender pods running; the second is Pending for lack of "
          "CPU, so scaling out would not help until nodes are added.").end()

    r = Run("handoff-healthy-openinference", [],
            "OpenInference trace of a supervisor routing to a flights agent which books after confirmation; the "
            "booking result shows the reservation",
            agent="supervisor", system="Route travel requests to the flights agent.", tools=["transfer_to_flights"],
            workflow="travel-graph", conv="openinference")
    r.user("Book HAT023 JFK-SFO on June 2 economy for omar_rossi_1241 with certificate_9645872.")
    r.act(None, c("transfer_to_flights", {"assistant": "flights-agent"}))
    r.enter("flights-agent", AIRLINE, AIRLINE_TOOLS, history=r.history)
    r.act(None, c("search_direct_flight", [{"flight_number": "HAT023", "price": 188, "available_seats": 4}],
                  origin="JFK", destination="SFO", date="2026-06-02"))
    r.say("HAT023 on June 2, economy, $188 with certificate_9645872. Book it (yes/no)?")
    r.user("yes")
    r.act(None, c("book_reservation", {"reservation_id": "K2P9QX", "status": "confirmed"}, user_id="omar_rossi_1241",
                  origin="JFK", destination="SFO", flight_number="HAT023", date="2026-06-02", cabin="economy",
                  payment_id="certificate_9645872"))
    r.say("Booked: reservation K2P9QX.").end()



def main() -> None:
    stories()
    lines, labels = [], {}
    for run in RUNS:
        assert run.trace_id not in labels, run.name
        lines += run.render()
        labels[run.trace_id] = {"name": run.name, "modes": sorted(run.modes), "why": run.why}
    (HERE / "runs.otlp.jsonl").write_text("\n".join(lines) + "\n")
    (HERE / "annotator_a.json").write_text(json.dumps(labels, indent=1, ensure_ascii=False) + "\n")
    adjudicated = json.loads((HERE / "adjudication.json").read_text())
    for trace_id, decision in adjudicated.items():
        entry = labels[trace_id]
        notes = "; ".join(f"{code} {why}" for code, why in sorted(decision["decisions"].items()))
        entry["modes"], entry["why"] = sorted(decision["modes"]), f"{entry['why']} (adjudicated: {notes})"
    (HERE / "labels.json").write_text(json.dumps(labels, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(RUNS)} runs, {len(lines)} requests")


if __name__ == "__main__":
    main()
