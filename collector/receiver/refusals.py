"""Refused requests: counted by reason, and logged at most once per reason per interval with how many there were
(`ThrottledLog`), so that a client sending nothing but bad requests cannot flood the log."""

from __future__ import annotations

import logging

from mastwatch.collector.throttled_log import ThrottledLog

from . import Counters


class Refusals:
    def __init__(self, counters: Counters, log: logging.Logger, what: str) -> None:
        self.counters, self.what = counters, what  # what was asked: OTLP/HTTP, OTLP/gRPC, /metrics
        self._log = ThrottledLog(log)

    def refuse(self, reason: str, detail: str, peer: str | None = None) -> None:
        """Count a refused request (`mastwatch_requests_rejected_total{reason}`) and log it (throttled)."""
        self.counters.request_rejected(reason)
        self._log.warning(reason, f"{self.what} request refused ({reason})"
                                  f"{f' from {peer}' if peer else ''}: {detail}")
