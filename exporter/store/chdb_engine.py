"""The embedded ClickHouse engine (chDB): a directory, no server. One per process (a chDB limit)."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from chdb import session

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class ChdbEngine:
    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        os.makedirs(self.path, exist_ok=True)
        self._session = session.Session(self.path)
        self._lock = threading.Lock()

    def command(self, sql: str) -> None:
        with self._lock:
            self._session.query(sql)

    def insert(self, table: str, columns: tuple[str, ...], rows: list[list[Any]]) -> None:
        """Rows as lists in `columns` order (JSONCompactEachRow: about half the parse cost of JSONEachRow)."""
        if not rows:
            return
        body = "\n".join(map(_dumps, rows))
        with self._lock:
            self._session.query(f"INSERT INTO {table} ({', '.join(columns)}) FORMAT JSONCompactEachRow\n{body}")

    def query(self, sql: str) -> list[dict[str, Any]]:
        with self._lock:
            result = self._session.query(sql, "JSONEachRow")
        text = result.bytes().decode() if hasattr(result, "bytes") else str(result)
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def close(self) -> None:
        with self._lock:
            self._session.close()
