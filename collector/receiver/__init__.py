"""The OTLP receiver: gRPC (TraceService/Export) and HTTP (POST /v1/traces), per the OTLP specification.

Both protocols decode a request into span records (see `decode`), then share `accept`: spans with bad
ids are rejected with a reason in `partial_success`, the rest queued for the processor. A full queue is backpressure:
gRPC RESOURCE_EXHAUSTED with RetryInfo, HTTP 429 with Retry-After. A malformed request is
INVALID_ARGUMENT / HTTP 400 and disturbs nothing else.

A protobuf request the queue has no room for is refused before it is decoded (`refused_undecoded`): its spans are
counted from its framing alone, so an overloaded receiver spends almost nothing on what it refuses, and the spans
are still counted as received and rejected (`queue_full`; spans with bad ids among them too). A request whose
framing is broken is decoded, to say what is wrong with it; one broken only inside a span is told so once the queue
has room. JSON bodies are parsed before the queue is asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)
from pydantic import BaseModel, ConfigDict, Field

from mastwatch.collector.durations import Duration
from mastwatch.collector.security import AuthConfig, TLSConfig

from .decode import Decoded, SpanRecord, count_spans

MIN_SPAN_BYTES = 2  # of a serialized request, per span: the field's tag and length (an empty span)


class GrpcConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    endpoint: str = Field("127.0.0.1:4317", description="host:port")
    max_recv_msg_size_mib: int = Field(16, ge=1)
    workers: int = Field(8, ge=1, description="gRPC server threads")
    max_connection_idle: Duration = Field(300.0, gt=0, description="a connection with no call this long is closed; "
                                          "one that has not completed its HTTP/2 handshake within "
                                          "`handshake_timeout` is too")
    handshake_timeout: Duration = Field(30.0, gt=0)
    tls: TLSConfig | None = Field(None, description="serve gRPC over TLS (configtls: cert_file, key_file, "
                                  "client_ca_file, min_version)")
    auth: AuthConfig | None = Field(None, description="require `authorization: Bearer <token>` (bearertokenauth: "
                                    "token or filename)")


class HttpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    endpoint: str = Field("127.0.0.1:4318", description="host:port")
    max_request_body_mib: int = Field(16, ge=1, description="after decompression")
    idle_timeout: Duration = Field(30.0, gt=0, description="a connection idle this long, or that has not sent a "
                                   "request's headers within it, is closed")
    read_timeout: Duration = Field(30.0, gt=0, description="a request's body must arrive within this")
    max_connections: int = Field(1000, ge=1, description="open connections kept (at most half the open-file limit); "
                                 "past it the oldest idle one is closed for each new one")
    workers: int = Field(4, ge=1, description="threads decoding requests")
    tls: TLSConfig | None = Field(None, description="serve HTTPS (configtls: cert_file, key_file, client_ca_file, "
                                  "min_version)")
    auth: AuthConfig | None = Field(None, description="require `Authorization: Bearer <token>` (bearertokenauth: "
                                    "token or filename)")


class ReceiverConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    grpc: GrpcConfig = GrpcConfig()
    http: HttpConfig = HttpConfig()
    retry_after: Duration = Field(1.0, gt=0, description="what clients are told to wait when the queue is full")


class Sink(Protocol):
    # size: the request's bytes; payload, kind: the request as received, for the journal (kind 0 protobuf, 1 JSON)
    def submit(self, spans: list[SpanRecord], size: int, payload: bytes | None = None, kind: int = 0) -> bool: ...
    def admits(self, spans: int, size: int) -> bool: ...  # whether submit would take such a request now


class Counters(Protocol):
    def spans_received(self, protocol: str, n: int) -> None: ...
    def spans_rejected(self, reason: str, n: int) -> None: ...
    def request_rejected(self, reason: str) -> None: ...


@dataclass
class Outcome:
    response: ExportTraceServiceResponse | None  # None: refused, the queue is full
    spans: int = 0


def refused_undecoded(body: bytes, sink: Sink, counters: Counters, protocol: str) -> bool:
    """Whether a serialized request is refused before it is decoded: the queue has no room for its spans, counted
    from the framing (received and rejected as `queue_full`). False when there is room, or when the framing is
    broken (decoding says how)."""
    if sink.admits(len(body) // MIN_SPAN_BYTES, len(body)):  # room even if the body were all spans: none counted
        return False
    try:
        spans = count_spans(body)
    except ValueError:
        return False
    if sink.admits(spans, len(body)):
        return False
    counters.spans_received(protocol, spans)
    counters.spans_rejected("queue_full", spans)
    return True


def accept(decoded: Decoded, body: bytes, sink: Sink, counters: Counters, protocol: str, kind: int = 0) -> Outcome:
    """Queue a decoded request's valid spans (`body`: the request as received, decompressed; `kind` 0 protobuf, 1
    OTLP/JSON); report the invalid ones in partial_success."""
    size = len(body)
    spans, rejected = decoded
    counters.spans_received(protocol, len(spans) + rejected)
    if rejected:
        counters.spans_rejected("invalid_id", rejected)
    if spans and not sink.submit(spans, size, body, kind):
        counters.spans_rejected("queue_full", len(spans))
        return Outcome(None, len(spans))
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.CopyFrom(ExportTracePartialSuccess(
            rejected_spans=rejected,
            error_message=f"{rejected} span(s) rejected: trace_id must be 16 bytes (not all zero), "
                          "span_id and parent_span_id 8 bytes"))
    return Outcome(response, len(spans))
