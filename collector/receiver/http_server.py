"""OTLP/HTTP: POST /v1/traces with application/x-protobuf or application/json bodies, gzip or not."""

from __future__ import annotations

import logging
import threading
import time
import zlib
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.rpc.status_pb2 import Status

from mastwatch.threads import name_os_thread

from . import Counters, HttpConfig, Sink, accept, refused_undecoded
from .decode import decode, records
from .otlp_json import parse_request, to_json

log = logging.getLogger(__name__)
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES_PATH = "/v1/traces"
GRPC_INVALID_ARGUMENT = 3
GRPC_RESOURCE_EXHAUSTED = 8
LINGER_BYTES = 64 << 20  # of a refused body read and dropped before the connection closes
LINGER_SECONDS = 5.0


class _TooLarge(Exception):
    pass


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise ValueError(f"unsupported Content-Encoding {encoding!r} (gzip, deflate or none)")
    d = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise ValueError(f"bad {encoding} body: {e}") from e
    if len(out) > limit:
        raise _TooLarge()
    return out


class _Handler(BaseHTTPRequestHandler):
    server: OtlpHttpServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _reply(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, http_status: int, grpc_code: int, message: str, content_type: str,
               headers: dict[str, str] | None = None) -> None:
        status = Status(code=grpc_code, message=message)
        body = to_json(status).encode() if content_type == JSON else status.SerializeToString()
        self._reply(http_status, body, content_type, headers)

    def do_POST(self) -> None:
        srv = self.server
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        reply_type = JSON if content_type == JSON else PROTOBUF
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            self._error(411, GRPC_INVALID_ARGUMENT, "send a Content-Length (chunked bodies are not accepted)",
                        reply_type)
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._error(400, GRPC_INVALID_ARGUMENT, "bad Content-Length", reply_type)
            return
        if self.path.split("?")[0] != TRACES_PATH:
            self._drain(length)
            self._error(404, 5, f"unknown path {self.path}; traces go to {TRACES_PATH}", reply_type)
            return
        if content_type not in (PROTOBUF, JSON):
            self._drain(length)
            self._error(415, GRPC_INVALID_ARGUMENT, f"unsupported Content-Type {content_type!r}; use {PROTOBUF} "
                        f"or {JSON}", reply_type)
            return
        if length > srv.limit:
            srv.counters.request_rejected("too_large")
            self.close_connection = True
            self._error(413, GRPC_INVALID_ARGUMENT, f"body of {length} bytes exceeds {srv.limit}", reply_type)
            self._linger(length)
            return
        body = self.rfile.read(length)
        try:
            body = _decompress(body, (self.headers.get("Content-Encoding") or "").strip().lower(), srv.limit)
            if content_type == PROTOBUF and refused_undecoded(body, srv.sink, srv.counters, "http"):
                self._refuse(reply_type)
                return
            decoded = records(parse_request(body)) if content_type == JSON else decode(body)
        except _TooLarge:
            srv.counters.request_rejected("too_large")
            self._error(413, GRPC_INVALID_ARGUMENT, f"decompressed body exceeds {srv.limit} bytes", reply_type)
            return
        except ValueError as e:
            srv.counters.request_rejected("malformed")
            self._error(400, GRPC_INVALID_ARGUMENT, f"malformed ExportTraceServiceRequest: {e}", reply_type)
            return
        outcome = accept(decoded, len(body), srv.sink, srv.counters, "http")
        if outcome.response is None:
            self._refuse(reply_type)
            return
        body = to_json(outcome.response).encode() if reply_type == JSON else outcome.response.SerializeToString()
        self._reply(200, body, reply_type)

    def _refuse(self, reply_type: str) -> None:
        """Backpressure: 429 with Retry-After."""
        self._error(429, GRPC_RESOURCE_EXHAUSTED, "mastwatch queue is full, retry later", reply_type,
                    {"Retry-After": str(max(round(self.server.retry_after), 1))})

    def _linger(self, length: int) -> None:
        """Read and drop a refused body (at most LINGER_BYTES, for LINGER_SECONDS) before closing, so a client
        still uploading reads the answer instead of failing on a reset connection (a lingering close)."""
        remaining, deadline = min(length, LINGER_BYTES), time.monotonic() + LINGER_SECONDS
        try:
            self.connection.settimeout(LINGER_SECONDS)
            while remaining > 0 and time.monotonic() < deadline:
                chunk = self.rfile.read1(min(remaining, 1 << 16))
                if not chunk:
                    break
                remaining -= len(chunk)
        except OSError:
            pass

    def _drain(self, length: int) -> None:
        if 0 < length <= self.server.limit:
            self.rfile.read(length)
        else:
            self.close_connection = True

    def do_GET(self) -> None:
        self._reply(HTTPStatus.METHOD_NOT_ALLOWED, b"POST OTLP traces to /v1/traces\n", "text/plain")


class OtlpHttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, config: HttpConfig, sink: Sink, counters: Counters, retry_after: float = 1.0) -> None:
        host, _, port = config.endpoint.rpartition(":")
        self.sink = sink
        self.counters = counters
        self.limit = config.max_request_body_mib * 1024 * 1024
        self.retry_after = retry_after
        try:
            super().__init__((host or "127.0.0.1", int(port)), _Handler)
        except OSError as e:
            raise OSError(f"cannot listen for OTLP/HTTP on {config.endpoint}: {e.strerror}") from None
        self.port = self.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="otlp-http", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        name_os_thread()
        self.serve_forever()

    def process_request_thread(self, request, client_address) -> None:  # a thread per connection
        threading.current_thread().name = "otlp-http-conn"
        name_os_thread()
        super().process_request_thread(request, client_address)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
