"""A small fleet of simulated agents that send real OTLP through the OpenTelemetry SDK.

Each agent runs one task after another as an `invoke_agent` span with `chat` and `execute_tool` children
(OTel GenAI conventions, content capture on). Some runs loop (the same call again and again, or a
two-step cycle), some retry after an error, some poll, most are healthy. Half the agents export over
gRPC, half over HTTP.
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


FLEET = (
    Profile("sre-agents", "sre-bot", "gpt-4.1-mini", "openai",
            ("kubectl_get_pods", "query_prometheus", "get_pod_logs", "restart_deployment"), "grpc"),
    Profile("support", "support-agent", "claude-sonnet-4-0", "anthropic",
            ("lookup_order", "get_shipping_status", "issue_refund"), "http"),
    Profile("coding", "coding-agent", "gpt-4o", "openai", ("read_file", "run_tests", "edit_file"), "grpc"),
    Profile("internal-tools", "triage-agent", "acme-llama-3-70b-local", "acme", ("search_tickets", "add_label"),
            "http"),
)


class SimulatedAgent:
    def __init__(self, profile: Profile, tracer: Tracer, rng: random.Random, pace: float) -> None:
        self.p = profile
        self.tracer = tracer
        self.rng = rng
        self.pace = pace  # seconds per step

    def _chat(self, prompt_tokens: int, tool: str | None, args: dict | None, text: str = "") -> None:
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

    def run_once(self) -> str:
        """One task; returns which behaviour it showed."""
        p, rng = self.p, self.rng
        behaviour = rng.choices(["healthy", "loop", "cycle", "retry", "poll"], weights=[5, 2, 1, 1, 1])[0]
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
                tokens = self._step(tokens, p.tools[-1], target, "done")
            elif behaviour == "poll":  # the same status call, a different answer each time: polling
                for i in range(4):
                    tokens = self._step(tokens, second, target, json.dumps({"state": "running", "progress": i * 25}))
            else:
                for tool in rng.sample(p.tools, k=min(len(p.tools), rng.randint(2, 3))):
                    tokens = self._step(tokens, tool, {"id": target["id"], "q": tool}, "ok")
            self._chat(tokens, None, None, text=f"Task {target['id']} handled ({behaviour}).")
        return behaviour


def _provider(profile: Profile, grpc_endpoint: str, http_endpoint: str, delay_ms: int) -> TracerProvider:
    exporter = (GrpcSpanExporter(endpoint=grpc_endpoint, insecure=True) if profile.protocol == "grpc"
                else HttpSpanExporter(endpoint=f"http://{http_endpoint}/v1/traces"))
    provider = TracerProvider(resource=Resource.create({"service.name": profile.service}))
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
        while not stop.is_set():
            behaviour = agent.run_once()
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
