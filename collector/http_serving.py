"""An HTTP server on its own thread and event loop (aiohttp), as the OTLP/HTTP receiver and /metrics use it.

Many clients cannot wear it out: one event loop serves every connection; a connection idle for `idle_timeout`, or
one that has not sent its headers by then, is closed; beyond `max_connections` open connections (at most half the
process's open-file limit, which the other servers and the store need too) the oldest idle connection is closed
for each new one; connections are accepted in small batches, so the cap acts between them. What aiohttp's strict
parser refuses (conflicting Content-Lengths, a malformed Transfer-Encoding), and running out of file descriptors,
are reported to `refuse` (counted and logged once per interval), not printed as tracebacks. With `tls`, it serves
HTTPS (client certificates required when `tls.client_ca_file` is set).
"""

from __future__ import annotations

import asyncio
import resource
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web, web_protocol, web_server

from mastwatch.collector.security import TLSConfig
from mastwatch.collector.threads import name_os_thread

LISTEN_BACKLOG = 1024
ACCEPT_BATCH = 32

Refuse = Callable[[str, str, "str | None"], None]  # (reason, detail, peer)
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


class _ConnectionHandler(web_protocol.RequestHandler):
    refuse: Refuse

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        reason = "bad_http" if status < 500 else "server_error"
        self.refuse(reason, f"{status}: {message or exc!r}", request.remote)
        response = web.Response(status=status, text=f"{status}: {message or 'bad request'}\n")
        response.force_close()
        return response


class _Server(web_server.Server):
    """aiohttp's low-level server, with a cap on open connections: past it, the oldest connection that is not in
    the middle of a request is closed for each new one."""

    def __init__(self, handler: Handler, refuse: Refuse, max_connections: int, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.refuse, self.max_connections = refuse, max_connections

    def __call__(self) -> web_protocol.RequestHandler:
        handler = _ConnectionHandler(self, loop=self._loop, **self._kwargs)
        handler.refuse = self.refuse
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
                excess -= 1
        if excess > 0:
            self.refuse("too_many_connections", f"{len(self._connections)} connections open, all busy", None)


def connection_cap(configured: int) -> int:
    """The connections a server keeps open: as configured, at most half the open-file limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(1, min(configured, soft // 2)) if soft != resource.RLIM_INFINITY else configured


class LoopServer:
    def __init__(self, endpoint: str, what: str, handler: Handler, refuse: Refuse, idle_timeout: float,
                 max_connections: int, tls: TLSConfig | None = None, thread_name: str = "http") -> None:
        host, _, port = endpoint.rpartition(":")
        self.refuse, self.thread_name = refuse, thread_name
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._loop_error)
        self.server = _Server(handler, refuse, connection_cap(max_connections), loop=self._loop,
                              keepalive_timeout=idle_timeout, access_log=None, auto_decompress=False)
        try:
            sock = socket.create_server((host or "127.0.0.1", int(port)), backlog=LISTEN_BACKLOG)
        except OSError as e:
            self._loop.close()
            raise OSError(f"cannot listen for {what} on {endpoint}: {e.strerror}") from None
        ssl_context = tls.ssl_context() if tls is not None else None
        # asyncio accepts up to `backlog` connections before it hands any to the server (whose cap then closes the
        # oldest idle ones), and asks the kernel for a queue of that length: small batches, a long kernel queue
        self._listener = self._loop.run_until_complete(self._loop.create_server(
            self.server, sock=sock, backlog=ACCEPT_BATCH, ssl=ssl_context))
        sock.listen(LISTEN_BACKLOG)
        self.address: tuple[str, int] = sock.getsockname()[:2]
        self.port = self.address[1]
        self._thread: threading.Thread | None = None

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Out of file descriptors on accept (asyncio pauses accepting for a second), or a TLS handshake a client
        got wrong: counted and logged once per interval, not a traceback per connection; anything else as asyncio
        reports it."""
        exc = context.get("exception")
        message = context.get("message", "")
        if isinstance(exc, OSError) and message.startswith("socket.accept()"):
            self.refuse("accept_failed", f"cannot accept connections: {exc.strerror} (open-file limit "
                        f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]}); accepting again in 1 s", None)
        elif isinstance(exc, ssl.SSLError) or "SSL" in message:
            self.refuse("tls_failed", f"{message}: {exc}", None)
        else:
            loop.default_exception_handler(context)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name=self.thread_name, daemon=True)
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
