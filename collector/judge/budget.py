"""The judge's budget: calls and tokens per hour, over a sliding window of the last hour.

A call is admitted only if it fits both limits with its estimated tokens; once answered, the estimate is
replaced by the tokens the response's usage reports. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

CALLS = "budget_calls"
TOKENS = "budget_tokens"


class Budget:
    def __init__(self, calls_per_hour: int, tokens_per_hour: int, window: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.calls_per_hour = calls_per_hour
        self.tokens_per_hour = tokens_per_hour
        self.window = window
        self.clock = clock
        self._spent: deque[list] = deque()  # [time, tokens], oldest first
        self._tokens = 0
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        spent = self._spent
        while spent and spent[0][0] <= now - self.window:
            self._tokens -= spent.popleft()[1]

    def _limit(self, now: float, tokens: int) -> str | None:
        self._expire(now)
        if len(self._spent) >= self.calls_per_hour:
            return CALLS
        if self._tokens + tokens > self.tokens_per_hour:
            return TOKENS
        return None

    def exceeded(self, tokens: int = 0) -> str | None:
        """Which limit a call of `tokens` would break now (CALLS or TOKENS), or None."""
        with self._lock:
            return self._limit(self.clock(), tokens)

    def spend(self, tokens: int) -> list | str:
        """Admit a call estimated at `tokens`: its entry for `settle`, or the limit it would break."""
        with self._lock:
            now = self.clock()
            limit = self._limit(now, tokens)
            if limit is not None:
                return limit
            entry = [now, tokens]
            self._spent.append(entry)
            self._tokens += tokens
            return entry

    def settle(self, entry: list, tokens: int) -> None:
        """The call's real tokens, once known."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            if entry[0] > now - self.window:  # still in the window
                self._tokens += tokens - entry[1]
            entry[1] = tokens
