"""Synthetic agent traffic for the benchmarks: OTLP requests encoded up front."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span


def _kv(key: str, value) -> KeyValue:
    if isinstance(value, str):
        return KeyValue(key=key, value=AnyValue(string_value=value))
    return KeyValue(key=key, value=AnyValue(int_value=value))


def agent_trace(n: int, content: bool = False) -> list[Span]:
    """One 10-span agent run; every 4th run calls the same tool with the same arguments 4 times."""
    trace_id = (n + 1).to_bytes(16, "big")
    root_id = ((n << 4) | 1).to_bytes(8, "big")
    t0 = 1_700_000_000_000_000_000 + n * 10_000_000_000
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
            name = "chat gpt-4.1-mini"
        else:
            tool = "kubectl_get_pods" if looping else f"tool_{i}"
            attrs = [_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", tool),
                     _kv("gen_ai.tool.call.id", f"call_{n}_{i}"), _kv("gen_ai.agent.name", "sre-bot"),
                     _kv("gen_ai.tool.call.arguments", '{"namespace": "prod", "selector": "app=api"}')]
            if content:
                attrs.append(_kv("gen_ai.tool.call.result", "x" * 20_000))
            name = f"execute_tool {tool}"
        spans.append(Span(trace_id=trace_id, span_id=span_id, parent_span_id=root_id, name=name,
                          start_time_unix_nano=start, end_time_unix_nano=start + 800_000_000, attributes=attrs))
    return spans[1:] + spans[:1]  # children end (and are exported) before their root


def requests(total_spans: int, batch: int, content: bool = False, roots: bool = True) -> list[bytes]:
    """Requests of about `batch` spans, 10-span traces; `roots` False leaves out root spans (traces stay open)."""
    out, spans, n = [], [], 0
    resource = Resource(attributes=[_kv("service.name", "sre-agents")])
    while n * 10 < total_spans:
        spans.extend(agent_trace(n, content) if roots else agent_trace(n, content)[:-1])
        n += 1
        if len(spans) >= batch:
            out.append(ExportTraceServiceRequest(resource_spans=[ResourceSpans(
                resource=resource, scope_spans=[ScopeSpans(spans=spans)])]).SerializeToString())
            spans = []
    if spans:
        out.append(ExportTraceServiceRequest(resource_spans=[ResourceSpans(
            resource=resource, scope_spans=[ScopeSpans(spans=spans)])]).SerializeToString())
    return out


