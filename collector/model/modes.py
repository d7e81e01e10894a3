"""The 14 MAST failure modes, keyed by their stable codes."""

from __future__ import annotations

from typing import Final, NamedTuple


class FailureMode(NamedTuple):
    code: str
    name: str
    category: str


CATEGORIES: Final = {"FC1": "System design", "FC2": "Inter-agent misalignment", "FC3": "Task verification"}

MODES: Final[dict[str, FailureMode]] = {m.code: m for m in (
    FailureMode("FM-1.1", "Disobey task specification", "FC1"),
    FailureMode("FM-1.2", "Disobey role specification", "FC1"),
    FailureMode("FM-1.3", "Step repetition", "FC1"),
    FailureMode("FM-1.4", "Loss of conversation history", "FC1"),
    FailureMode("FM-1.5", "Unaware of termination conditions", "FC1"),
    FailureMode("FM-2.1", "Conversation reset", "FC2"),
    FailureMode("FM-2.2", "Fail to ask for clarification", "FC2"),
    FailureMode("FM-2.3", "Task derailment", "FC2"),
    FailureMode("FM-2.4", "Information withholding", "FC2"),
    FailureMode("FM-2.5", "Ignored other agent's input", "FC2"),
    FailureMode("FM-2.6", "Reasoning-action mismatch", "FC2"),
    FailureMode("FM-3.1", "Premature termination", "FC3"),
    FailureMode("FM-3.2", "No or incomplete verification", "FC3"),
    FailureMode("FM-3.3", "Incorrect verification", "FC3"),
)}


def mode_code(text: str) -> str:
    """A failure mode's code as written (`fm-3.3`, ` FM-3.3`) -> `FM-3.3`; ValueError naming the codes."""
    code = text.strip().upper()
    if code not in MODES:
        raise ValueError(f"{text!r} is not a MAST failure mode (FM-1.1 to FM-1.5, FM-2.1 to FM-2.6, FM-3.1 to FM-3.3)")
    return code
