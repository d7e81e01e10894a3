"""OTLP/HTTP: POST /v1/traces with application/x-protobuf or application/json bodies, served by aiohttp.

Bodies may come with a Content-Length or chunked (as the JavaScript SDK streams them), gzip or deflate or neither;
the size limit counts the body as decompressed, whichever way it came. Connections are kept alive between requests.
aiohttp's parser is strict (one Content-Length of digits only, `Transfer-Encoding` exactly named), and what it
refuses is counted and logged like every other refusal (`refusals`).

Served by `mastwatch.collector.http_serving` (idle timeout, connection cap, strict parsing, TLS); a request's body must
arrive within `read_timeout`; with `auth`, a request without the bearer token gets 401. Decoding runs on a pool of
`workers` threads, so the event loop only moves bytes.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web
from google.rpc.status_pb2 import Status

from mastwatch.collector.http_serving import LoopServer
from mastwatch.collector.security import BearerCheck
from mastwatch.collector.threads import name_os_thread

from . import Counters, HttpConfig, Sink, accept, refused_undecoded
from .decode import decode, records
from .otlp_json import parse_request, to_json
from .refusals import Refusals

log = logging.getLogger(__name__)
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES_PATH = "/v1/traces"
GRPC_INVALID_ARGUMENT = 3
GRPC_NOT_FOUND = 5
GRPC_RESOURCE_EXHAUSTED = 8
GRPC_DEADLINE_EXCEEDED = 4
GRPC_UNAUTHENTICATED = 16
ENCODINGS = frozenset({"", "identity", "gzip", "deflate"})
CHUNK = 1 << 16


class _TooLarge(Exception):
    pass


class OtlpHttpServer:
    def __init__(self, config: HttpConfig, sink: Sink, counters: Counters, retry_after: float = 1.0) -> None:
        self.config, self.sink, self.counters = config, sink, counters
        self.limit = config.max_request_body_mib * 1024 * 1024
        self.retry_after = retry_after
        self.refusals = Refusals(counters, log, "OTLP/HTTP")
        self._pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="otlp-http",
                                        initializer=name_os_thread)
        self.http = LoopServer(config.endpoint, "OTLP/HTTP", self._handle, self.refusals.refuse, config.idle_timeout,
                               config.max_connections, config.tls, thread_name="otlp-http")
        self.port = self.http.port
        self.auth = BearerCheck(config.auth) if config.auth is not None else None

    def start(self) -> None:
        self.http.start()

    def stop(self, grace: float = 5.0) -> None:
        self.http.stop(grace)
        self._pool.shutdown(wait=True)

    # --- one request ------------------------------------------------------------------------------------------

    def _error(self, http_status: int, grpc_code: int, message: str, reply_type: str,
               headers: dict[str, str] | None = None) -> web.Response:
        status = Status(code=grpc_code, message=message)
        body = to_json(status).encode() if reply_type == JSON else status.SerializeToString()
        return web.Response(status=http_status, body=body, content_type=reply_type, headers=headers)

    def _refuse(self, request: web.BaseRequest, reason: str, http_status: int, grpc_code: int, message: str,
                reply_type: str, close: bool = False) -> web.Response:
        self.refusals.refuse(reason, message, request.remote)
        response = self._error(http_status, grpc_code, message, reply_type)
        if close:
            response.force_close()
        return response

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        content_type = request.content_type.lower()
        reply_type = JSON if content_type == JSON else PROTOBUF
        if self.auth is not None and not self.auth.allows(request.headers.get("Authorization")):
            response = self._refuse(request, "unauthenticated", 401, GRPC_UNAUTHENTICATED,
                                    "send Authorization: Bearer <token>", reply_type)
            response.headers["WWW-Authenticate"] = 'Bearer realm="mastwatch"'
            return response
        if request.path != TRACES_PATH:
            return self._refuse(request, "not_found", 404, GRPC_NOT_FOUND,
                                f"unknown path {request.path}; traces go to {TRACES_PATH}", reply_type, close=True)
        if request.method != "POST":
            response = web.Response(status=405, text="POST OTLP traces to /v1/traces\n", headers={"Allow": "POST"})
            self.refusals.refuse("method_not_allowed", f"{request.method} {request.path}", request.remote)
            return response
        if content_type not in (PROTOBUF, JSON):
            return self._refuse(request, "unsupported_media_type", 415, GRPC_INVALID_ARGUMENT,
                                f"unsupported Content-Type {content_type!r}; use {PROTOBUF} or {JSON}", reply_type,
                                close=True)
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in ENCODINGS:  # 415, as the Collector's confighttp answers it
            return self._refuse(request, "unsupported_media_type", 415, GRPC_INVALID_ARGUMENT,
                                f"unsupported Content-Encoding {encoding!r} (gzip, deflate or none)", reply_type,
                                close=True)
        if request.content_length is not None and request.content_length > self.limit and encoding in ("",
                                                                                                       "identity"):
            return self._refuse(request, "too_large", 413, GRPC_INVALID_ARGUMENT,
                                f"body of {request.content_length} bytes exceeds {self.limit}", reply_type, close=True)
        try:
            body = await asyncio.wait_for(self._body(request), self.config.read_timeout)
        except TimeoutError:
            return self._refuse(request, "timeout", 408, GRPC_DEADLINE_EXCEEDED,
                                f"the body did not arrive within {self.config.read_timeout:g} s", reply_type,
                                close=True)
        except _TooLarge:
            return self._refuse(request, "too_large", 413, GRPC_INVALID_ARGUMENT,
                                f"body exceeds {self.limit} bytes", reply_type, close=True)
        try:
            body = await asyncio.get_running_loop().run_in_executor(self._pool, _decompress, body, encoding,
                                                                     self.limit)
        except _TooLarge:
            return self._refuse(request, "too_large", 413, GRPC_INVALID_ARGUMENT,
                                f"decompressed body exceeds {self.limit} bytes", reply_type)
        except ValueError as e:
            return self._refuse(request, "malformed", 400, GRPC_INVALID_ARGUMENT, str(e), reply_type)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._export, request, body,
                                                                content_type, reply_type)

    async def _body(self, request: web.BaseRequest) -> bytes:
        """The body as sent (Content-Length or chunked), refused past the size limit as it arrives."""
        parts, size = [], 0
        async for chunk in request.content.iter_chunked(CHUNK):
            size += len(chunk)
            if size > self.limit:
                raise _TooLarge()
            parts.append(chunk)
        return b"".join(parts)

    def _export(self, request: web.BaseRequest, body: bytes, content_type: str, reply_type: str) -> web.Response:
        """Decode and queue a request (on a worker thread)."""
        try:
            if content_type == PROTOBUF and refused_undecoded(body, self.sink, self.counters, "http"):
                return self._backpressure(reply_type)
            decoded = records(parse_request(body)) if content_type == JSON else decode(body)
        except ValueError as e:
            return self._refuse(request, "malformed", 400, GRPC_INVALID_ARGUMENT,
                                f"malformed ExportTraceServiceRequest: {e}", reply_type)
        outcome = accept(decoded, body, self.sink, self.counters, "http", 1 if content_type == JSON else 0)
        if outcome.response is None:
            return self._backpressure(reply_type)
        payload = to_json(outcome.response).encode() if reply_type == JSON else outcome.response.SerializeToString()
        return web.Response(status=200, body=payload, content_type=reply_type)

    def _backpressure(self, reply_type: str) -> web.Response:
        """A full queue: 429 with Retry-After (counted as rejected spans, not logged per request)."""
        return self._error(429, GRPC_RESOURCE_EXHAUSTED, "mastwatch queue is full, retry later", reply_type,
                           {"Retry-After": str(max(round(self.retry_after), 1))})


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    if encoding in ("", "identity"):
        return body
    d = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise ValueError(f"bad {encoding} body: {e}") from e
    if len(out) > limit:
        raise _TooLarge()
    return out
