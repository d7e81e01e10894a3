"""What a detector plugin is. One module in `detectors/` per failure mode; the engine finds them.

A detector class is instantiated once per trace. The engine calls `observe` with each step as it
arrives (in arrival order, which for live traffic is end order) and `finish` once when the trace is
complete. Either may return the detector's current finding; a finding returned mid-trace is published
at once (live alerting) and may be revised later. Detectors keep incremental state: `observe` must not
rescan the trace.

Modes that no enabled detector covers are reported as not assessed (a judge may cover them later).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ..assemble import Trace
from ..steps import Finding, Step, StepKind
from .tools import ToolClassifier


class DetectorSettings(BaseModel):
    """Base of each detector's settings (the `processor.detectors.<code>` section of the config)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    skip_agents: list[str] = Field(default_factory=list,
                                   description="glob patterns of agents whose runs this detector leaves alone")


DEFAULT_TOOLS = ToolClassifier()


class Detector:
    code: ClassVar[str]
    Settings: ClassVar[type[DetectorSettings]] = DetectorSettings
    kinds: ClassVar[frozenset[StepKind]] = frozenset(StepKind)  # the steps `observe` is given

    def __init__(self, settings: Any, trace: Trace, tools: ToolClassifier | None = None) -> None:
        self.settings = settings
        self.trace = trace
        self.tools = tools or DEFAULT_TOOLS  # read-only vs state-changing, shared by the engine's detectors

    def observe(self, step: Step) -> Finding | None:
        return None

    def finish(self) -> Finding | None:
        return None
