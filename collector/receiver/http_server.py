"""OTLP/HTTP: POST /v1/traces with application/x-protobuf or application/json bodies, served by aiohttp.

Bodies may come with a Content-Length or chunked (as the JavaScript SDK streams them), gzip or deflate or neither;
the size limit counts the body as decompressed, whichever way it came. Connections are kept alive between requests.
aiohttp's parser is strict (one Content-Length of digits only, `Transfer-Encoding` exactly named), and what it
refuses is counted and logged like every other refusal (`refusals`).

Many clients cannot wear the server out: one event loop serves every connection; a connection idle for
`idle_timeout`, or one that has not sent its headers by then, is closed, as is a request whose body has not
arrived within `read_timeout`; beyond `max_connections` open connections (at most half the process's open-file
limit, which the gRPC receiver and the store need too) the oldest idle connection is closed for each new one.
Decoding runs on a pool of `workers` threads, so the loop only moves bytes.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web, web_protocol, web_server
from google.rpc.status_pb2 import Status

from mastwatch.threads import name_os_thread

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
ENCODINGS = frozenset({"", "identity", "gzip", "deflate"})
CHUNK = 1 << 16
LISTEN_BACKLOG = 1024
ACCEPT_BATCH = 32


class _TooLarge(Exception):
    pass


class _Handler(web_protocol.RequestHandler):
    """aiohttp's connection handler, counting and logging what its parser refuses (a bad request line or header:
    conflicting Content-Lengths, a malformed Transfer-Encoding) instead of printing a traceback per request."""

    refusals: Refusals

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        reason = "bad_http" if status < 500 else "server_error"
        self.refusals.refuse(reason, f"{status}: {message or exc!r}", request.remote)
        response = web.Response(status=status, text=f"{status}: {message or 'bad request'}\n")
        response.force_close()
        return response


class _Server(web_server.Server):
    """aiohttp's low-level server, with a cap on open connections: past it, the oldest connection that is not in
    the middle of a request is closed for each new one."""

    def __init__(self, handler: Any, refusals: Refusals, max_connections: int, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.refusals, self.max_connections = refusals, max_connections
        self.evicted = 0

    def __call__(self) -> web_protocol.RequestHandler:
        handler = _Handler(self, loop=self._loop, **self._kwargs)
        handler.refusals = self.refusals
        return handler

    def connection_made(self, handler: web_protocol.RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        excess = len(self._connections) - self.max_connections
        if excess <= 0:
            return
        for old in list(self._connections):  # oldest first
            if excess <= 0 or old is handler:
                break
            if not old._request_in_progress:  # idle, or still sending its headers
                old.force_close()
                self.evicted += 1
                excess -= 1
        if excess > 0:
            self.refusals.refuse("too_many_connections", f"{len(self._connections)} connections open, all busy")


def connection_cap(configured: int) -> int:
    """The connections the HTTP receiver keeps open: as configured, at most half the open-file limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(1, min(configured, soft // 2)) if soft != resource.RLIM_INFINITY else configured


class OtlpHttpServer:
    def __init__(self, config: HttpConfig, sink: Sink, counters: Counters, retry_after: float = 1.0) -> None:
        host, _, port = config.endpoint.rpartition(":")
        self.config, self.sink, self.counters = config, sink, counters
        self.limit = config.max_request_body_mib * 1024 * 1024
        self.retry_after = retry_after
        self.refusals = Refusals(counters, log, "HTTP")
        self._pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="otlp-http",
                                        initializer=name_os_thread)
        self._loop = asyncio.new_event_loop()
        self.server = _Server(self._handle, self.refusals, connection_cap(config.max_connections), loop=self._loop,
                              keepalive_timeout=config.idle_timeout, access_log=None, auto_decompress=False)
        self._loop.set_exception_handler(self._loop_error)
        try:
            sock = socket.create_server((host or "127.0.0.1", int(port)), backlog=LISTEN_BACKLOG)
        except OSError as e:
            self._loop.close()
            raise OSError(f"cannot listen for OTLP/HTTP on {config.endpoint}: {e.strerror}") from None
        # asyncio accepts up to `backlog` connections before it hands any to the server (whose cap then closes the
        # oldest idle ones), and asks the kernel for a queue of that length: small batches, a long kernel queue
        self._listener = self._loop.run_until_complete(self._loop.create_server(self.server, sock=sock,
                                                                                backlog=ACCEPT_BATCH))
        sock.listen(LISTEN_BACKLOG)
        self.port = sock.getsockname()[1]
        self._thread: threading.Thread | None = None

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Out of file descriptors on accept (asyncio pauses accepting for a second): counted and logged once per
        interval, not a traceback per connection; anything else as asyncio reports it."""
        exc = context.get("exception")
        if isinstance(exc, OSError) and context.get("message", "").startswith("socket.accept()"):
            self.refusals.refuse("accept_failed", f"cannot accept connections: {exc.strerror} (open-file limit "
                                 f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]}); accepting again in 1 s")
        else:
            loop.default_exception_handler(context)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="otlp-http", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        name_os_thread()
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def stop(self, grace: float = 5.0) -> None:
        async def close() -> None:
            self._listener.close()
            await self._listener.wait_closed()
            await self.server.shutdown(grace)

        if self._thread is not None:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(grace + 5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        else:
            self._loop.run_until_complete(close())
        self._loop.close()
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
        if encoding not in ENCODINGS:
            return self._refuse(request, "malformed", 400, GRPC_INVALID_ARGUMENT,
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
        outcome = accept(decoded, len(body), self.sink, self.counters, "http")
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
