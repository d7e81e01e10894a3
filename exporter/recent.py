"""The findings of recent runs, by trace id, for agents that ask about their own run while it goes on
(`GET /v1/findings/{trace_id}` on the metrics port; `mastwatch.guard` is the client). Implements the processor's
LiveListener; keeps the newest `limit` traces with findings."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any

from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.published import LiveFindings

PATH = "/v1/findings/"
TRACE_ID = re.compile(r"[0-9a-f]{32}")


class RecentFindings:
    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._traces: OrderedDict[bytes, LiveFindings] = OrderedDict()

    def findings_changed(self, changes: list[LiveFindings]) -> None:
        with self._lock:
            traces = self._traces
            for change in changes:
                traces[change.trace_id] = change
                traces.move_to_end(change.trace_id)
            while len(traces) > self.limit:
                traces.popitem(last=False)

    def answer(self, path: str) -> tuple[int, dict[str, Any]]:
        """The reply to GET `path` (/v1/findings/<32 hex digits>): status and JSON body. A trace with no finding
        (or not seen, or older than the newest `limit`) is not flagged."""
        trace_hex = path[len(PATH):].lower()
        if not TRACE_ID.fullmatch(trace_hex) or trace_hex == "0" * 32:
            return 400, {"error": "the path ends with the trace id: 32 hexadecimal digits, not all zero"}
        with self._lock:
            change = self._traces.get(bytes.fromhex(trace_hex))
        if change is None or not change.findings:
            return 200, {"trace_id": trace_hex, "flagged": False, "findings": []}
        return 200, {
            "trace_id": trace_hex, "flagged": True, "run_ended": change.final, "service": change.service,
            "agent": change.agent, **change.release(), "wasted_tokens": change.wasted_tokens,
            "wasted_cost_usd": round(change.wasted_cost, 6), "wasted_seconds": round(change.wasted_seconds, 6),
            "findings": [{"failure_mode": f.code, "name": MODES[f.code].name, "category": MODES[f.code].category,
                          "confidence": f.confidence, "evidence": [s.hex() for s in f.evidence], "reason": f.reason,
                          "basis": f.basis} for f in change.findings]}
