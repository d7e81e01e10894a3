"""A stop signal for agent code: asks mastwatch whether the current run has been flagged (a loop, the turn limit),
so that a loop can break itself instead of waiting for the model to notice. No server on the agent's side: it
reads `GET /v1/findings/{trace_id}` on mastwatch's metrics port.

    guard = Guard("http://mastwatch:9464")
    for step in plan:
        if guard.should_stop():          # the current span's trace
            break
        ...

The trace id is the current OpenTelemetry span's; the spans of the step just done must have reached mastwatch
(exported) for it to see them: a BatchSpanProcessor sends them within its schedule delay.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

STOP_MODES = ("FM-1.3", "FM-1.5")  # step repetition (loops), unaware of termination (the turn limit)


class GuardError(RuntimeError):
    """mastwatch could not be asked (unreachable, refused, or answered something else)."""


@dataclass
class Flags:
    """mastwatch's answer for one trace."""

    trace_id: str
    flagged: bool
    findings: list[dict[str, Any]] = field(default_factory=list)  # failure_mode, reason, evidence, ...
    wasted_cost_usd: float = 0.0
    wasted_seconds: float = 0.0  # the repeated steps' time and their producing model calls'

    def modes(self) -> set[str]:
        return {f["failure_mode"] for f in self.findings}


class Guard:
    def __init__(self, endpoint: str = "http://localhost:9464", token: str | None = None,
                 timeout: float = 2.0) -> None:
        self.endpoint, self.token, self.timeout = endpoint.rstrip("/"), token, timeout

    def flags(self, trace_id: str | int | None = None) -> Flags:
        """The findings of a trace so far (default: the current span's trace)."""
        if trace_id is None:
            context = trace.get_current_span().get_span_context()
            if not context.is_valid:
                raise GuardError("no current span: pass the trace id, or call inside a span")
            trace_id = context.trace_id
        trace_hex = f"{trace_id:032x}" if isinstance(trace_id, int) else trace_id
        request = urllib.request.Request(f"{self.endpoint}/v1/findings/{trace_hex}")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = json.load(response)
        except urllib.error.HTTPError as e:
            raise GuardError(f"mastwatch answered HTTP {e.code} for trace {trace_hex}") from e
        except (OSError, ValueError) as e:
            raise GuardError(f"cannot ask mastwatch at {self.endpoint}: {e}") from e
        return Flags(body["trace_id"], body["flagged"], body.get("findings", []), body.get("wasted_cost_usd", 0.0),
                     body.get("wasted_seconds", 0.0))

    def should_stop(self, trace_id: str | int | None = None, modes: Collection[str] = STOP_MODES,
                    max_wasted_usd: float | None = None, max_wasted_seconds: float | None = None) -> bool:
        """Whether the run shows one of `modes`, or burnt more than `max_wasted_usd` or `max_wasted_seconds` on
        repeated steps."""
        flags = self.flags(trace_id)
        if flags.modes() & set(modes):
            return True
        return (max_wasted_usd is not None and flags.wasted_cost_usd > max_wasted_usd) or \
            (max_wasted_seconds is not None and flags.wasted_seconds > max_wasted_seconds)
