"""Refused requests: counted by reason, and logged at most once per reason per interval with how many there were
(`ThrottledLog`), so that a client sending nothing but bad requests cannot flood the log."""

from __future__ import annotations

import logging
from typing import Final

from mastwatch.collector.throttled_log import ThrottledLog

from . import Counters

# Every reason a request is refused for: each is counted from 0 from the start, so that a first refusal shows in
# rate() and increase() (a series made at its first increment shows none).
REASONS: Final = ("malformed", "too_large", "unsupported_media_type", "method_not_allowed", "not_found", "timeout",
                  "unauthenticated", "bad_http", "server_error", "too_many_connections", "accept_failed",
                  "tls_failed")
# And every reason spans are rejected for (mastwatch_spans_rejected_total).
SPAN_REASONS: Final = ("invalid_id", "queue_full", "unreadable")


class Refusals:
    def __init__(self, counters: Counters, log: logging.Logger, what: str) -> None:
        self.counters, self.what = counters, what  # what was asked: OTLP/HTTP, OTLP/gRPC, /metrics
        self._log = ThrottledLog(log)

    def refuse(self, reason: str, detail: str, peer: str | None = None) -> None:
        """Count a refused request (`mastwatch_requests_rejected_total{reason}`) and log it (throttled)."""
        self.counters.request_rejected(reason)
        self._log.warning(reason, f"{self.what} request refused ({reason})"
                                  f"{f' from {peer}' if peer else ''}: {detail}")
