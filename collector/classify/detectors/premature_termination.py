"""FM-3.1 Premature termination: the run ended before its work was done.

Looks for: the run ended right after a failed tool call, unexplained; a handover to a person giving up; a run that
  ended right after a change, saying nothing
Basis: structure or content
Content capture: for handovers and silent ends

Judged when the trace is complete:
- the run ended right after a failed tool call, the model having seen the failure, without trying anything else
  (structure when the failure is in the span's status or error type, content when only its result text shows
  it). Not when the final answer claims success, or (content off) when the failed call was the check of a change:
  FM-3.3; not when the same failure was met before and the run went on after it; not a change refused for good
  (not transiently) that a model turn after it explained to the user: the objective became impossible. With the
  answer not captured, a change refused for good is left alone (explained, falsely claimed or given up: unknown);
- a handover to a person (`transfer_to_human*`, `escalate*`) whose reason says the problem is still there and
  names no cause the agent could not remove itself (content);
- a run that ended right after a change that worked, its last model turn saying nothing (content).

A run stopped before the model saw the last tool result is FM-1.5's (stopped from outside, as by a step limit)."""

from __future__ import annotations

from ...model.steps import AGENT, LLM, TOOL, Finding, Step
from ..detector import Detector
from ..progress import Ending, Progress, final_turn, handover, refused, shared_progress, silent_end
from ..signals import CONTENT, STRUCTURE


class PrematureTermination(Detector):
    code = "FM-3.1"
    kinds = frozenset({TOOL, LLM, AGENT})  # agent spans: limits hit
    reusable = True  # no state of its own

    def __init__(self, settings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.progress = shared_progress(self)

    def observe(self, step: Step) -> Finding | None:
        self.progress.observe(step)  # shared: each step is counted once, whichever detector feeds it
        return None

    def finish(self) -> Finding | None:
        p = self.progress
        end = ended_after_failure(p) or gave_up(p) or ended_silently(p)
        return None if end is None else end.finding(self.code)


def ended_after_failure(p: Progress) -> Ending | None:
    """The run ended right after a failed call that it neither claimed done nor explained (see the module)."""
    turn = final_turn(p)
    if turn is None:
        return None
    last, llm = turn
    if p.error is not last or not p.answered or p.answer_claims_success() or p.error_known:
        return None
    if llm.output_preview is not None:  # the answer is known and claims nothing
        if refused(p, last) and p.explained is last:
            return None  # a change refused for good (a rule, an expired card), and the user was told why
    elif p.failed_check is last and p.write is not None:
        return None  # declared finished after the check of its change failed: FM-3.3
    elif refused(p, last):
        return None  # answer not captured: an explained refusal, a false claim or giving up, unknown which
    return Ending(0.75, p.error_basis or STRUCTURE, [last, llm],
                  f"run ended right after {last.tool} failed, without trying anything else")


def gave_up(p: Progress) -> Ending | None:
    """The run handed over to a person, giving up while the problem was still there."""
    h = handover(p)
    if h is None or h.gave_up is None:
        return None
    return Ending(0.7, CONTENT, h.evidence, f"handed over with {h.step.tool} while the problem was still there, "
                  "naming no cause it could not remove itself", quote=h.gave_up)


def ended_silently(p: Progress) -> Ending | None:
    """The run ended right after a change, saying nothing: it stopped before telling what it did."""
    end = silent_end(p)
    if end is None:
        return None
    change, llm = end
    return Ending(0.6, CONTENT, [change, llm], f"the run ended right after {change.tool}, saying nothing: it stopped "
                  "before telling what it did")
