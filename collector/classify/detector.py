"""What a detector plugin is. One module in `detectors/` per failure mode; the engine finds them.

A detector class is instantiated once per trace. The engine calls `observe` with each step as it
arrives (in arrival order, which for live traffic is end order) and `finish` once when the trace is
complete. Either may return the detector's current finding; a finding returned mid-trace is published
at once (live alerting) and may be revised later. Detectors keep incremental state: `observe` must not
rescan the trace.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ..assemble import Trace
from ..steps import Finding, Step, StepKind


class DetectorSettings(BaseModel):
    """Base of each detector's settings (the `processor.detectors.<code>` section of the config)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True


class Detector:
    code: ClassVar[str]
    Settings: ClassVar[type[DetectorSettings]] = DetectorSettings
    kinds: ClassVar[frozenset[StepKind]] = frozenset(StepKind)  # the steps `observe` is given

    def __init__(self, settings: Any, trace: Trace) -> None:
        self.settings = settings
        self.trace = trace

    def observe(self, step: Step) -> Finding | None:
        return None

    def finish(self) -> Finding | None:
        return None
