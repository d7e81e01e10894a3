"""OTLP/gRPC: opentelemetry.proto.collector.trace.v1.TraceService/Export."""

from __future__ import annotations

import logging
from concurrent import futures
from typing import NoReturn

import grpc
from google.protobuf.any_pb2 import Any
from google.protobuf.duration_pb2 import Duration
from google.rpc import code_pb2, status_pb2
from google.rpc.error_details_pb2 import RetryInfo
from grpc_status import rpc_status

from mastwatch.collector.security import BearerCheck
from mastwatch.collector.threads import name_os_thread

from . import Counters, GrpcConfig, Sink, accept, refused_undecoded
from .decode import decode
from .refusals import Refusals

log = logging.getLogger(__name__)
METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
QUEUE_FULL = "mastwatch queue is full, retry later"


class _Status(grpc.Status):
    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: tuple) -> None:
        self.code, self.details, self.trailing_metadata = code, details, trailing_metadata


def backpressure_status(retry_after: float) -> grpc.Status:
    """RESOURCE_EXHAUSTED with RetryInfo where each kind of client reads it: in the status details
    (`grpc-status-details-bin`: Go clients, so the Collector's OTLP exporter, which treats RESOURCE_EXHAUSTED as
    permanent without it) and in the `google.rpc.retryinfo-bin` trailer (the Python SDK's exporter)."""
    info = RetryInfo(retry_delay=Duration(seconds=int(retry_after), nanos=int(retry_after % 1 * 1e9)))
    detail = Any()
    detail.Pack(info)
    status = rpc_status.to_status(status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=QUEUE_FULL,
                                                    details=[detail]))
    return _Status(status.code, status.details,
                   (*status.trailing_metadata, ("google.rpc.retryinfo-bin", info.SerializeToString())))


class GrpcReceiver:
    def __init__(self, config: GrpcConfig, sink: Sink, counters: Counters, retry_after: float = 1.0) -> None:
        self.config = config
        self.sink = sink
        self.counters = counters
        self.refusals = Refusals(counters, log, "OTLP/gRPC")
        self._backpressure = backpressure_status(retry_after)
        self.limit = limit = config.max_recv_msg_size_mib * 1024 * 1024
        pool = futures.ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="otlp-grpc",
                                          initializer=name_os_thread)
        self.server = grpc.server(pool, options=[
            # gRPC refuses larger messages before any handler sees them, unseen by the counters: it is given twice
            # the limit, and the handler refuses (and counts) what is over the limit itself
            ("grpc.max_receive_message_length", 2 * limit),
            ("grpc.so_reuseport", 0),  # a second server must fail, not share the port
            ("grpc.max_connection_idle_ms", int(config.max_connection_idle * 1000)),
            ("grpc.server_handshake_timeout_ms", int(config.handshake_timeout * 1000)),
        ])
        handler = grpc.unary_unary_rpc_method_handler(self._export, request_deserializer=None,
                                                      response_serializer=lambda m: m.SerializeToString())
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": handler}),))
        self.auth = BearerCheck(config.auth) if config.auth is not None else None
        try:
            if config.tls is None:
                self.port = self.server.add_insecure_port(config.endpoint)
            else:
                tls = config.tls
                client_ca = tls.read("client_ca_file") if tls.client_ca_file else None
                credentials = grpc.ssl_server_credentials([(tls.read("key_file"), tls.read("cert_file"))],
                                                          root_certificates=client_ca,
                                                          require_client_auth=client_ca is not None)
                self.port = self.server.add_secure_port(config.endpoint, credentials)
        except RuntimeError as e:
            raise OSError(f"cannot listen for OTLP/gRPC on {config.endpoint}: {e}") from None

    def _export(self, body: bytes, context: grpc.ServicerContext):
        if self.auth is not None and not self.auth.allows(_authorization(context)):
            self.refusals.refuse("unauthenticated", "no valid bearer token", context.peer())
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "send authorization: Bearer <token>")
        if len(body) > self.limit:
            message = f"request of {len(body)} bytes exceeds receiver.grpc.max_recv_msg_size_mib ({self.limit} bytes)"
            self.refusals.refuse("too_large", message, context.peer())
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        if refused_undecoded(body, self.sink, self.counters, "grpc"):
            self._refuse(context)
        try:
            decoded = decode(body)
        except ValueError as e:
            self.refusals.refuse("malformed", f"malformed ExportTraceServiceRequest: {e}", context.peer())
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed ExportTraceServiceRequest: {e}")
        outcome = accept(decoded, body, self.sink, self.counters, "grpc")
        if outcome.response is None:
            self._refuse(context)
        return outcome.response

    def _refuse(self, context: grpc.ServicerContext) -> NoReturn:
        """Backpressure: RESOURCE_EXHAUSTED with RetryInfo (raises, as context.abort does)."""
        context.abort_with_status(self._backpressure)

    def start(self) -> None:
        self.server.start()

    def stop(self, grace: float = 5.0) -> None:
        self.server.stop(grace).wait()


def _authorization(context: grpc.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata():
        if key == "authorization":
            return value if isinstance(value, str) else None
    return None
