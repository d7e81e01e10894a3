"""The OTLP receiver: gRPC (TraceService/Export) and HTTP (POST /v1/traces), per the OTLP specification.

Both protocols share `accept`: a request is decoded, its spans validated (bad ones are rejected with a
reason in `partial_success`), and the rest queued for the processor. A full queue is backpressure:
gRPC RESOURCE_EXHAUSTED with RetryInfo, HTTP 429 with Retry-After. A malformed request is
INVALID_ARGUMENT / HTTP 400 and disturbs nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from pydantic import BaseModel, ConfigDict, Field

from mastwatch.durations import Duration


class GrpcConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    endpoint: str = Field("127.0.0.1:4317", description="host:port")
    max_recv_msg_size_mib: int = Field(16, ge=1)
    workers: int = Field(8, ge=1, description="gRPC server threads")


class HttpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    endpoint: str = Field("127.0.0.1:4318", description="host:port")
    max_request_body_mib: int = Field(16, ge=1, description="after decompression")


class ReceiverConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    grpc: GrpcConfig = GrpcConfig()
    http: HttpConfig = HttpConfig()
    retry_after: Duration = Field(1.0, gt=0, description="what clients are told to wait when the queue is full")


class Sink(Protocol):
    def submit(self, request: ExportTraceServiceRequest, spans: int) -> bool: ...


class Counters(Protocol):
    def spans_received(self, protocol: str, n: int) -> None: ...
    def spans_rejected(self, reason: str, n: int) -> None: ...
    def request_rejected(self, reason: str) -> None: ...


@dataclass
class Outcome:
    response: ExportTraceServiceResponse | None  # None: refused, see `status`
    status: str = "ok"  # ok | busy
    spans: int = 0


def _drop_invalid(request: ExportTraceServiceRequest) -> tuple[int, int]:
    """Remove spans whose ids are not 16/8 bytes; returns (kept, rejected)."""
    kept = rejected = 0
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            spans = scope_spans.spans
            bad = [i for i, s in enumerate(spans) if len(s.trace_id) != 16 or len(s.span_id) != 8
                   or (s.parent_span_id and len(s.parent_span_id) != 8) or not any(s.trace_id)]
            for i in reversed(bad):
                del spans[i]
            kept += len(spans)
            rejected += len(bad)
    return kept, rejected


def accept(request: ExportTraceServiceRequest, sink: Sink, counters: Counters, protocol: str) -> Outcome:
    kept, rejected = _drop_invalid(request)
    counters.spans_received(protocol, kept + rejected)
    if rejected:
        counters.spans_rejected("invalid_id", rejected)
    if kept and not sink.submit(request, kept):
        counters.spans_rejected("queue_full", kept)
        return Outcome(None, "busy", kept)
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.CopyFrom(ExportTracePartialSuccess(
            rejected_spans=rejected,
            error_message=f"{rejected} span(s) rejected: trace_id must be 16 bytes (not all zero), "
                          "span_id and parent_span_id 8 bytes"))
    return Outcome(response, "ok", kept)
