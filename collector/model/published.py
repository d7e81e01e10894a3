"""What the processor publishes of a trace besides its verdict: the new facts for the counters (`Increment`), its
findings while it runs (`LiveFindings`), and what of it was already published (`Published`, kept on the trace)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .modes import FailureMode
from .steps import Finding
from .verdict import release_fields
from .waste import Waste


@dataclass(init=False)  # __init__ written out: it is compiled, a generated one is not
class Increment:
    """New facts about one trace for the counters: modes first shown (`muted`: those first shown by a finding whose
    signature is muted, counted apart), repeated steps and their waste."""

    service: str
    agent: str
    modes: list[FailureMode]
    repeated_by_tool: dict[str, int]
    wasted_tokens: dict[tuple[str, str], int]
    wasted_cost: dict[str, float]
    wasted_seconds: dict[str, float]
    muted: list[FailureMode]

    def __init__(self, service: str, agent: str, modes: list[FailureMode], repeated_by_tool: dict[str, int],
                 wasted_tokens: dict[tuple[str, str], int], wasted_cost: dict[str, float],
                 wasted_seconds: dict[str, float] | None = None, muted: list[FailureMode] | None = None) -> None:
        self.service, self.agent, self.modes = service, agent, modes
        self.repeated_by_tool, self.wasted_tokens, self.wasted_cost = repeated_by_tool, wasted_tokens, wasted_cost
        self.wasted_seconds = {} if wasted_seconds is None else wasted_seconds
        self.muted = [] if muted is None else muted


@dataclass(init=False)
class LiveFindings:
    """All of one trace's findings so far, for those who act on a run while it goes on (a stop signal). Told each
    time they change, before the labels are final: `agent` is the one the spans have named so far. `final` once
    the trace is classified."""

    trace_id: bytes
    service: str
    agent: str
    findings: list[Finding]
    wasted_tokens: int
    wasted_cost: float
    wasted_seconds: float
    final: bool
    version: str  # as Verdict's
    environment: str

    def __init__(self, trace_id: bytes, service: str, agent: str, findings: list[Finding], wasted_tokens: int,
                 wasted_cost: float, final: bool, wasted_seconds: float = 0.0, version: str = "",
                 environment: str = "") -> None:
        self.trace_id, self.service, self.agent, self.findings = trace_id, service, agent, findings
        self.wasted_tokens, self.wasted_cost, self.final = wasted_tokens, wasted_cost, final
        self.wasted_seconds, self.version, self.environment = wasted_seconds, version, environment

    def release(self) -> dict[str, str]:
        return release_fields(self.version, self.environment)



NO_INCREMENT: Final = Increment("", "", [], {}, {}, {}, {})  # nothing new for the counters; shared, never changed


class Published:
    """What the exporters were already told about one trace (live findings are published early)."""

    def __init__(self, service: str, agent: str) -> None:
        self.service = service
        self.agent = agent
        self.modes: set[str] | None = None  # the modes published (made at the first)
        self.waste: Waste | None = None  # as published
        self.live: Waste | None = None  # accounted incrementally while the trace is open
