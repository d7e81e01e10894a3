"""Refused requests: counted by reason, and logged at most once per reason per interval with how many there were,
so that a client sending nothing but bad requests cannot flood the log."""

from __future__ import annotations

import logging
import threading
import time

from . import Counters

LOG_INTERVAL = 10.0  # seconds between two log lines of one reason
DETAIL_CHARS = 200


class Refusals:
    def __init__(self, counters: Counters, log: logging.Logger, protocol: str, interval: float = LOG_INTERVAL) -> None:
        self.counters, self.log, self.protocol, self.interval = counters, log, protocol, interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}  # reason -> when last logged
        self._since: dict[str, int] = {}  # reason -> refusals not logged since

    def refuse(self, reason: str, detail: str, peer: str | None = None) -> None:
        """Count a refused request (`mastwatch_requests_rejected_total{reason}`) and log it unless this reason was
        logged less than `interval` ago."""
        self.counters.request_rejected(reason)
        now = time.monotonic()
        with self._lock:
            last = self._last.get(reason)
            if last is not None and now - last < self.interval:
                self._since[reason] = self._since.get(reason, 0) + 1
                return
            self._last[reason] = now
            unlogged = self._since.pop(reason, 0)
        detail = " ".join(detail.split())[:DETAIL_CHARS]  # one line, whatever the client sent
        more = f" ({unlogged} more refused for this reason since the last line)" if unlogged else ""
        self.log.warning("OTLP/%s request refused (%s)%s: %s%s", self.protocol, reason,
                         f" from {peer}" if peer else "", detail, more)
