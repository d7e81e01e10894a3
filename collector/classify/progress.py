"""Where a run stands, kept incrementally from its model and tool steps (constant work per step), and what the
detectors judging how a run ended read from it once the trace is complete. Each of those detectors (FM-2.5,
FM-3.1, FM-3.2, FM-3.3) states its own rule in its module; this module holds what they share:

- `Progress`, fed by each of them (`shared_progress`: one per trace, each step counted once): the last write and
  the checks after it, the errors not yet resolved, whether the model saw the last tool result, and (content
  capture on) how the run handed over to a person and whether it told the user a refused change could be done
  later;
- `final_turn`: the run's last tool call and last model call, when the run ended on its own, after the model saw
  what its tools returned; `refused`: a failed call that changed, or may have changed, something, refused for good;
- `handover`: the handover to a person that ended the run, the reason it gave and whether that gives up or claims
  every step done; `Progress.answer_claims_success`: whether the final answer claims success (both read once per
  state: several detectors ask); `silent_end`: a run that ended right after a change, saying nothing;
- `Ending`: what such a rule finds, made a `Finding` under its detector's code."""

from __future__ import annotations

from ..model.steps import LLM, TOOL, Finding, Step
from .detector import Detector, SharedState, shared
from .signals import (
    CONTENT,
    asks_for_tools,
    claims_all_done,
    claims_success,
    defers,
    explains_failure,
    gives_up,
    hands_over,
    refused_for_state,
    same_record,
    says_nothing,
    tool_error,
    transient,
    unhealthy,
)
from .tools import READ_ONLY, STATE_CHANGING, ToolClassifier


class Progress(SharedState):
    __slots__ = ("checks_after_write", "claimed", "deferred", "deferred_by", "deferred_words", "error", "error_basis",
                 "error_known", "explained", "failed_check", "failed_check_basis", "failures", "handed_over",
                 "handover", "handover_said", "last_llm", "last_tool", "limit", "llm_calls", "seen", "tool_calls",
                 "tools", "unseen_tool", "write")

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
        self.deferred: Step | None = None  # a failed change a model turn after it told the user could be done later
        self.deferred_by: Step | None = None  # that model turn, and the words saying so
        self.deferred_words: str | None = None
        self.failed_check: Step | None = None  # a check after the last write that failed, not since passed
        self.failed_check_basis: str | None = None
        self.unseen_tool = False  # a tool result arrived after the last model call, which asked for it
        self.limit: Step | None = None  # a step stopped by the framework's limit (FM-1.5 explains the ending)
        self.seen: Step | None = None
        self.handover: Step | None = None  # the last call handing the run over to a person
        self.handover_said: Step | None = None  # the model call asking for it, when it said why (content)
        # what the rules of several detectors read, judged once per state: (step last seen, the answer then)
        self.claimed: tuple[Step | None, bool] | None = None  # answer_claims_success()
        self.handed_over: tuple[Step | None, Handover | None] | None = None  # handover()

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
            if error is not None and self.deferred is not error and (words := defers(step)) is not None and \
                    refused(self, error) and refused_for_state(error):
                self.deferred, self.deferred_by, self.deferred_words = error, step, words
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

    def answer_claims_success(self) -> bool:
        """The run's final answer (see `answered`) claims success (content capture on)."""
        if self.claimed is None or self.claimed[0] is not self.seen:
            llm = self.last_llm
            self.claimed = (self.seen, self.answered and llm is not None and claims_success(llm))
        return self.claimed[1]

    @property
    def answered(self) -> bool:
        """The run's last model call came after its last tool call and asked for no more tools."""
        llm = self.last_llm
        return llm is not None and not self.unseen_tool and not asks_for_tools(llm) and \
            (self.last_tool is None or llm.end_ns >= self.last_tool.end_ns)


def shared_progress(detector: Detector) -> Progress:
    """The trace's Progress, shared by the detectors that judge its ending."""
    return shared(detector, "progress", lambda: Progress(detector.tools))


def final_turn(p: Progress) -> tuple[Step, Step] | None:
    """The run's last tool call and last model call, when it ended on its own: no framework limit stopped it, and
    the model saw the last tool result it asked for (a run stopped from outside, as by a step limit, is FM-1.5's)."""
    last, llm = p.last_tool, p.last_llm
    if last is None or llm is None or p.limit is not None or p.unseen_tool:
        return None
    return last, llm


def refused(p: Progress, step: Step) -> bool:
    """A failed call that changed, or may have changed, something and was refused for good (not transiently)."""
    return not transient(step) and p.tools.effect(step.tool) is not READ_ONLY


class Handover:
    """The handover to a person that ended a run, and how its reason reads."""

    def __init__(self, step: Step, evidence: list[Step], reason: str) -> None:
        self.step = step  # the call handing the run over
        self.evidence = evidence  # the model call asking for it when it said why, then the call
        self.reason = reason  # what that model call said, then the call's arguments
        self.gave_up = gives_up(reason)  # the words saying the problem is still there, naming no cause
        self.claimed_done = claims_all_done(reason)  # the words claiming every step was done


def handover(p: Progress) -> Handover | None:
    """The handover to a person that ended the run (its last tool call; content capture on), with the reason it
    gave: what the model said when asking for it and the handover's arguments. FM-3.1 and FM-3.2 read whether it
    gave up, FM-3.3 whether it claimed every step was done (read once per state)."""
    if p.handed_over is None or p.handed_over[0] is not p.seen:
        p.handed_over = (p.seen, _handover(p))
    return p.handed_over[1]


def _handover(p: Progress) -> Handover | None:
    step = p.handover
    if step is None or step is not p.last_tool or p.limit is not None:
        return None
    said = p.handover_said
    reason = step.args_text or ""
    if said is not None and said.said:
        reason = f"{said.said}\n{reason}"
    if not reason:
        return None
    return Handover(step, [step] if said is None else [said, step], reason)


def silent_end(p: Progress) -> tuple[Step, Step] | None:
    """The change and the model turn of a run that ended right after a change that worked, its last model turn
    saying nothing to anyone (a bare stop token; content capture on). Not after a handover or a tool that ends a run
    by design."""
    last, llm = p.last_tool, p.last_llm
    if last is None or llm is None or llm.said is None or p.limit is not None or p.unseen_tool or \
            last is not p.write or llm.end_ns < last.end_ns or hands_over(last.tool) or p.tools.is_final(last.tool):
        return None
    return (last, llm) if says_nothing(llm.said) else None


class Ending:
    """How a finished run ended badly, as a detector's rule finds it."""

    def __init__(self, confidence: float, basis: str, evidence: list[Step], reason: str, ignored: Step | None = None,
                 quote: str | None = None) -> None:
        self.confidence, self.basis, self.evidence, self.reason = confidence, basis, evidence, reason
        self.ignored = ignored  # a change refused for good that the final answer treats as done (FM-2.5 too)
        self.quote = quote  # the content that shows it

    def finding(self, code: str) -> Finding:
        return Finding(code, self.confidence, [s.span_id for s in self.evidence], self.reason, self.basis,
                       quote=self.quote)
