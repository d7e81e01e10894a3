"""A ClickHouse HTTP interface for tests, executing every request on chDB (the real engine).

No ClickHouse server can run here, so clickhouse-connect is tested against this: a small http.server that
takes requests the way ClickHouse's HTTP handler does (the query in the `query` parameter and/or the body,
INSERT data after `FORMAT <name>` in Native, RowBinary or any format chDB reads, settings and `param_*`
query parameters, `database`, `default_format`, user and password as headers, Basic auth or parameters,
bodies chunked and compressed with lz4, zstd, gzip or deflate, responses compressed on
`enable_http_compression=1`) and answers as ClickHouse does: X-ClickHouse-* headers with the summary,
exceptions as `Code: N. DB::Exception: ...` bodies with X-ClickHouse-Exception-Code and ClickHouse's HTTP
status for the code. `client_protocol_version` is not honoured (as behind a proxy that drops it), so
clickhouse-connect reads Native blocks without block info.

`stop()` takes the endpoint away (new connections are refused, open ones are cut) and `start()` brings it
back on the same port with the same data. `on_insert` runs after each insert is committed, before the
answer: return False to cut the connection instead, as a network failure after the commit would.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import re
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import lz4.frame
from backports import zstd
from chdb import session

VERSION = "26.9.2.1"
# Query-string parameters of the HTTP interface that are not settings.
HTTP_PARAMS = {"query", "database", "default_format", "query_id", "session_id", "session_timeout", "session_check",
               "compress", "decompress", "user", "password", "quota_key", "buffer_size", "wait_end_of_query",
               "client_protocol_version", "role"}
# ClickHouse's HTTP status for an exception code (HTTPHandler's exceptionCodeToHTTPStatus); the rest is 500.
STATUS = {194: 401, 192: 403, 193: 403, 516: 403, 497: 403,
          **dict.fromkeys((6, 25, 26, 27, 38, 41, 53, 62, 72, 117, 321), 400),
          **dict.fromkeys((46, 47, 50, 56, 60, 63, 73, 81, 115), 404),
          202: 413, 48: 501, 209: 503, 381: 411}
CONTENT_TYPES = {"TabSeparated": "text/tab-separated-values; charset=UTF-8", "JSON": "application/json; charset=UTF-8",
                 "JSONEachRow": "application/json; charset=UTF-8", "CSV": "text/csv; charset=UTF-8"}
_INSERT = re.compile(rb"\s*(INSERT\s+INTO\s.*?)\s+FORMAT\s+(\w+)[ \t]*\r?\n?", re.S | re.I)
_TRAILING_FORMAT = re.compile(r"\bFORMAT\s+(\w+)\s*;?\s*$", re.I)


class ClickHouseError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _decompress(data: bytes, encoding: str) -> bytes:
    if encoding == "lz4":  # one or more LZ4 frames
        out = []
        while data:
            decompressor = lz4.frame.LZ4FrameDecompressor()
            out.append(decompressor.decompress(data))
            data = decompressor.unused_data
        return b"".join(out)
    if encoding == "zstd":
        return zstd.decompress(data)
    if encoding == "gzip":
        return gzip.decompress(data)
    if encoding == "deflate":
        return zlib.decompress(data)
    raise ClickHouseError(48, f"Unknown HTTP compression method {encoding!r}")


def _compress(data: bytes, encoding: str) -> bytes:
    return {"lz4": lz4.frame.compress, "zstd": zstd.compress, "gzip": gzip.compress,
            "deflate": zlib.compress}[encoding](data)


class ClickHouseHTTP:
    def __init__(self, path: str, user: str = "default", password: str = "") -> None:
        self.session = session.Session(path)
        self.user, self.password = user, password
        self.lock = threading.Lock()  # one chDB session: requests run one at a time, as with a session
        self.port = 0
        self.on_insert: Callable[[str], bool] | None = None  # called with the insert's dedup token
        self.inserts: list[tuple[str, str, str]] = []  # (dedup token, format, content encoding) of each commit
        self.session.query("SET output_format_json_quote_64bit_integers = 0")
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()

    # --- lifecycle ---
    def start(self) -> int:
        endpoint = self

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a connection cut by stop() or on_insert

        class Handler(_Handler):
            server_ref = endpoint

        self._server = Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def up(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        """Refuse new connections and cut the open ones."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.stop()
        with self.lock:
            self.session.close()

    def query(self, sql: str, params: dict[str, object] | None = None) -> list[dict]:
        """Read what the endpoint holds, straight from chDB (test assertions)."""
        with self.lock:
            self._run("USE default")
            text = self._run(sql, "JSONEachRow", {k: str(v) for k, v in (params or {}).items()}).bytes()
        return [json.loads(line) for line in text.splitlines()]

    # --- one request, as ClickHouse's HTTP handler ---
    def execute(self, params: dict[str, str], body: bytes, encoding: str = "") -> tuple[bytes, str, dict[str, str]]:
        """Returns (result, format, summary); raises ClickHouseError."""
        text = params.get("query", "").encode()
        raw = text + b"\n" + body if text and body else text or body
        if not raw.strip():
            raise ClickHouseError(62, "Empty query")
        settings = {k: v for k, v in params.items() if k not in HTTP_PARAMS and not k.startswith("param_")}
        query_params = {k[len("param_"):]: v for k, v in params.items() if k.startswith("param_")}
        with self.lock:
            previous = self._apply(params.get("database", "default"), settings)
            try:
                insert = _INSERT.match(raw)
                if insert:
                    return self._insert(insert.group(1).decode(), insert.group(2).decode(), raw[insert.end():],
                                        settings.get("insert_deduplication_token", ""), encoding)
                sql = raw.decode()
                trailing = _TRAILING_FORMAT.search(sql)
                fmt = trailing.group(1) if trailing else params.get("default_format", "TabSeparated")
                result = self._run(sql, fmt, query_params)
                summary = {"read_rows": result.rows_read(), "read_bytes": result.bytes_read(), "written_rows": 0,
                           "written_bytes": 0, "elapsed_ns": int(result.elapsed() * 1e9)}
                return result.bytes(), fmt, summary
            finally:
                self._restore(previous)

    def _run(self, sql: str, fmt: str = "TabSeparated", params: dict[str, str] | None = None):
        try:
            return self.session.query(sql, fmt, params=params or {})
        except Exception as e:
            raise _error(e) from None

    def _apply(self, database: str, settings: dict[str, str]) -> dict[str, str]:
        """USE the request's database and SET its settings; returns the settings' values before."""
        self._run(f"USE `{database}`")
        if not settings:
            return {}
        names = ", ".join("'" + n.replace("'", "\\'") + "'" for n in settings)
        rows = self._run(f"SELECT name, value FROM system.settings WHERE name IN ({names})", "JSONEachRow")
        previous = {r["name"]: r["value"] for r in map(json.loads, rows.bytes().splitlines())}
        for name, value in settings.items():
            if name not in previous:
                raise ClickHouseError(115, f"Unknown setting '{name}'")
            self._run(f"SET {name} = '" + value.replace("\\", "\\\\").replace("'", "\\'") + "'")
        return previous

    def _restore(self, previous: dict[str, str]) -> None:
        for name, value in previous.items():
            self._run(f"SET {name} = '" + value.replace("\\", "\\\\").replace("'", "\\'") + "'")

    def _insert(self, statement: str, fmt: str, data: bytes, token: str, encoding: str) -> tuple[bytes, str, dict]:
        try:
            inserter = self.session.send_insert(statement, fmt)
            inserter.append(data)
            result = inserter.finish()
        except Exception as e:
            raise _error(e) from None
        self.inserts.append((token, fmt, encoding))
        return b"", fmt, {"read_rows": 0, "read_bytes": 0, "written_rows": result.rows_written,
                          "written_bytes": result.bytes_written, "elapsed_ns": int(result.elapsed * 1e9)}


def _error(e: Exception) -> ClickHouseError:
    message = str(e)
    start = message.find("Code: ")
    match = re.match(r"Code: (\d+)\. ", message[start:]) if start >= 0 else None
    return ClickHouseError(int(match.group(1)), message[start:]) if match else ClickHouseError(1001, message)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_ref: ClickHouseHTTP

    def setup(self) -> None:
        super().setup()
        self.server_ref._connections.add(self.connection)

    def finish(self) -> None:
        self.server_ref._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                chunk = self.rfile.read(size)
                self.rfile.readline()
                if not size:
                    break
                chunks.append(chunk)
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _credentials(self, params: dict[str, str]) -> tuple[str, str]:
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            return user, password
        return (self.headers.get("X-ClickHouse-User") or params.get("user", "default"),
                self.headers.get("X-ClickHouse-Key") or params.get("password", ""))

    def _handle(self) -> None:
        endpoint = self.server_ref
        url = urlsplit(self.path)
        body = self._body()
        if url.path in ("/ping", "/") and self.command == "GET" and not url.query:
            return self._send(200, b"Ok.\n", {"Content-Type": "text/html; charset=UTF-8"})
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        query_id = params.get("query_id") or str(uuid.uuid4())
        headers = {"X-ClickHouse-Query-Id": query_id, "X-ClickHouse-Timezone": "UTC",
                   "X-ClickHouse-Server-Display-Name": "chdb-http"}
        try:
            user, password = self._credentials(params)
            if (user, password) != (endpoint.user, endpoint.password):
                raise ClickHouseError(516, f"{user}: Authentication failed: password is incorrect, or there is no "
                                           "user with such name. (AUTHENTICATION_FAILED)")
            encoding = self.headers.get("Content-Encoding", "")
            if encoding and body:
                body = _decompress(body, encoding)
            started = time.perf_counter()
            result, fmt, summary = endpoint.execute(params, body, encoding)
        except ClickHouseError as e:
            headers.update({"X-ClickHouse-Exception-Code": str(e.code), "Content-Type": "text/plain; charset=UTF-8"})
            return self._send(STATUS.get(e.code, 500), f"{e} (version {VERSION})\n".encode(), headers)
        if summary["written_rows"] and endpoint.on_insert is not None \
                and not endpoint.on_insert(params.get("insert_deduplication_token", "")):
            self.close_connection = True  # committed, but the client never hears of it
            self.connection.shutdown(socket.SHUT_RDWR)
            return None
        summary.update(result_rows=0, result_bytes=len(result), total_rows_to_read=summary["read_rows"])
        summary["elapsed_ns"] = summary["elapsed_ns"] or int((time.perf_counter() - started) * 1e9)
        headers.update({"X-ClickHouse-Format": fmt, "X-ClickHouse-Summary": json.dumps(
            {k: str(v) for k, v in summary.items()}, separators=(",", ":")),
            "Content-Type": CONTENT_TYPES.get(fmt, "application/octet-stream")})
        accepted = [e.strip() for e in self.headers.get("Accept-Encoding", "").split(",")]
        if params.get("enable_http_compression") == "1" and result:
            encoding = next((e for e in accepted if e in ("lz4", "zstd", "gzip", "deflate")), None)
            if encoding:
                result = _compress(result, encoding)
                headers["Content-Encoding"] = encoding
        return self._send(200, result, headers)

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Keep-Alive", "timeout=10")
        self.end_headers()
        self.wfile.write(body)
