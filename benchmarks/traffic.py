"""Synthetic agent traffic for the benchmarks: OTLP requests encoded up front.

Spans carry the attributes mastwatch reads (minimal), or with `semconv` also those the OpenTelemetry GenAI
instrumentations record besides (the semantic conventions' recommended attributes: response model, id and finish
reasons, server address and port, request parameters, tool type and description; an SDK's resource attributes and
an instrumentation scope), as agents send them.
"""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span


def _kv(key: str, value) -> KeyValue:
    if isinstance(value, str):
        return KeyValue(key=key, value=AnyValue(string_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    if isinstance(value, list):
        return KeyValue(key=key, value=AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=v)
                                                                               for v in value])))
    return KeyValue(key=key, value=AnyValue(int_value=value))


# The processor's settings of the benchmarks' server: a trace completes 20 ms after its root ended, so traces
# complete all through a run, as in a live server, and the wait for the last one stays out of the throughput.
SERVER_PROCESSOR = {"decision_wait": 0.02, "tick": 0.01}

# Runs start 1 ms apart, as many start together at the rates the benchmarks send. Spaced further, a benchmark's
# runs would span days, and every store insert would write a part into each day's partition, which live traffic,
# whose batches hold the last seconds' runs, does not.
RUN_SPACING_NS = 1_000_000

SDK_RESOURCE = [("service.version", "1.4.2"), ("deployment.environment.name", "production"),
                ("telemetry.sdk.language", "python"), ("telemetry.sdk.name", "opentelemetry"),
                ("telemetry.sdk.version", "1.38.0")]
SCOPE = InstrumentationScope(name="opentelemetry.instrumentation.openai_v2", version="2.1b0")


def agent_trace(n: int, content: bool = False, semconv: bool = False) -> list[Span]:
    """One 10-span agent run; every 4th run calls the same tool with the same arguments 4 times."""
    trace_id = (n + 1).to_bytes(16, "big")
    root_id = ((n << 4) | 1).to_bytes(8, "big")
    t0 = 1_700_000_000_000_000_000 + n * RUN_SPACING_NS
    spans = [Span(trace_id=trace_id, span_id=root_id, name="invoke_agent sre-bot", start_time_unix_nano=t0,
                  end_time_unix_nano=t0 + 9_000_000_000, kind=Span.SpanKind.SPAN_KIND_INTERNAL,
                  attributes=[_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.agent.name", "sre-bot")])]
    looping = n % 4 == 0
    for i in range(1, 10):
        start = t0 + i * 900_000_000
        span_id = ((n << 4) | (i + 1)).to_bytes(8, "big")
        if i % 2:
            attrs = [_kv("gen_ai.operation.name", "chat"), _kv("gen_ai.provider.name", "openai"),
                     _kv("gen_ai.request.model", "gpt-4.1-mini"), _kv("gen_ai.usage.input_tokens", 1200 + i),
                     _kv("gen_ai.usage.output_tokens", 80), _kv("gen_ai.agent.name", "sre-bot")]
            if semconv:
                attrs += [_kv("gen_ai.response.model", "gpt-4.1-mini-2025-04-14"),
                          _kv("gen_ai.response.id", f"chatcmpl-{n}-{i}"),
                          _kv("gen_ai.response.finish_reasons", ["stop"] if i == 9 else ["tool_calls"]),
                          _kv("server.address", "api.openai.com"), _kv("server.port", 443),
                          _kv("gen_ai.request.max_tokens", 1024), _kv("gen_ai.request.temperature", 0.2)]
            name = "chat gpt-4.1-mini"
        else:
            tool = "kubectl_get_pods" if looping else f"tool_{i}"
            attrs = [_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", tool),
                     _kv("gen_ai.tool.call.id", f"call_{n}_{i}"), _kv("gen_ai.agent.name", "sre-bot"),
                     _kv("gen_ai.tool.call.arguments", '{"namespace": "prod", "selector": "app=api"}')]
            if content:
                attrs.append(_kv("gen_ai.tool.call.result", "x" * 20_000))
            if semconv:
                attrs += [_kv("gen_ai.tool.type", "function"),
                          _kv("gen_ai.tool.description", "Lists the pods of a namespace")]
            name = f"execute_tool {tool}"
        kind = Span.SpanKind.SPAN_KIND_CLIENT if semconv and i % 2 else Span.SpanKind.SPAN_KIND_INTERNAL
        spans.append(Span(trace_id=trace_id, span_id=span_id, parent_span_id=root_id, name=name, kind=kind,
                          start_time_unix_nano=start, end_time_unix_nano=start + 800_000_000, attributes=attrs))
    return spans[1:] + spans[:1]  # children end (and are exported) before their root


def requests(total_spans: int, batch: int, content: bool = False, roots: bool = True,
             semconv: bool = False) -> list[bytes]:
    """Requests of about `batch` spans, 10-span traces; `roots` False leaves out root spans (traces stay open)."""
    out, spans, n = [], [], 0
    resource = Resource(attributes=[_kv("service.name", "sre-agents"),
                                    *(_kv(k, v) for k, v in (SDK_RESOURCE if semconv else ()))])
    scope = SCOPE if semconv else None

    def request(spans: list[Span]) -> bytes:
        return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
            resource=resource, scope_spans=[ScopeSpans(scope=scope, spans=spans)])]).SerializeToString()

    while n * 10 < total_spans:
        trace = agent_trace(n, content, semconv)
        spans.extend(trace if roots else trace[:-1])
        n += 1
        if len(spans) >= batch:
            out.append(request(spans))
            spans = []
    if spans:
        out.append(request(spans))
    return out


