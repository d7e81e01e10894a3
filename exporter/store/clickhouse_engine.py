"""A ClickHouse server or cluster, over HTTP(S) with clickhouse-connect.

Inserts send the queued Native blocks as they are (records.py), compressed with lz4 as clickhouse-connect compresses
its own, so the server reads them without a DESCRIBE first and the client does no work per row. The client is
created on first use, so mastwatch starts, and queues, while the server is down.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import clickhouse_connect
import lz4.frame
from clickhouse_connect.driver.client import Client

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

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self.client.command(sql, parameters=dict(params) if params else None)

    def insert(self, table: str, columns: Sequence[Column], body: bytes, token: str) -> None:
        """`body`: a Native block of `columns` (as queued)."""
        # max_partitions_per_insert_block 0: else a batch over 100 days fails forever
        self.client.raw_insert(table, [c.name for c in columns], lz4.frame.compress(body), fmt="Native",
                               compression="lz4", settings={"insert_deduplication_token": token,
                                                            "max_partitions_per_insert_block": 0})

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return list(self.client.query(sql, parameters=dict(params or {})).named_results())

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
