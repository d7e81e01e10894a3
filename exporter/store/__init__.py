"""The store exporter: verdicts, findings, repeated steps and the steps of runs as ClickHouse rows.

Verdicts' rows are appended to a durable on-disk queue before `export_verdicts` returns; a writer thread
inserts them in batches (by size, or every flush interval) with deduplication tokens, retries with backoff
while the store fails, and acknowledges a batch only once every table has it. The store is embedded chDB
(a directory) by default, or a ClickHouse server or cluster over HTTP(S).
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, Literal, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from mastwatch.collector.durations import Duration
from mastwatch.collector.model.judgement import Judgement
from mastwatch.collector.model.published import Increment
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.telemetry import NullTelemetry
from mastwatch.collector.threads import name_os_thread

from .engine import Engine
from .queue import Batch, DurableQueue
from .records import block_rows, decode, encode, encode_judgement
from .schema import TABLES, Layout, migrate

log = logging.getLogger(__name__)
_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"


class StoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    engine: Literal["chdb", "clickhouse"] = Field(
        "chdb", description="chdb: embedded ClickHouse in `path`; clickhouse: a server over HTTP(S)")
    path: str = Field("./mastwatch-data", description="local data: the chDB store, and the queue by default")
    database: str = Field("mastwatch", pattern=_IDENTIFIER)
    url: str | None = Field(None, description="http(s)://host:port of the server; overrides host, port, secure")
    host: str = "localhost"
    port: int = Field(0, ge=0, le=65535, description="0: 8123, or 8443 when secure")
    secure: bool = False
    user: str = "default"
    password: SecretStr = SecretStr("")
    cluster: str | None = Field(None, pattern=_IDENTIFIER, description="replicated and distributed tables")
    ttl_days: int = Field(0, ge=0, description="rows are deleted this many days after started_at (0: kept)")
    table_ttl_days: dict[str, int] = Field(default_factory=dict, description="a table's own ttl_days, over "
                                           "ttl_days (0: kept): {mast_steps: 7, mast_model_spend: 400}")
    batch_rows: int = Field(50_000, ge=1, description="rows per batch, all tables together (an insert per table)")
    flush_interval: Duration = Field(1.0, gt=0, description="longest a row waits before it is written")
    queue_path: str | None = Field(None, description="durable queue directory (default: `path`/queue)")
    max_queued_rows: int = Field(1_000_000, ge=1, description="rows held while the store fails")
    max_queued_mib: int = Field(1024, ge=1, description="queue size on disk held while the store fails")
    store_content: bool = Field(False, description="store the captured content that shows a finding (a phrase, a "
                                "record id) with its reason, and the judge's reasons; off: reasons name tools and "
                                "counts only")
    redact: str | None = Field(None, description="with store_content: `module:function` taking the content and "
                               "returning what to store (mask names, numbers)")
    steps: Literal["findings", "all", "off"] = Field(
        "findings", description="whose steps get mast_steps rows (what `mastwatch show` and the trace page list): "
        "runs with a finding, all runs, or none")

    @field_validator("host", "user", "password", "url", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:  # YAML reads a numeric password as a number
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    @field_validator("steps", mode="before")
    @classmethod
    def _steps_off(cls, value: Any) -> Any:  # YAML reads a bare `off` as false
        return "off" if value is False else value

    @field_validator("table_ttl_days")
    @classmethod
    def _table_ttl_days(cls, value: dict[str, int]) -> dict[str, int]:
        for table, days in value.items():
            if table not in TABLES:
                raise ValueError(f"{table!r} is not one of the tables with rows that expire: {', '.join(TABLES)}")
            if days < 0:
                raise ValueError(f"{table}: {days} days; 0 keeps its rows, more deletes them that many days on")
        return value

    @property
    def layout(self) -> Layout:
        return Layout(self.database, self.cluster or "", self.ttl_days, tuple(sorted(self.table_ttl_days.items())))

    @field_validator("redact")
    @classmethod
    def _redact(cls, value: str | None) -> str | None:
        if value is not None:
            redactor(value)  # fails now, with what is wrong, rather than at the first finding
        return value

    def quotes(self) -> Callable[[str], str] | None:
        """What a finding's quote is stored as: None (not stored) unless store_content."""
        if not self.store_content:
            return None
        return redactor(self.redact) if self.redact else _as_is


def _as_is(text: str) -> str:
    return text


def redactor(path: str) -> Callable[[str], str]:
    """The function `module:function` names (ValueError saying what is wrong)."""
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"redact {path!r}: expected module:function")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"redact {path!r}: {e}") from None
    if not callable(function):
        raise ValueError(f"redact {path!r} is not a function")
    return function


class KnownSignature(NamedTuple):
    """A failure signature as the store holds it: its runs so far, on every replica, and whose it is."""

    signature: str
    runs: int
    service: str
    agent: str
    failure_mode: str


class StoreTelemetry(Protocol):
    """Self-metrics of the store (see exporter.prometheus.SelfMetrics)."""

    def store_written(self, table: str, rows: int) -> None: ...
    def store_insert_seconds(self, seconds: float) -> None: ...
    def store_failed(self) -> None: ...
    def store_retried(self) -> None: ...
    def store_dropped_rows(self, rows: int) -> None: ...
    def store_queue(self, depth: Callable[[], tuple[int, int]]) -> None: ...


def open_engine(config: StoreConfig, create: bool = True) -> Engine:
    """The configured engine; `create`: make a missing chDB directory (a writer), else say there is no store."""
    if config.engine == "clickhouse":
        from .clickhouse_engine import ClickhouseEngine

        return ClickhouseEngine(config.host, config.port, config.secure, config.user,
                                config.password.get_secret_value(), config.url)
    from .chdb_engine import ChdbEngine

    return ChdbEngine(config.path, create)


class StoreExporter:
    """Implements the processor's Exporter protocol."""

    def __init__(self, config: StoreConfig, telemetry: StoreTelemetry | None = None) -> None:
        self.config = config
        self.telemetry: StoreTelemetry = telemetry or NullTelemetry()  # type: ignore[assignment]
        self.layout = config.layout
        self._quotes = config.quotes()
        self.engine = open_engine(config)
        self.queue = DurableQueue(config.queue_path or os.path.join(config.path, "queue"), config.max_queued_rows,
                                  config.max_queued_mib << 20, batch_rows=config.batch_rows, on_batch=self._batch_full)
        self._migrated = False
        try:
            self._migrate()
        except Exception:
            if config.engine == "chdb":  # a local directory: nothing to wait for
                self.queue.close()
                self.engine.close()
                raise
            log.warning("store not reachable at start; rows are queued and the schema is applied when it is",
                        exc_info=True)
        self._cond = threading.Condition()
        self._stop = False
        self._flushing = 0
        self._last_drop_log = 0.0
        self.telemetry.store_queue(self.queue.depth)  # read when scraped: nothing to update per verdict
        self._thread = threading.Thread(target=self._run, name="mastwatch-store", daemon=True)
        self._thread.start()

    def table(self, name: str) -> str:
        return f"{self.config.database}.{name}"

    def _migrate(self) -> None:
        if not self._migrated:
            applied = migrate(self.engine, self.layout)
            if applied:
                log.info("store schema migrated to version %d", applied[-1])
            self._migrated = True

    def export_increments(self, increments: list[Increment]) -> None:
        pass  # rows are written per verdict (live findings are counters only)

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        dropped = self.queue.append(*encode(verdicts, self._quotes, self.config.steps))  # one record for the batch
        if dropped:
            self._dropped(dropped)

    def export_judgement(self, judgement: Judgement) -> None:
        """The judge's positive answers as mast_findings rows with basis judge; every answer in mast_judgements."""
        dropped = self.queue.append(*encode_judgement(judgement, time.time(), self._quotes))
        if dropped:
            self._dropped(dropped)

    def _dropped(self, rows: int) -> None:
        self.telemetry.store_dropped_rows(rows)
        now = time.monotonic()
        if now - self._last_drop_log > 10:
            self._last_drop_log = now
            log.warning("store queue full: oldest rows dropped (%d now)", rows)

    def _batch_full(self) -> None:
        """The queue holds a batch's rows now: the writer need not wait for the flush interval."""
        with self._cond:
            self._cond.notify()

    def _write(self, batch: Batch) -> dict[str, int]:
        """Insert a batch into every table (a table that has it already drops it by its token); returns the
        rows per table."""
        if batch.attempts:
            self.telemetry.store_retried()
        batch.attempts += 1
        written: dict[str, int] = {}
        for name, body in decode(batch).items():
            if body:
                table, _, width = name.partition("@")  # mast_findings@11: a queued record's fewer columns
                columns = TABLES[table].columns[:int(width)] if width else TABLES[table].columns
                started = time.perf_counter()
                self.engine.insert(f"{self.config.database}.{table}", columns, body, batch.token(name))
                self.telemetry.store_insert_seconds(time.perf_counter() - started)
                written[table] = written.get(table, 0) + block_rows(body)
        return written

    def _run(self) -> None:
        name_os_thread()
        backoff = 0.0
        while True:
            with self._cond:
                queued = self.queue.depth()[0]
                if not self._stop:
                    if backoff:
                        self._cond.wait(backoff)
                    elif queued < self.config.batch_rows and not (self._flushing and queued):
                        self._cond.wait(self.config.flush_interval)
                stopping = self._stop
            written: dict[str, int] = {}
            try:
                self.queue.sync()  # inside: a failure (no file descriptor left) is retried, not the thread's end
                self._migrate()
                batch = self.queue.seal(self.config.batch_rows)
                if batch is not None:
                    written = self._write(batch)
                    self.queue.ack(batch)  # saves the queue's state: a file opened, which may fail as the sync may
            except Exception:
                log.exception("store write failed; retrying")
                self.telemetry.store_failed()
                backoff = min(max(backoff * 2, 0.5), 30.0)
                if stopping:
                    return
                continue
            backoff = 0.0
            if batch is not None:
                for name, n in written.items():
                    self.telemetry.store_written(name, n)
            with self._cond:
                self._cond.notify_all()
            if batch is None and stopping:
                return

    def flush(self, timeout: float = 30.0) -> bool:
        """Write everything queued now; True when all of it was written."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            try:
                while self.queue.depth()[0] and self._thread.is_alive() and time.monotonic() < deadline:
                    self._cond.notify_all()
                    self._cond.wait(0.05)
            finally:
                self._flushing -= 1
            return not self.queue.depth()[0]

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self.engine.query(sql, params)

    def known_signatures(self, limit: int = 100_000, seen_within: float | None = None) -> list[KnownSignature]:
        """The failure signatures the store holds, with their runs across every replica writing to it, the most
        recently seen last ([] when the store cannot answer); with `seen_within`, only those whose latest run
        started within that many seconds (those whose runs can have changed since a read that long ago)."""
        recent = f" HAVING max(last_seen) >= now64(9) - toIntervalMillisecond({int(seen_within * 1000)})" \
            if seen_within is not None else ""
        try:
            rows = self.engine.query(f"SELECT signature, toUInt64(uniqMerge(runs)) AS runs, any(service) AS service, "
                                     f"any(agent) AS agent, any(failure_mode) AS failure_mode FROM "
                                     f"{self.table('mast_signatures')} GROUP BY signature{recent} "
                                     f"ORDER BY max(last_seen) DESC LIMIT {int(limit)}")
        except Exception as e:
            log.warning("store: cannot read the known failure signatures (%s)", e)
            return []
        return [KnownSignature(row["signature"], int(row["runs"]), row["service"], row["agent"], row["failure_mode"])
                for row in reversed(rows)]

    def holding(self, trace_ids: Collection[bytes], timeout: float = 10.0) -> set[bytes] | None:
        """Which of these traces have rows, once the rows queued now (those a stopped process left among them) are
        written; None when the store cannot tell (not reachable)."""
        if not self.flush(timeout):
            return None
        ids = sorted(t.hex() for t in trace_ids)  # hex digits only: safe to write into the query
        found: set[bytes] = set()
        try:
            for start in range(0, len(ids), 10_000):
                listed = ", ".join(f"'{i}'" for i in ids[start:start + 10_000])
                rows = self.engine.query(f"SELECT DISTINCT trace_id FROM {self.table('mast_traces')} "
                                         f"WHERE trace_id IN ({listed})")
                found.update(bytes.fromhex(row["trace_id"]) for row in rows)
        except Exception as e:
            log.warning("store: cannot look up traces (%s)", e)
            return None
        return found

    def shutdown(self) -> None:
        """Write what is queued; what the store does not take now stays queued on disk for the next start."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(60)
        if self._thread.is_alive():
            log.error("store writer did not stop; %d rows stay queued", self.queue.depth()[0])
            return
        queued = self.queue.depth()[0]
        if queued:
            log.warning("store not writable at shutdown: %d rows stay queued in %s for the next start", queued,
                        self.queue.path)
        self.queue.close()
        self.engine.close()
