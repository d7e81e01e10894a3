"""What the optional judge answers about one trace: an `Assessment` per mode asked, a `Judgement` per trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .steps import Finding

# how a judge's answer on a mode relates to the structural verdict (the `verdict` label and column)
FOUND: Final = "found"
CONFIRMED: Final = "confirmed"
REJECTED: Final = "rejected"
NOT_FOUND: Final = "not_found"


@dataclass(frozen=True, slots=True)
class Assessment:
    code: str
    present: bool
    confidence: float
    evidence: tuple[str, ...]  # 16-hex span ids, all in the transcript
    reason: str


@dataclass(frozen=True, slots=True)
class Judgement:
    """The judge's answer on one trace, for the sinks."""

    trace_id: str
    service: str
    agent: str
    started_at_ns: int
    model: str
    assessments: dict[str, Assessment]
    structural: dict[str, float]

    def verdict(self, code: str) -> str:
        found = code in self.structural
        if self.assessments[code].present:
            return CONFIRMED if found else FOUND
        return REJECTED if found else NOT_FOUND

    @property
    def findings(self) -> dict[str, Finding]:
        """The modes the judge says the trace shows, as findings with basis judge."""
        return {a.code: Finding(a.code, a.confidence, [bytes.fromhex(e) for e in a.evidence], "found by the judge",
                                "judge", quote=a.reason)
                for a in self.assessments.values() if a.present}
