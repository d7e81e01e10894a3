"""What a detector plugin is. One module in `detectors/` per failure mode; the engine finds them.

A detector is made for a trace. The engine calls `observe` with each step as it arrives (in arrival
order, which for live traffic is end order) and `finish` once when the trace is complete. Either may
return the detector's current finding; a finding returned mid-trace is published at once (live
alerting) and may be revised later. Detectors keep incremental state: `observe` must not rescan the
trace.

A detector class that keeps all of its per-trace state in `begin` (its `__init__` ends by calling it) sets
`reusable` itself: the engine then resets finished traces' detectors with `begin` and gives them to new
traces instead of making new ones (making nine detectors and their state per trace costs more than
resetting them). A subclass inherits `begin`, not `reusable`: one that adds state says so again. What a
finding holds is handed out: `begin` makes containers a finding may share anew.

Modes that no enabled detector covers are reported as not assessed (a judge may cover them later).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Final, TypeVar, cast

from mypy_extensions import mypyc_attr

from ..config import DetectorSettings
from ..model.steps import Finding, Step, StepKind
from ..model.trace import SharedState, Trace
from .tools import ToolClassifier

DEFAULT_TOOLS: Final = ToolClassifier()


@mypyc_attr(allow_interpreted_subclasses=True)  # detectors added as plain modules subclass it
class Detector:
    code: ClassVar[str]
    Settings: ClassVar[type[DetectorSettings]] = DetectorSettings
    kinds: ClassVar[frozenset[StepKind]] = frozenset(StepKind)  # the steps `observe` is given
    reusable: ClassVar[bool] = False  # `begin` resets all per-trace state (see `reusable`): set by each class

    def __init__(self, settings: Any, trace: Trace, tools: ToolClassifier | None = None) -> None:
        self.settings = settings
        self.trace = trace
        self.tools = tools or DEFAULT_TOOLS  # read-only vs state-changing, shared by the engine's detectors

    def begin(self) -> None:
        """Set the per-trace state to that of a detector that has seen nothing (settings, tools and the state it
        shares are kept; `trace` is set by the engine)."""

    def observe(self, step: Step) -> Finding | None:
        return None

    def finish(self) -> Finding | None:
        return None


def is_reusable(cls: type[Detector]) -> bool:
    """Whether the engine may reuse the class's detectors: `reusable` set by the class itself, not inherited (a
    subclass may keep state its base's `begin` does not reset)."""
    return vars(cls).get("reusable") is True


S = TypeVar("S", bound=SharedState)


def shared(detector: Detector, key: str, make: Callable[[], S], fits: Callable[[S], bool] | None = None) -> S:
    """State the detectors of one trace share under `key` (each feeds it; it counts a step once). It is made anew
    when the engine classifies the trace again (the detector already uses it), and a detector whose settings it
    does not `fit` gets one of its own. The state keeps the codes of its `users`."""
    code = detector.code
    states = detector.trace.shared
    if states is None:
        states = detector.trace.shared = {}
    known: SharedState | None = states.get(key)  # typed: compiled code reads `users` as a field
    if known is None or code in known.users:
        state = states[key] = make()
    elif fits is not None and not fits(cast(S, known)):
        state = states[f"{key} of {code}"] = make()  # kept in `shared` too: the engine resets it with the rest
    else:
        state = cast(S, known)
    chosen: SharedState = state
    chosen.users.add(code)
    return state
