"""Log lines that bad input could repeat without end, at most one per kind per interval, with how many were left out:
a client sending nothing but bad requests, or spans nothing can read, cannot flood the log."""

from __future__ import annotations

import logging
import threading
import time

INTERVAL = 10.0  # seconds between two lines of one kind
DETAIL_CHARS = 200


class ThrottledLog:
    def __init__(self, log: logging.Logger, interval: float = INTERVAL) -> None:
        self.log, self.interval = log, interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}  # kind -> when last logged
        self._since: dict[str, int] = {}  # kind -> lines left out since

    def warning(self, kind: str, message: str) -> None:
        """Log `message` (made one line, cut at DETAIL_CHARS) unless a line of this kind was logged less than
        `interval` ago."""
        now = time.monotonic()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval:
                self._since[kind] = self._since.get(kind, 0) + 1
                return
            self._last[kind] = now
            left_out = self._since.pop(kind, 0)
        more = f" ({left_out} more since the last such line)" if left_out else ""
        self.log.warning("%s%s", " ".join(message.split())[:DETAIL_CHARS], more)
