"""Agent runs emitted through the real OpenTelemetry SDK and its OTLP exporters (gRPC and HTTP)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer


def provider(protocol: str, endpoint: str, service: str = "test-agents",
             resource: dict[str, str] | None = None) -> TracerProvider:
    """A TracerProvider exporting each span as it ends (SimpleSpanProcessor), so tests need no sleeps; `resource`:
    attributes of its resource besides the service's name."""
    exporter = GrpcExporter(endpoint=endpoint, insecure=True) if protocol == "grpc" else HttpExporter(endpoint=endpoint)
    tp = TracerProvider(resource=Resource.create({"service.name": service, **(resource or {})}))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp


@contextmanager
def agent_run(tracer: Tracer, agent: str = "sre-bot") -> Iterator[Span]:
    with tracer.start_as_current_span(f"invoke_agent {agent}", kind=SpanKind.INTERNAL) as root:
        root.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent})
        yield root


def chat(tracer: Tracer, model: str = "gpt-4.1-mini", input_tokens: int = 1000, output_tokens: int = 50,
         cache_read: int = 0, text: str | None = None, agent: str = "sre-bot") -> None:
    with tracer.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT) as span:
        span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                             "gen_ai.agent.name": agent,
                             "gen_ai.request.model": model, "gen_ai.usage.input_tokens": input_tokens,
                             "gen_ai.usage.output_tokens": output_tokens,
                             "gen_ai.usage.cache_read.input_tokens": cache_read,
                             "gen_ai.response.finish_reasons": ["stop" if text else "tool_call"]})
        if text:
            span.set_attribute("gen_ai.output.messages", json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": text}]}]))


def tool(tracer: Tracer, name: str, args: dict, result: str = "ok", error: bool = False,
         agent: str | None = "sre-bot") -> None:
    """A tool call; `agent` None leaves out gen_ai.agent.name, as many instrumentations do."""
    with tracer.start_as_current_span(f"execute_tool {name}", kind=SpanKind.INTERNAL) as span:
        if agent:
            span.set_attribute("gen_ai.agent.name", agent)
        span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                             "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.tool.call.result": result})
        if error:
            span.set_attribute("error.type", "ToolError")
            span.set_status(Status(StatusCode.ERROR))


def step(tracer: Tracer, name: str, args: dict, agent: str = "sre-bot", **chat_kwargs) -> None:
    """One agent step: the model call that decides, then the tool call."""
    chat(tracer, agent=agent, **chat_kwargs)
    tool(tracer, name, args, agent=agent)
