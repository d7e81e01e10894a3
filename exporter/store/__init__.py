"""The store exporter: verdicts and findings as ClickHouse rows, written in batches by a background thread.

The default engine is embedded chDB in a directory. Failed writes are retried with backoff while rows
wait in a bounded queue; when it is full the oldest rows are dropped and counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mastwatch.collector.classify.modes import MODES
from mastwatch.collector.judge.stage import Judgement
from mastwatch.collector.processor import Increment
from mastwatch.collector.verdict import Verdict, rfc3339
from mastwatch.durations import Duration

from .schema import COLUMNS, FINDINGS, JUDGEMENTS, TRACES, ddl

log = logging.getLogger(__name__)


class StoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    engine: Literal["chdb"] = Field("chdb", description="chdb: embedded ClickHouse in `path`")
    path: str = Field("./mastwatch-data", description="chDB data directory")
    database: str = Field("mastwatch", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    batch_rows: int = Field(5000, ge=1, description="rows per insert")
    flush_interval: Duration = Field(1.0, gt=0, description="longest a row waits before it is written")
    max_queued_rows: int = Field(1_000_000, ge=1, description="rows held while the store fails")


def trace_row(v: Verdict) -> list[Any]:
    """A mast_traces row, in TRACE_COLUMNS order."""
    waste = v.waste
    wasted_input = waste.token_total("input") + waste.token_total("cache_read") + waste.token_total("cache_write")
    return [v.trace_id, v.service, v.agent, v.models, rfc3339(v.started_at_ns), rfc3339(v.ended_at_ns), v.completion,
            v.steps, v.llm_calls, v.tool_calls, v.input_tokens, v.output_tokens, v.cost_usd, sorted(v.findings),
            waste.repeated_steps, wasted_input, waste.token_total("output"), v.wasted_cost_usd]


def finding_rows(v: Verdict | Judgement) -> list[list[Any]]:
    """mast_findings rows, in FINDING_COLUMNS order."""
    started = rfc3339(v.started_at_ns)
    return [[v.trace_id, v.service, v.agent, started, code, MODES[code].category, MODES[code].name, f.confidence,
             f.basis, [e.hex() for e in f.evidence], f.reason] for code, f in sorted(v.findings.items())]


def judgement_rows(j: Judgement, judged_at: float) -> list[list[Any]]:
    """mast_judgements rows, in JUDGEMENT_COLUMNS order: one per mode assessed."""
    started, judged = rfc3339(j.started_at_ns), rfc3339(int(judged_at * 1e9))
    return [[j.trace_id, j.service, j.agent, started, judged, j.model, code, MODES[code].category, j.verdict(code),
             j.structural.get(code), a.confidence, list(a.evidence), a.reason]
            for code, a in sorted(j.assessments.items())]


class StoreExporter:
    """Implements the processor's Exporter protocol."""

    def __init__(self, config: StoreConfig, telemetry: Any = None) -> None:
        from .chdb_engine import ChdbEngine

        self.config = config
        self.telemetry = telemetry
        self.engine = ChdbEngine(config.path)
        for statement in ddl(config.database):
            self.engine.command(statement)
        self._pending: deque[tuple[str, list[Any]]] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self._inflight = 0
        self._thread = threading.Thread(target=self._run, name="mastwatch-store", daemon=True)
        self._thread.start()

    def table(self, name: str) -> str:
        return f"{self.config.database}.{name}"

    def export_increment(self, increment: Increment) -> None:
        pass  # rows are written per verdict

    def export_verdict(self, verdict: Verdict, increment: Increment) -> None:
        self._enqueue([(TRACES, trace_row(verdict))] + [(FINDINGS, r) for r in finding_rows(verdict)])

    def export_judgement(self, judgement: Judgement) -> None:
        """The judge's positive answers as mast_findings rows with basis judge; every answer in mast_judgements."""
        self._enqueue([(FINDINGS, r) for r in finding_rows(judgement)]
                      + [(JUDGEMENTS, r) for r in judgement_rows(judgement, time.time())])

    def _enqueue(self, rows: list[tuple[str, list[Any]]]) -> None:
        with self._cond:
            self._pending.extend(rows)
            overflow = len(self._pending) - self.config.max_queued_rows
            for _ in range(max(overflow, 0)):
                self._pending.popleft()
            if overflow > 0:
                log.warning("store queue full: %d oldest rows dropped", overflow)
                if self.telemetry is not None:
                    self.telemetry.store_dropped.inc(overflow)
            if len(self._pending) >= self.config.batch_rows:
                self._cond.notify()

    def _take(self) -> list[tuple[str, list[Any]]]:
        n = min(len(self._pending), self.config.batch_rows)
        return [self._pending.popleft() for _ in range(n)]

    def _write(self, batch: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
        """Insert a batch, one insert per table; returns the rows of the tables whose insert failed."""
        by_table: dict[str, list[list[Any]]] = {}
        for table, row in batch:
            by_table.setdefault(table, []).append(row)
        unwritten: list[tuple[str, list[Any]]] = []
        for table, rows in by_table.items():
            try:
                self.engine.insert(self.table(table), COLUMNS[table], rows)
            except Exception:
                log.exception("store insert of %d rows into %s failed; retrying", len(rows), table)
                unwritten += [(table, row) for row in rows]
                continue
            if self.telemetry is not None:
                self.telemetry.store_rows.labels(table).inc(len(rows))
        return unwritten

    def _run(self) -> None:
        backoff = 0.0
        while True:
            with self._cond:
                if backoff or (not self._stop and len(self._pending) < self.config.batch_rows):
                    self._cond.wait(backoff or self.config.flush_interval)
                batch = self._take()
                self._inflight = len(batch)
                stopping = self._stop
            unwritten = self._write(batch) if batch else []
            with self._cond:
                if unwritten:  # only what failed goes back: a retry never writes a row twice
                    self._pending.extendleft(reversed(unwritten))
                self._inflight = 0
                self._cond.notify_all()
            if unwritten:
                if self.telemetry is not None:
                    self.telemetry.store_errors.inc()
                backoff = min(max(backoff * 2, 0.5), 30.0)
                if stopping:  # the durable on-disk queue is the store's next step
                    log.error("store still failing at shutdown: %d rows not written", len(self._pending))
                    return
                continue
            backoff = 0.0
            if stopping and not self._pending:
                return

    def flush(self, timeout: float = 30.0) -> bool:
        """Write everything queued now; True when all of it was written."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            while (self._pending or self._inflight) and time.monotonic() < deadline:
                self._cond.notify_all()
                self._cond.wait(0.05)
            return not (self._pending or self._inflight)

    def query(self, sql: str) -> list[dict[str, Any]]:
        return self.engine.query(sql)

    def shutdown(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(60)
        self.engine.close()
