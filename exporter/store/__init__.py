"""The store exporter: verdicts, findings and repeated steps as ClickHouse rows.

Each verdict's rows are appended to a durable on-disk queue before `export_verdict` returns; a writer thread
inserts them in batches (by size, or every flush interval) with deduplication tokens, retries with backoff
while the store fails, and acknowledges a batch only once every table has it. The store is embedded chDB
(a directory) by default, or a ClickHouse server or cluster over HTTP(S).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from mastwatch.collector.classify.modes import MODES
from mastwatch.collector.judge.stage import Judgement
from mastwatch.collector.processor import Increment, NullTelemetry
from mastwatch.collector.verdict import Verdict, rfc3339
from mastwatch.durations import Duration

from .queue import Batch, DurableQueue
from .schema import FINDINGS, JUDGEMENTS, REPEATED_STEPS, TABLES, TRACES, Layout, migrate

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
    batch_rows: int = Field(5000, ge=1, description="rows per insert")
    flush_interval: Duration = Field(1.0, gt=0, description="longest a row waits before it is written")
    queue_path: str | None = Field(None, description="durable queue directory (default: `path`/queue)")
    max_queued_rows: int = Field(1_000_000, ge=1, description="rows held while the store fails")
    max_queued_mib: int = Field(1024, ge=1, description="queue size on disk held while the store fails")

    @field_validator("host", "user", "password", "url", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:  # YAML reads a numeric password as a number
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    @property
    def layout(self) -> Layout:
        return Layout(self.database, self.cluster or "", self.ttl_days)


class Engine(Protocol):
    """What the exporter, the migrations and the query layer need of a ClickHouse."""

    def command(self, sql: str) -> None: ...
    def insert(self, table: str, columns: Any, rows: list[bytes], token: str) -> None: ...
    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...
    def close(self) -> None: ...


class StoreTelemetry(Protocol):
    """Self-metrics of the store (see exporter.prometheus.SelfMetrics)."""

    def store_written(self, table: str, rows: int) -> None: ...
    def store_insert_seconds(self, seconds: float) -> None: ...
    def store_failed(self) -> None: ...
    def store_retried(self) -> None: ...
    def store_dropped_rows(self, rows: int) -> None: ...
    def store_queue(self, rows: int, size: int) -> None: ...


def open_engine(config: StoreConfig) -> Engine:
    if config.engine == "clickhouse":
        from .clickhouse_engine import ClickhouseEngine

        return ClickhouseEngine(config.host, config.port, config.secure, config.user,
                                config.password.get_secret_value(), config.url)
    from .chdb_engine import ChdbEngine

    return ChdbEngine(config.path)


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def trace_row(v: Verdict, started: str | None = None) -> list[Any]:
    """A mast_traces row, in column order (`started`: rfc3339 of the start, when already formatted)."""
    waste = v.waste
    wasted = dict.fromkeys(("input", "output", "cache_read", "cache_write"), 0)
    for (_, kind), n in waste.tokens.items():
        wasted[kind] += n
    return [v.trace_id, v.service, v.agent, v.models, started or rfc3339(v.started_at_ns), rfc3339(v.ended_at_ns),
            v.completion, v.steps, v.llm_calls, v.tool_calls, v.input_tokens, v.output_tokens, v.cost_usd,
            sorted(v.findings), waste.repeated_steps, wasted["input"] + wasted["cache_read"] + wasted["cache_write"],
            wasted["output"], v.wasted_cost_usd]


def finding_rows(v: Verdict | Judgement, started: str | None = None) -> list[list[Any]]:
    """mast_findings rows, in column order."""
    started = started or rfc3339(v.started_at_ns)
    return [[v.trace_id, v.service, v.agent, started, code, MODES[code].category, MODES[code].name, f.confidence,
             f.basis, [e.hex() for e in f.evidence], f.reason] for code, f in sorted(v.findings.items())]


def repeated_step_rows(v: Verdict) -> list[list[Any]]:
    """mast_repeated_steps rows, in column order."""
    return [[v.trace_id, r.step.span_hex, v.service, v.agent, r.code, r.tool, r.step.args_fingerprint or 0,
             r.model or "", *(n for _, n in r.tokens), r.cost_usd, rfc3339(r.step.start_ns)] for r in v.waste.steps]


def judgement_rows(j: Judgement, judged_at: float) -> list[list[Any]]:
    """mast_judgements rows, in column order: one per mode assessed."""
    started, judged = rfc3339(j.started_at_ns), rfc3339(int(judged_at * 1e9))
    return [[j.trace_id, j.service, j.agent, started, judged, j.model, code, MODES[code].category, j.verdict(code),
             j.structural.get(code), a.confidence, list(a.evidence), a.reason]
            for code, a in sorted(j.assessments.items())]


def _record(rows: list[tuple[str, list[Any]]]) -> tuple[int, bytes]:
    return len(rows), "".join(f"{table}\t{_dumps(row)}\n" for table, row in rows).encode()


def encode(v: Verdict) -> tuple[int, bytes]:
    """One verdict's rows as a queue record: a `table<TAB>JSON array` line per row."""
    started = rfc3339(v.started_at_ns)
    lines = [f"{TRACES}\t{_dumps(trace_row(v, started))}\n"]
    if v.findings:
        lines += [f"{FINDINGS}\t{_dumps(row)}\n" for row in finding_rows(v, started)]
    if v.waste.steps:
        lines += [f"{REPEATED_STEPS}\t{_dumps(row)}\n" for row in repeated_step_rows(v)]
    return len(lines), "".join(lines).encode()


def decode(batch: Batch) -> dict[str, list[bytes]]:
    """A batch's rows by table (JSON arrays)."""
    by_table: dict[bytes, list[bytes]] = {name.encode(): [] for name in TABLES}
    for payload in batch.payloads:
        for line in payload.splitlines():
            table, _, row = line.partition(b"\t")
            by_table[table].append(row)
    return {table.decode(): rows for table, rows in by_table.items()}


class StoreExporter:
    """Implements the processor's Exporter protocol."""

    def __init__(self, config: StoreConfig, telemetry: StoreTelemetry | None = None) -> None:
        self.config = config
        self.telemetry: StoreTelemetry = telemetry or NullTelemetry()  # type: ignore[assignment]
        self.layout = config.layout
        self.engine = open_engine(config)
        self.queue = DurableQueue(config.queue_path or os.path.join(config.path, "queue"), config.max_queued_rows,
                                  config.max_queued_mib << 20)
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
        self.telemetry.store_queue(*self.queue.depth())
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

    def export_increment(self, increment: Increment) -> None:
        pass  # rows are written per verdict

    def export_verdict(self, verdict: Verdict, increment: Increment) -> None:
        self._append(*encode(verdict))

    def export_judgement(self, judgement: Judgement) -> None:
        """The judge's positive answers as mast_findings rows with basis judge; every answer in mast_judgements."""
        self._append(*_record([(FINDINGS, r) for r in finding_rows(judgement)]
                              + [(JUDGEMENTS, r) for r in judgement_rows(judgement, time.time())]))

    def _append(self, rows: int, payload: bytes) -> None:
        dropped = self.queue.append(rows, payload)
        if dropped:
            self.telemetry.store_dropped_rows(dropped)
            now = time.monotonic()
            if now - self._last_drop_log > 10:
                self._last_drop_log = now
                log.warning("store queue full: oldest rows dropped (%d now)", dropped)
        queued, size = self.queue.depth()
        self.telemetry.store_queue(queued, size)
        if queued >= self.config.batch_rows:
            with self._cond:
                self._cond.notify()

    def _write(self, batch: Batch) -> dict[str, int]:
        """Insert a batch into every table (a table that has it already drops it by its token); returns the
        rows per table."""
        if batch.attempts:
            self.telemetry.store_retried()
        batch.attempts += 1
        written = {}
        for name, rows in decode(batch).items():
            if rows:
                started = time.perf_counter()
                self.engine.insert(f"{self.config.database}.{name}", TABLES[name].columns, rows, batch.token(name))
                self.telemetry.store_insert_seconds(time.perf_counter() - started)
                written[name] = len(rows)
        return written

    def _run(self) -> None:
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
            self.queue.sync()
            written: dict[str, int] = {}
            try:
                self._migrate()
                batch = self.queue.seal(self.config.batch_rows)
                if batch is not None:
                    written = self._write(batch)
            except Exception:
                log.exception("store write failed; retrying")
                self.telemetry.store_failed()
                backoff = min(max(backoff * 2, 0.5), 30.0)
                if stopping:
                    return
                continue
            backoff = 0.0
            if batch is not None:
                self.queue.ack(batch)
                for name, n in written.items():
                    self.telemetry.store_written(name, n)
            self.telemetry.store_queue(*self.queue.depth())
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
