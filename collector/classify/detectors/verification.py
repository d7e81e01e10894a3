"""FM-3.2 No or incomplete verification: the run changed state and finished without checking the result.

Looks for: a change whose result doesn't show the new state, unchecked before the end; a result that only
  acknowledges the request; a handover giving up without a cause
Basis: structure or content
Content capture: for acknowledgements, handovers and records

Judged when the trace is complete. A change needs a check when its tool matches `needs_check` (deployments,
restarts, applied configs, code edits: their own result does not show the new state; structure), or when its
captured result only acknowledges the request ("accepted", "queued", "restarting"; content, `acknowledgements`).
Any later read-only or unclassified tool call (a status query, a test run) counts as a check. A run stopped from
outside (a limit hit, or ended before the model saw the last tool result: FM-1.5) had no chance to check.

Also, with content:
- a run handed over to a person while the problem was still there, its reason naming no cause, concluded it could
  not be fixed without the checks that would have found the cause (FM-3.1 too);
- a run that ended right after a change, its last model turn saying nothing, neither checked nor reported it
  (FM-3.1 too);
- a run that told the user something is not among their records ("I don't see a Seattle address on file") while a
  record a lookup had listed was never opened concluded without looking."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, ClassVar

from pydantic import Field

from ...config import DetectorSettings
from ...model.steps import AGENT, LLM, TOOL, Finding, Step
from ..detector import Detector
from ..progress import Ending, Progress, handover, shared_progress, silent_end
from ..records import shared_records
from ..signals import CONTENT, STRUCTURE, acknowledged_only, asks_for_tools, tool_error
from ..tools import STATE_CHANGING, Globs

# Operations whose own result does not show the state they lead to: operations on running systems, and edits of
# code (a program changed is not a program that works until something runs it).
NEEDS_CHECK = ["*deploy*", "*restart*", "*rollout*", "*rollback*", "*reboot*", "*apply*", "*scale*", "*migrate*",
               "*install*", "*patch*", "*failover*", "*drain*", "*cordon*", "*update_config*", "*set_config*",
               "*feature_flag*", "edit", "edit_*", "*_edit", "*_edit_*", "str_replace*"]


def _needs_check_globs(settings: VerificationSettings) -> Globs:
    return Globs(settings.needs_check, lower=True)


class VerificationSettings(DetectorSettings):
    """`processor.detectors."FM-3.2"` (fields annotated as strings: see DetectorSettings)."""

    needs_check: ("Annotated[list[str], Field(default_factory=lambda: list(NEEDS_CHECK), description='glob patterns "
                  "(lower case) of changes whose own result does not show the new state: operations on running "
                  "systems, and code edits (a program changed works only once something runs it)')]")
    acknowledgements: ("Annotated[bool, Field(description='a change whose result only acknowledges the request "
                       "(`accepted`, `queued`) needs a check too (content)')]") = True

    # made once per settings, shared by the detectors of every trace (see DetectorSettings)
    needs_check_globs: "ClassVar[cached_property[Globs]]" = cached_property(_needs_check_globs)


class Verification(Detector):
    code = "FM-3.2"
    Settings = VerificationSettings
    kinds = frozenset({TOOL, LLM, AGENT})  # model and agent steps: stopped from outside
    reusable = True

    def __init__(self, settings: VerificationSettings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.progress = shared_progress(self)
        self.records = shared_records(self)
        self.begin()

    def begin(self) -> None:
        self.change: Step | None = None  # the last change needing a check, not checked since
        self.basis = STRUCTURE
        self.stopped = False  # a limit stopped the run (FM-1.5 explains why nothing was checked)
        self._asked = False  # the last model call asked for tools
        self._unseen = False  # a tool result came after it and no model call since: the run may be cut off

    def observe(self, step: Step) -> Finding | None:
        self.progress.observe(step)
        self.records.observe(step)
        if step.limit is not None:
            self.stopped = True
        if step.kind is LLM:
            self._asked, self._unseen = asks_for_tools(step), False
            return None
        tool = step.tool
        if tool is None:
            return None
        self._unseen = self._asked
        if self.tools.effect(tool) is STATE_CHANGING:
            if tool_error(step) is not None:
                return None  # a failed change: FM-3.1 / FM-3.3 territory
            if self.settings.needs_check_globs(tool):
                self.change, self.basis = step, STRUCTURE
            elif self.settings.acknowledgements and acknowledged_only(step):
                self.change, self.basis = step, CONTENT
        elif self.change is not None:
            self.change = None  # checked
        return None

    def finish(self) -> Finding | None:
        change = self.change
        if change is None or self.stopped or self._unseen:  # stopped from outside before it could check (FM-1.5)
            end = concluded_without_cause(self.progress) or ended_silently(self.progress)  # none after a limit
            return self._unlooked() if end is None else end.finding(self.code)
        why = "its result only acknowledged the request" if self.basis == CONTENT else "its result does not show " \
            "the new state"
        return Finding(self.code, 0.7, [change.span_id], f"{change.tool} changed state and the run ended without "
                       f"checking it ({why})", self.basis)

    def _unlooked(self) -> Finding | None:
        denied = self.records.denied
        if denied is None:
            return None
        listing, step, words, unopened = denied
        shown = ", ".join(unopened[:3]) + (", ..." if len(unopened) > 3 else "")
        return Finding(self.code, 0.6, [listing.step.span_id, step.span_id],
                       f"told the user something is not among their records without opening {len(unopened)} of the "
                       f"{len(listing.ids)} records {listing.step.tool} listed", CONTENT,
                       quote=f"{words} (never opened: {shown})")


def concluded_without_cause(p: Progress) -> Ending | None:
    """The run handed over to a person giving up, its reason naming no cause: it concluded the problem could not be
    fixed without the checks that would have found the cause (FM-3.1 reads the same handover as giving up)."""
    h = handover(p)
    if h is None or h.gave_up is None:
        return None
    return Ending(0.6, CONTENT, h.evidence, f"handed over with {h.step.tool} without finding what causes the problem: "
                  "the reason names no cause")


def ended_silently(p: Progress) -> Ending | None:
    """The run ended right after a change, saying nothing: the change was neither checked nor reported."""
    end = silent_end(p)
    if end is None:
        return None
    change, llm = end
    return Ending(0.6, CONTENT, [change, llm], f"the run ended right after {change.tool}, saying nothing: the change "
                  "was neither checked nor reported")
