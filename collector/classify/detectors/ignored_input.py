"""FM-2.5 Ignored other agent's input: a tool said no and the agent went on as if it had said yes.

Looks for: a failed state-changing call followed by a different one; a failed call sent again unchanged; a refused
  change treated as done; a call on a record that is not the user's, or on one only it names; a change tried against
  the state its record was shown in
Basis: structure or content
Content capture: for failures shown only in result text, and for records

Signals:
- a state-changing call failed (not transiently, as a timeout does) and the next tool call is a different
  state-changing call: neither a retry, nor a look at what went wrong. Structure when the failure is in the span's
  status or error type, content when only the result text shows it. Not when a model turn between them told the
  user it could not be done, or ended its turn without asking for tools (it answered the user, whose next request
  the change may be), or the user spoke between them, nor when the next call changed the same record and worked
  (the change done another way; content);
- a call that failed for a cause a retry does not cure, sent again as the very next call with the same arguments, and
  answered with the same failure: the agent did not read what the error said ("Wrong flag!", "DO NOT re-run the same
  failed edit command"). Not when the user spoke in between (they may have changed what failed: "I've updated my
  card, try again"; content);
- the final answer treats as done a change refused for good (as FM-3.3 finds it; content);
- a call on a record whose phone or email is not the one the user gave, after the lookup that showed it, or a
  figure only that record holds told to the user (the agent disregarded who the user said they are; content);
- a call on a record named by such a record (its device, its plan), named by none of the user's own records;
- the status of such a record told to the user as that of their record of its kind ("your line appears active");
  none of these when the run had read the user's own record of that kind (it chose the other one; content);
- a change refused, for the state it names, on a record the run had just read: its status was there to see. Not when
  the next change was the same record's, made another way and not refused for its state (heeded; content)."""

from __future__ import annotations

from ...model.steps import AGENT, LLM, TOOL, Finding, Step
from ..detector import Detector
from ..progress import shared_progress
from ..records import shared_records
from ..signals import CONTENT, asks_for_tools, explains_failure, same_record, tool_error, transient
from ..tools import STATE_CHANGING
from .incorrect_verification import false_claim


def _resent(failed: Step, step: Step) -> bool:
    """The same call as a failed one, answered the same way (arguments and results captured)."""
    if step.tool != failed.tool or failed.args is None or step.args is None or step.args.key != failed.args.key:
        return False
    if step.result is not None and failed.result is not None:
        return step.result.key == failed.result.key
    return step.result is None and failed.result is None and step.error_message == failed.error_message


class IgnoredInput(Detector):
    code = "FM-2.5"
    kinds = frozenset({TOOL, LLM, AGENT})  # the ending: model answers, limits hit
    reusable = True

    def __init__(self, settings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.progress = shared_progress(self)
        self.records = shared_records(self)
        self.begin()

    def begin(self) -> None:
        self.failed: Step | None = None  # the last call, when it was a write that failed
        self.failure: Step | None = None  # the last call, when it failed for good with its arguments captured
        self.basis: str | None = None
        self.found: Finding | None = None

    def observe(self, step: Step) -> Finding | None:
        self.progress.observe(step)
        self.records.observe(step)
        if self.found is not None:
            return None
        if step.tool is None:
            if self.failed is not None and step.kind is LLM and (
                    explains_failure(step) or step.user_text or (step.finish_reasons and not asks_for_tools(step))):
                # the user was told it could not be done, or spoke since, or was answered in words we may not read:
                # a change that follows is theirs to ask for
                self.failed = None
            if step.user_text:
                self.failure = None
            return None
        failed, self.failed = self.failed, None
        failure, self.failure = self.failure, None
        if tool_error(step) is not None and step.args is not None and not transient(step):
            if failure is not None and _resent(failure, step):
                self.found = Finding(self.code, 0.7, [failure.span_id, step.span_id], f"{step.tool} failed and was "
                                     "sent again with the same arguments, and failed the same way", CONTENT,
                                     quote=step.result.text if step.result is not None else step.error_message)
                return self.found
            self.failure = step
        writes = self.tools.effect(step.tool) is STATE_CHANGING
        if failed is not None and writes and step.tool != failed.tool and not self.tools.is_final(step.tool) and \
                not (tool_error(step) is None and same_record(failed, step)):  # done another way
            self.found = Finding(self.code, 0.7, [failed.span_id, step.span_id],
                                 f"{failed.tool} failed and the agent went on to {step.tool} as if it had worked",
                                 self.basis or "structure")
            return self.found
        if writes and not self.tools.is_final(step.tool):  # a rejected submit is answered by more work
            basis = tool_error(step)
            if basis is not None and not transient(step):
                self.failed, self.basis = step, basis
        return None

    def finish(self) -> Finding | None:
        if self.found is not None:
            return self.found
        records = self.records
        if records.acted is not None:
            record, step = records.acted
            used = "a record named by a record" if records.linked else "a record"
            return Finding(self.code, 0.7, [record.step.span_id, step.span_id], f"{step.tool} used {used} whose "
                           f"{record.step.tool} result names another phone or email than the user gave", CONTENT,
                           quote=record.id)
        told = records.told_wrong_record(self.code)
        if told is not None:
            return told
        refusal = records.ignored_refusal()
        if refusal is not None:
            record, step = refusal
            status = f", status {record.status}" if record.status else ""
            return Finding(self.code, 0.6, [record.step.span_id, step.span_id], f"{step.tool} was refused although "
                           f"{record.step.tool} had just shown the record's state", CONTENT,
                           quote=f"{record.id}{status}")
        end = false_claim(self.progress)  # FM-3.3's, when the change it treats as done was refused for good
        if end is None or end.ignored is None:
            return None
        answer = end.evidence[-1]
        return Finding(self.code, 0.7, [end.ignored.span_id, answer.span_id], f"{end.ignored.tool} failed and the "
                       "final answer treats it as done", CONTENT, quote=answer.output_preview)
