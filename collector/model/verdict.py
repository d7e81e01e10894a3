"""The verdict on one trace: the JSON contract that replay prints and the store and metrics build on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Final

from .modes import MODES
from .steps import Finding, Step
from .waste import Waste, float_sum


@lru_cache(maxsize=64)
def _day(days: int) -> str:
    return datetime.fromtimestamp(days * 86_400, tz=timezone.utc).strftime("%Y-%m-%d")


def rfc3339(ns: int) -> str:
    """UTC, nanoseconds kept (exact: no float on the way)."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"{_day(days)}T{hours:02d}:{minutes:02d}:{seconds:02d}.{fraction:09d}Z"


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)


def rfc3339_ns(text: str) -> int:
    """The inverse of rfc3339: nanoseconds since the epoch."""
    day = datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return (day - _EPOCH) // timedelta(seconds=1) * 1_000_000_000 + int(text[20:29])


def release_fields(version: str, environment: str) -> dict[str, str]:
    """A run's version and environment as the JSON answers carry them: only those its spans named."""
    fields = {}
    if version:
        fields["version"] = version
    if environment:
        fields["environment"] = environment
    return fields


@dataclass(init=False)  # __init__ written out: it is compiled, a generated one is not
class Verdict:
    trace_id: str
    service: str
    agent: str
    models: list[str]
    started_at_ns: int
    ended_at_ns: int
    steps: int
    llm_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    findings: dict[str, Finding]
    waste: Waste
    completion: str  # why the trace was released (see assemble)
    tokens: dict[tuple[str, str], int]  # (model, type) -> tokens
    cost: dict[str, float]  # model -> USD
    not_assessed: list[str]  # modes no detector (or judge) looked for
    trace_steps: list[Step]  # the run's steps, as they arrived, for the store's step rows (not in the JSON)
    model_calls: dict[str, tuple[int, float]]  # model -> (inference calls, their seconds); not in the JSON
    muted: list[str]  # the modes whose finding's signature is muted: known, and not to alert on
    version: str  # the agent's release: its resource's service.version ("" when it has none)
    environment: str  # the deployment it ran in: its resource's deployment.environment.name ("" when none)

    def __init__(self, trace_id: str, service: str, agent: str, models: list[str], started_at_ns: int,
                 ended_at_ns: int, steps: int, llm_calls: int, tool_calls: int, input_tokens: int, output_tokens: int,
                 cost_usd: float, findings: dict[str, Finding], waste: Waste, completion: str = "complete",
                 tokens: dict[tuple[str, str], int] | None = None, cost: dict[str, float] | None = None,
                 not_assessed: list[str] | None = None, trace_steps: list[Step] | None = None,
                 model_calls: dict[str, tuple[int, float]] | None = None, muted: list[str] | None = None,
                 version: str = "", environment: str = "") -> None:
        self.trace_id, self.service, self.agent, self.models = trace_id, service, agent, models
        self.started_at_ns, self.ended_at_ns, self.steps = started_at_ns, ended_at_ns, steps
        self.llm_calls, self.tool_calls, self.input_tokens, self.output_tokens = (llm_calls, tool_calls, input_tokens,
                                                                                  output_tokens)
        self.cost_usd, self.findings, self.waste, self.completion = cost_usd, findings, waste, completion
        self.tokens = {} if tokens is None else tokens
        self.cost = {} if cost is None else cost
        self.not_assessed = [] if not_assessed is None else not_assessed
        self.trace_steps = [] if trace_steps is None else trace_steps
        self.model_calls = {} if model_calls is None else model_calls
        self.muted = [] if muted is None else muted
        self.version, self.environment = version, environment

    @property
    def failing(self) -> bool:
        """Whether the run counts as failing: it has a finding whose signature is not muted."""
        return len(self.findings) > len(self.muted)

    @property
    def wasted_cost_usd(self) -> float:
        return float_sum(self.waste.cost)

    def failure_modes(self) -> dict[str, dict[str, Any]]:
        out = {}
        for code, f in sorted(self.findings.items()):
            mode = MODES[code]
            out[code] = {"name": mode.name, "category": mode.category, "confidence": round(f.confidence, 3),
                         "evidence": [e.hex() for e in f.evidence], "reason": f.reason, "basis": f.basis}
            if f.quote:
                out[code]["quote"] = f.quote
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id, "service": self.service, "agent": self.agent,
            **release_fields(self.version, self.environment), "models": self.models,
            "started_at": rfc3339(self.started_at_ns), "ended_at": rfc3339(self.ended_at_ns),
            "steps": self.steps, "llm_calls": self.llm_calls, "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "cost_usd": round(float(self.cost_usd), 8), "failure_modes": self.failure_modes(),
            "repeated_steps": self.waste.repeated_steps,
            "wasted_input_tokens": self.waste.token_total("input") + self.waste.token_total("cache_read")
            + self.waste.token_total("cache_write"),
            "wasted_output_tokens": self.waste.token_total("output"),
            "wasted_cost_usd": round(float(self.wasted_cost_usd), 8),
            "wasted_seconds": round(self.waste.seconds_total, 6),
            "not_assessed": self.not_assessed,
            **({"muted": self.muted} if self.muted else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)
