"""A ClickHouse server or cluster, over HTTP(S) with clickhouse-connect.

Inserts are sent in ClickHouse's Native format with the column types of the schema (no DESCRIBE first), and
compressed with lz4 (clickhouse-connect's default). The client is created on first use, so mastwatch starts,
and queues, while the server is down.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import clickhouse_connect
from clickhouse_connect.driver.client import Client

from .records import nanoseconds
from .schema import Column


class ClickhouseEngine:
    def __init__(self, host: str, port: int, secure: bool, user: str, password: str, url: str | None = None) -> None:
        if url:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{url!r} is not an http(s)://host[:port] URL")
            host, secure, port = parts.hostname, parts.scheme == "https", parts.port or 0
        self.host, self.secure = host, secure
        self.port = port or (8443 if secure else 8123)
        self._user, self._password = user, password
        self._client: Client | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> Client:
        with self._lock:
            if self._client is None:
                self._client = clickhouse_connect.get_client(
                    host=self.host, port=self.port, secure=self.secure, username=self._user,
                    password=self._password, connect_timeout=10, send_receive_timeout=60,
                    autogenerate_session_id=False)  # no session: the writer and readers query at once
            return self._client

    def command(self, sql: str) -> None:
        self.client.command(sql)

    def insert(self, table: str, columns: Sequence[Column], body: bytes, token: str) -> None:
        """`body`: JSONCompactEachRow lines in `columns` order (as queued); times become DateTime64(9) ticks."""
        data = json.loads(b"[" + body.rstrip(b"\n").replace(b"\n", b",") + b"]", parse_float=str)
        convert: Callable[[str], Any]
        for i, column in enumerate(columns):  # numbers with a fraction were left as text: times exact
            if column.type_name.startswith("DateTime64(9"):
                convert = nanoseconds
            elif "Float" in column.type_name:
                convert = float
            else:
                continue
            for row in data:
                if isinstance(row[i], str):
                    row[i] = convert(row[i])
        self.client.insert(table, data, column_names=[c.name for c in columns],
                           column_type_names=[c.type_name for c in columns],
                           settings={"insert_deduplication_token": token,
                                     "max_partitions_per_insert_block": 0})  # else a batch over 100 days fails forever

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return list(self.client.query(sql, parameters=dict(params or {})).named_results())

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
