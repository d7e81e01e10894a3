"""The embedded ClickHouse engine (chDB): a directory, no server. One per process (a chDB limit)."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from chdb import session

from .schema import Column

INSERT_SETTINGS = "input_format_parallel_parsing = 0, max_partitions_per_insert_block = 0"


class StoreInUse(OSError):
    """The directory is held by another process's chDB (a running `mastwatch serve` or `demo`)."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class ChdbEngine:
    def __init__(self, path: str, create: bool = True) -> None:
        """`create`: make the directory when missing (a writer); a reader is told there is no store instead."""
        self.path = os.path.abspath(path)
        if create:
            os.makedirs(self.path, exist_ok=True)
        elif not os.path.isdir(self.path):
            raise FileNotFoundError(f"no store at {self.path}: start `mastwatch serve` (or `demo`) with it, or pass "
                                    "--store-path")
        if _held(os.path.join(self.path, "status")):  # asked first: chDB would print its own error too
            raise StoreInUse(f"the store in {self.path} is in use by another process (a running mastwatch "
                             "serve or demo): stop it, or use another --store-path", self.path)
        try:
            self._session = session.Session(self.path)
        except RuntimeError as e:
            if os.path.exists(os.path.join(self.path, "status")):  # chDB's lock file, held by its server
                raise StoreInUse(f"the store in {self.path} is in use by another process (a running mastwatch "
                                 "serve or demo): stop it, or use another --store-path", self.path) from None
            raise OSError(f"cannot open the store in {self.path}: {e}") from None
        self._lock = threading.Lock()
        self.command("SET output_format_json_quote_64bit_integers = 0")  # numbers read back as numbers

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        """`params` fill {name:Type} placeholders."""
        with self._lock:
            self._session.query(sql, params={k: _escaped(v) for k, v in (params or {}).items()})

    def insert(self, table: str, columns: Sequence[Column], body: bytes, token: str) -> None:
        """`body`: a Native block of `columns` (records.py), streamed (no SQL parsing of the data), parsed by one
        thread (parallel parsing only adds threads to wake on a batch this size). A batch may span any
        number of days (partitions): chDB's streamed insert drops a block over the partition limit silently."""
        names = ", ".join(c.name for c in columns)
        with self._lock:
            inserter = self._session.send_insert(
                f"INSERT INTO {table} ({names}) SETTINGS insert_deduplication_token = {_literal(token)}, "
                f"{INSERT_SETTINGS}", "Native")
            try:
                inserter.append(body)
                inserter.finish()
            except BaseException:
                inserter.cancel()
                raise

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows as dicts; `params` fill {name:Type} placeholders."""
        with self._lock:
            result = self._session.query(sql, "JSONEachRow", params={k: _escaped(v) for k, v in (params or {}).items()})
        return [json.loads(line) for line in result.bytes().splitlines() if line.strip()]

    def close(self) -> None:
        with self._lock:
            self._session.close()


def _held(status: str) -> bool:
    """Whether another chDB holds the directory whose lock file is `status` (it keeps an exclusive flock on it)."""
    try:
        fd = os.open(status, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (releases the lock taken)
    return False


def _escaped(value: Any) -> str:
    """A query parameter's value as ClickHouse reads it (escaped text, as in TabSeparated)."""
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
