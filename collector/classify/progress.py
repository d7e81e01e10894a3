"""Where a run stands, kept incrementally from its model and tool steps (constant work per step).

Shared by the detectors that judge how a run ends (FM-3.1, FM-3.2, FM-3.3): the last write, the checks
after it, the errors not yet resolved, whether the model saw the last tool result, and (content capture on)
how it handed over to a person and whether its last turn said anything."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..assemble import Trace
from ..steps import AGENT, LLM, TOOL, Finding, Step
from .detector import Detector, SharedState, shared
from .signals import (
    CONTENT,
    STRUCTURE,
    asks_for_tools,
    claims_all_done,
    claims_success,
    explains_failure,
    gives_up,
    hands_over,
    same_record,
    says_nothing,
    tool_error,
    transient,
    unhealthy,
)
from .tools import READ_ONLY, STATE_CHANGING, ToolClassifier


class Progress(SharedState):
    __slots__ = ("checks_after_write", "ended", "error", "error_basis", "error_known", "explained", "failed_check",
                 "failed_check_basis", "failures", "handed_over", "handover", "handover_said", "last_llm", "last_tool",
                 "limit", "llm_calls", "seen", "tool_calls", "tools", "unseen_tool", "write")

    def __init__(self, tools: ToolClassifier) -> None:
        super().__init__()
        self.tools = tools
        self.begin()

    def begin(self) -> None:
        self.last_tool: Step | None = None
        self.last_llm: Step | None = None
        self.llm_calls = 0
        self.tool_calls = 0
        self.write: Step | None = None  # the last state-changing call that succeeded
        self.checks_after_write = 0  # read-only or unknown calls since that write
        self.error: Step | None = None  # the last failed call not followed by a success of the same tool
        self.error_basis: str | None = None
        # (tool, arguments, result) of the calls that failed
        self.failures: set[tuple[str | None, str | int | None, str | int | None]] | None = None  # None: none yet
        self.error_known = False  # the last error repeats an earlier one, other calls having come between
        self.explained: Step | None = None  # the failed call a model turn after it explained to the user
        self.failed_check: Step | None = None  # a check after the last write that failed, not since passed
        self.failed_check_basis: str | None = None
        self.unseen_tool = False  # a tool result arrived after the last model call, which asked for it
        self.limit: Step | None = None  # a step stopped by the framework's limit (FM-1.5 explains the ending)
        self.seen: Step | None = None
        self.ended: tuple[Step | None, Ending | None] | None = None  # (step last seen, the ending judged then)
        self.handover: Step | None = None  # the last call handing the run over to a person
        self.handover_said: Step | None = None  # the model call asking for it, when it said why (content)
        self.handed_over: tuple[Step | None, list[Ending]] | None = None  # (step last seen, handover() then)

    def observe(self, step: Step) -> None:
        if step is self.seen:  # a detector sharing this state already fed it
            return
        self.seen = step
        if step.limit is not None:
            self.limit = step
        if step.kind is LLM:
            self.llm_calls += 1
            self.last_llm = step
            self.unseen_tool = False
            error = self.error
            if error is not None and error is self.last_tool and self.explained is not error and \
                    explains_failure(step):
                self.explained = error
        elif step.kind is TOOL:
            self._tool(step)

    def _tool(self, step: Step) -> None:
        self.tool_calls += 1
        before, self.last_tool = self.last_tool, step
        last_llm = self.last_llm
        if hands_over(step.tool):
            self.handover = step
            self.handover_said = last_llm if last_llm is not None and last_llm.said else None
        self.unseen_tool = last_llm is not None and asks_for_tools(last_llm)
        basis = tool_error(step)
        effect = self.tools.effect(step.tool)
        if basis is not None:
            key = (step.tool, step.args_key, step.result_key)
            failures = self.failures
            if failures is None:
                failures = self.failures = set()
            self.error_known = key in failures and before is not self.error  # not a retry in a row
            failures.add(key)
            self.error, self.error_basis = step, basis
            if self.write is not None and effect is not STATE_CHANGING:
                self.failed_check, self.failed_check_basis = step, basis
            return
        error = self.error
        if error is not None and (error.tool == step.tool or (effect is STATE_CHANGING and same_record(error, step))):
            self.error = self.error_basis = None  # the failed call was redone and passed, or done another way
        if effect is STATE_CHANGING:
            self.write, self.checks_after_write = step, 0
            self.failed_check = self.failed_check_basis = None
        elif self.write is not None:
            self.checks_after_write += 1
            if unhealthy(step):  # the check worked and shows the change did not
                self.failed_check, self.failed_check_basis = step, CONTENT
            elif self.failed_check is not None and self.failed_check.tool == step.tool:
                self.failed_check = self.failed_check_basis = None

    @property
    def answered(self) -> bool:
        """The run's last model call came after its last tool call and asked for no more tools."""
        llm = self.last_llm
        return llm is not None and not self.unseen_tool and not asks_for_tools(llm) and \
            (self.last_tool is None or llm.end_ns >= self.last_tool.end_ns)


class Ending(NamedTuple):
    """How a finished run ended, when it ended badly: the mode it shows and why."""

    code: str  # FM-3.1 or FM-3.3
    confidence: float
    basis: str
    evidence: list[Step]
    reason: str  # without content: see Finding
    ignored: Step | None = None  # a change that failed and that the final answer treats as done (FM-2.5 too)
    quote: str | None = None  # the content that shows it


def ending(p: Progress) -> Ending | None:
    """FM-3.1 (ended before the work was done) or FM-3.3 (declared done against its own evidence), never both;
    judged once per state (FM-2.5, FM-3.1 and FM-3.3 all ask).

    - the last tool call failed and the run ended: FM-3.3 if the final answer claims success (content) or, its
      text not captured, the failed call was the check of a change (structure); none if a change was refused for
      good (not transiently) and a model turn after it explains it to the user (the objective became impossible,
      the user may have answered since); a lookup that failed without anything else tried is still FM-3.1, as is
      any other failure; with the answer not captured, a change refused for good is left alone (explained, falsely
      claimed or given up: unknown); none either when the same failure (tool, arguments, result) was met before
      and the run went on after it;
    - a check of the last change failed (or showed the system unhealthy) and was never passed, and the final
      answer claims success: FM-3.3;
    - a call that was not a lookup failed for good earlier and was never redone, and the final answer claims
      success: FM-3.3 (a migration failed, the deploy that needs it went on, "released").
    """
    if p.ended is None or p.ended[0] is not p.seen:
        p.ended = (p.seen, _ending(p))
    return p.ended[1]


def _refused(p: Progress, step: Step) -> bool:
    """A failed call that changed, or may have changed, something and was refused for good (not transiently)."""
    return not transient(step) and p.tools.effect(step.tool) is not READ_ONLY


def _ending(p: Progress) -> Ending | None:
    last, llm = p.last_tool, p.last_llm
    if last is None or llm is None or p.limit is not None:
        return None
    if p.unseen_tool:
        return None  # the loop was stopped from outside, as a step limit does: FM-1.5
    claim = p.answered and claims_success(llm)
    if p.error is last and p.answered:
        if claim:
            ignored = last if p.failed_check is not last and _refused(p, last) else None
            return Ending("FM-3.3", 0.85, CONTENT, [last, llm], f"final answer claims success right after "
                          f"{last.tool} failed", ignored, llm.output_preview)
        if p.error_known:
            return None  # the same failure was met before and the run went on: this one stopped nothing
        refused = _refused(p, last)
        if llm.output_preview is not None:  # the answer is known and claims nothing
            if refused and p.explained is last:
                return None  # a change refused for good (a rule, an expired card), and the user was told why
        elif p.failed_check is last and p.write is not None:
            return Ending("FM-3.3", 0.6, p.error_basis or STRUCTURE, [p.write, last, llm],
                          f"run declared finished after its check {last.tool} of {p.write.tool} failed")
        elif refused:
            return None  # answer not captured: an explained refusal, a false claim or giving up, unknown which
        return Ending("FM-3.1", 0.75, p.error_basis or STRUCTURE, [last, llm],
                      f"run ended right after {last.tool} failed, without trying anything else")
    if claim and p.failed_check is not None and p.write is not None:
        return Ending("FM-3.3", 0.8, CONTENT, [p.write, p.failed_check, llm],
                      f"final answer claims success while the check {p.failed_check.tool} of {p.write.tool} failed")
    error = p.error
    if claim and error is not None and _refused(p, error) and p.explained is not error and not explains_failure(llm):
        return Ending("FM-3.3", 0.7, CONTENT, [error, llm],
                      f"final answer claims success while {error.tool} failed and was never redone", error)
    return None


def handover(p: Progress) -> list[Ending]:
    """How a run handed over to a person ended it (content capture on: the handover's arguments and what the model
    said when asking for it): FM-3.1 when it gave up, the reason saying the problem is still there without naming
    a cause the agent cannot remove (a rule, a locked account), and FM-3.2 with it (it concluded without the checks
    that would find the cause); FM-3.3 when it claims every step was done, a check nobody can see and the reason
    to hand over contradicts. Only a handover that is the run's last tool call counts."""
    if p.handed_over is None or p.handed_over[0] is not p.seen:
        p.handed_over = (p.seen, _handover(p))
    return p.handed_over[1]


def _handover(p: Progress) -> list[Ending]:
    step = p.handover
    if step is None or step is not p.last_tool or p.limit is not None:
        return []
    said = p.handover_said
    reason = step.args_text or ""
    if said is not None and said.said:
        reason = f"{said.said}\n{reason}"
    evidence = [step] if said is None else [said, step]
    out = []
    if reason and (words := gives_up(reason)) is not None:
        out.append(Ending("FM-3.1", 0.7, CONTENT, evidence, f"handed over with {step.tool} while the problem was "
                          "still there, naming no cause it could not remove itself", quote=words))
        out.append(Ending("FM-3.2", 0.6, CONTENT, evidence, f"handed over with {step.tool} without finding what "
                          "causes the problem: the reason names no cause"))
    if reason and (claim := claims_all_done(reason)) is not None:
        out.append(Ending("FM-3.3", 0.7, CONTENT, evidence, f"handed over with {step.tool} claiming every step was "
                          "done while the problem was still there", quote=claim))
    return out


_SILENT_REASONS = {"FM-3.1": "it stopped before telling what it did",
                   "FM-3.2": "the change was neither checked nor reported"}


def silent_end(p: Progress, code: str) -> Ending | None:
    """A run that ended right after a change that worked, its last model turn saying nothing to anyone (a bare
    stop token; content capture on): the change was neither checked nor reported (FM-3.2), and the run stopped
    before telling what it did (FM-3.1). Not after a handover or a tool that ends a run by design."""
    last, llm = p.last_tool, p.last_llm
    if last is None or llm is None or llm.said is None or p.limit is not None or p.unseen_tool or \
            last is not p.write or llm.end_ns < last.end_ns or hands_over(last.tool) or p.tools.is_final(last.tool):
        return None
    if not says_nothing(llm.said):
        return None
    return Ending(code, 0.6, CONTENT, [last, llm], f"the run ended right after {last.tool}, saying nothing: "
                  f"{_SILENT_REASONS[code]}")


def conversation_ending(p: Progress, code: str) -> Ending | None:
    """The ending of mode `code` that how the run handed over, or its silent last turn, shows (content capture on)."""
    end = next((h for h in handover(p) if h.code == code), None)
    if end is None and code in _SILENT_REASONS:
        end = silent_end(p, code)
    return end


def shared_progress(detector: Detector) -> Progress:
    """The trace's Progress, shared by the detectors that judge its ending."""
    return shared(detector, "progress", lambda: Progress(detector.tools))


class EndingDetector(Detector):
    """A detector judging how the run ended (FM-3.1 and FM-3.3 subclass it with their code; FM-3.3 also reads
    `records`: success claimed for a change made to someone else's record)."""

    kinds = frozenset({TOOL, LLM, AGENT})  # agent spans: limits hit
    reusable = True  # no state of its own

    def __init__(self, settings: Any, trace: Trace, tools: ToolClassifier | None = None) -> None:
        super().__init__(settings, trace, tools)
        self.progress = shared_progress(self)

    def observe(self, step: Step) -> Finding | None:
        self.progress.observe(step)  # shared: each step is counted once, whichever detector feeds it
        return None

    def finish(self) -> Finding | None:
        end = ending(self.progress)
        if end is None or end.code != self.code:
            end = conversation_ending(self.progress, self.code)
            if end is None:
                return None
        return Finding(self.code, end.confidence, [s.span_id for s in end.evidence], end.reason, end.basis,
                       quote=end.quote)
