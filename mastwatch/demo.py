"""A small fleet of simulated agents that send real OTLP through the OpenTelemetry SDK.

Each agent runs one task after another as an `invoke_agent` span with `chat` and `execute_tool` children
(OTel GenAI conventions, content capture on). Most runs are healthy. Some loop (the same call again and
again, or a two-step cycle: FM-1.3), some retry after an error, some poll; some claim success after their
check failed (FM-3.3), some change state and never check it (FM-3.2), some hit the framework's turn
limit (FM-1.5, as the OpenAI Agents SDK's MaxTurnsExceeded), and some hand the user over to a person while the
problem is still there and no cause was found (FM-3.1 and FM-3.2, read from the user's turn in
`gen_ai.input.messages` and the handover's arguments). Half the agents export over gRPC, half over HTTP.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer


@dataclass(frozen=True)
class Profile:
    service: str
    agent: str
    model: str
    provider: str
    tools: tuple[str, ...]
    protocol: str  # grpc | http
    change: str  # a state-changing tool
    check: str  # a tool that shows the state it left
    version: str = "1.0.0"  # its release (service.version)
    weights: tuple[tuple[str, int], ...] = ()  # behaviours weighted otherwise than BEHAVIOURS
    starts_after: float = 0.0  # seconds into the demo (a release rolled out after the one it replaces)


FLEET = (
    Profile("sre-agents", "sre-bot", "gpt-4.1-mini", "openai",
            ("kubectl_get_pods", "query_prometheus", "get_pod_logs", "restart_deployment"), "grpc",
            "scale_deployment", "get_rollout_status"),
    Profile("support", "support-agent", "claude-sonnet-4-0", "anthropic",
            ("lookup_order", "get_shipping_status", "issue_refund"), "http", "cancel_order", "lookup_order", "3.1.0"),
    # a canary of the next release beside it, which claims success after failed checks more often: `mastwatch top
    # versions` tells it apart from the release before once both have enough runs
    Profile("support", "support-agent", "claude-sonnet-4-0", "anthropic",
            ("lookup_order", "get_shipping_status", "issue_refund"), "http", "cancel_order", "lookup_order", "3.2.0",
            (("false_success", 16),), starts_after=5.0),
    Profile("coding", "coding-agent", "gpt-4o", "openai", ("read_file", "run_tests", "edit_file"), "grpc",
            "apply_patch", "run_tests"),
    Profile("internal-tools", "triage-agent", "acme-llama-3-70b-local", "acme", ("search_tickets", "add_label"),
            "http", "update_ticket", "search_tickets"),
)
BEHAVIOURS = {"healthy": 10, "loop": 4, "cycle": 2, "retry": 2, "poll": 2, "false_success": 1, "unchecked": 1,
              "turn_limit": 1, "gives_up": 1}  # relative weights


class SimulatedAgent:
    def __init__(self, profile: Profile, tracer: Tracer, rng: random.Random, pace: float) -> None:
        self.p = profile
        self.tracer = tracer
        self.rng = rng
        self.pace = pace  # seconds per step

    def _chat(self, prompt_tokens: int, tool: str | None, args: dict | None, text: str = "",
              heard: str | None = None) -> None:
        """A model call; `heard`: what the user said before it (the last turn of its input messages)."""
        p = self.p
        with self.tracer.start_as_current_span(f"chat {p.model}", kind=SpanKind.CLIENT) as span:
            time.sleep(self.pace * self.rng.uniform(0.5, 1.0))
            parts = [{"type": "text", "content": text}] if text else []
            if tool:
                parts.append({"type": "tool_call", "id": f"call_{self.rng.getrandbits(40):x}", "name": tool,
                              "arguments": args})
            span.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": p.provider,
                "gen_ai.request.model": p.model, "gen_ai.response.model": p.model,
                "gen_ai.agent.name": p.agent,
                "gen_ai.usage.input_tokens": prompt_tokens,
                "gen_ai.usage.cache_read.input_tokens": prompt_tokens // 2,
                "gen_ai.usage.output_tokens": self.rng.randint(40, 160),
                "gen_ai.response.finish_reasons": ["tool_call" if tool else "stop"],
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts,
                                                       "finish_reason": "tool_call" if tool else "stop"}]),
            })
            if heard:
                span.set_attribute("gen_ai.input.messages", json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": heard}]}]))

    def _tool(self, name: str, args: dict, result: str, error: bool = False) -> None:
        with self.tracer.start_as_current_span(f"execute_tool {name}", kind=SpanKind.INTERNAL) as span:
            time.sleep(self.pace * self.rng.uniform(0.2, 0.6))
            span.set_attributes({
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": f"call_{self.rng.getrandbits(40):x}", "gen_ai.agent.name": self.p.agent,
                "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.tool.call.result": result,
            })
            if error:
                span.set_attribute("error.type", "ToolError")
                span.set_status(Status(StatusCode.ERROR, result))

    def _step(self, tokens: int, tool: str, args: dict, result: str, error: bool = False) -> int:
        self._chat(tokens, tool, args)
        self._tool(tool, args, result, error)
        return tokens + self.rng.randint(150, 400)

    def run_once(self, behaviour: str | None = None) -> tuple[str, str]:
        """One task (of `behaviour`, else one drawn by weight); returns the behaviour and the trace id (hex)."""
        p, rng = self.p, self.rng
        weights = {**BEHAVIOURS, **dict(p.weights)}
        behaviour = behaviour or rng.choices(list(weights), weights=list(weights.values()))[0]
        with self.tracer.start_as_current_span(f"invoke_agent {p.agent}", kind=SpanKind.INTERNAL) as root:
            root.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": p.agent,
                                 "gen_ai.provider.name": p.provider, "gen_ai.request.model": p.model,
                                 "gen_ai.conversation.id": f"conv_{rng.getrandbits(48):x}"})
            tokens = rng.randint(800, 2000)
            target = {"id": rng.randint(1000, 9999)}
            first, second = p.tools[0], p.tools[1]
            if behaviour == "loop":  # the same call again and again: FM-1.3
                for _ in range(rng.randint(5, 8)):
                    tokens = self._step(tokens, first, target, f"{first}: 3 items, no change")
            elif behaviour == "cycle":  # A -> B -> A -> B: FM-1.3
                for _ in range(3):
                    tokens = self._step(tokens, first, target, "ok: pending")
                    tokens = self._step(tokens, second, target, "ok: pending")
            elif behaviour == "retry":  # a failure, then the same call again: a retry, not repetition
                tokens = self._step(tokens, first, target, "503 upstream unavailable", error=True)
                tokens = self._step(tokens, first, target, "ok")
                tokens = self._step(tokens, p.check, target, json.dumps({"id": target["id"], "state": "done"}))
            elif behaviour == "poll":  # the same status call, a different answer each time: polling
                for i in range(4):
                    tokens = self._step(tokens, second, target, json.dumps({"state": "running", "progress": i * 25}))
            elif behaviour == "false_success":  # the check of a change fails, the answer claims success: FM-3.3
                tokens = self._step(tokens, first, target, json.dumps({"id": target["id"], "items": 3}))
                tokens = self._step(tokens, p.change, target, json.dumps({"id": target["id"], "changed": True}))
                tokens = self._step(tokens, p.check, target, f"Error: {p.check} failed for {target['id']}",
                                    error=True)
                self._chat(tokens, None, None, text=f"Task {target['id']} has been completed successfully.")
            elif behaviour == "unchecked":  # a change acknowledged, never checked: FM-3.2
                tokens = self._step(tokens, first, target, json.dumps({"id": target["id"], "items": 3}))
                tokens = self._step(tokens, p.change, target, json.dumps({"status": "accepted", "id": target["id"]}))
            elif behaviour == "gives_up":  # hands over while the problem is still there, no cause found: FM-3.1, 3.2
                self._chat(tokens, first, target, heard=f"Item {target['id']} still does not work, I tried again.")
                self._tool(first, target, json.dumps({"id": target["id"], "state": "active"}))
                summary = {"summary": f"Despite the checks, the problem with {target['id']} persists. Further "
                                      "technical support is needed."}
                tokens = self._step(tokens + 300, "transfer_to_human_agents", summary, "Transfer successful")
                self._chat(tokens, None, None, text="You are being transferred to a human agent.")
                return behaviour, f"{root.get_span_context().trace_id:032x}"
            elif behaviour == "turn_limit":  # the framework stops the run at its turn limit: FM-1.5
                reads = (first, second, p.check)
                for page in range(rng.randint(3, 5)):
                    tokens = self._step(tokens, reads[page % 3], {"id": target["id"], "page": page},
                                        json.dumps({"page": page, "items": 10}))
                root.set_attribute("error.type", "agents.exceptions.MaxTurnsExceeded")
                root.set_status(Status(StatusCode.ERROR, f"Max turns ({page + 1}) exceeded"))
                return behaviour, f"{root.get_span_context().trace_id:032x}"
            else:  # a few calls, then a look at the state they left
                for tool in rng.sample(p.tools, k=min(len(p.tools), rng.randint(2, 3))):
                    tokens = self._step(tokens, tool, {"id": target["id"], "q": tool},
                                        json.dumps({"id": target["id"], tool: "ok"}))
                tokens = self._step(tokens, p.check, target, json.dumps({"id": target["id"], "state": "done"}))
            if behaviour != "false_success":
                self._chat(tokens, None, None, text=f"Task {target['id']} handled ({behaviour}).")
        return behaviour, f"{root.get_span_context().trace_id:032x}"


def _provider(profile: Profile, grpc_endpoint: str, http_endpoint: str, delay_ms: int) -> TracerProvider:
    exporter = (GrpcSpanExporter(endpoint=grpc_endpoint, insecure=True) if profile.protocol == "grpc"
                else HttpSpanExporter(endpoint=f"http://{http_endpoint}/v1/traces"))
    provider = TracerProvider(resource=Resource.create({"service.name": profile.service,
                                                        "service.version": profile.version,
                                                        "deployment.environment.name": "demo"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=delay_ms))
    return provider


def run_fleet(grpc_endpoint: str, http_endpoint: str, stop: threading.Event, *, pace: float = 0.3,
              seed: int | None = None, profiles: tuple[Profile, ...] = FLEET, delay_ms: int = 500) -> dict[str, int]:
    """Run every profile in its own thread until `stop` is set; returns how many runs of each behaviour."""
    counts: dict[str, int] = {}
    lock = threading.Lock()
    providers = [_provider(p, grpc_endpoint, http_endpoint, delay_ms) for p in profiles]

    def loop(profile: Profile, provider: TracerProvider, index: int) -> None:
        agent = SimulatedAgent(profile, provider.get_tracer("mastwatch.demo"),
                               random.Random(None if seed is None else seed + index), pace)
        if stop.wait(profile.starts_after):
            return
        while not stop.is_set():
            behaviour, _ = agent.run_once()
            with lock:
                counts[behaviour] = counts.get(behaviour, 0) + 1

    threads = [threading.Thread(target=loop, args=(p, prov, i), daemon=True, name=f"demo-{p.agent}")
               for i, (p, prov) in enumerate(zip(profiles, providers, strict=True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for provider in providers:
        provider.shutdown()
    return counts
