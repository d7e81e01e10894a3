"""FM-3.3 Incorrect verification: the run declared its work done while its own evidence says otherwise.

Looks for: a success claim after a failed call, a failed check or a refused change; a refused change told to be
  possible later; a handover claiming every step was done; a figure or status of someone else's record told to the
  user as theirs
Basis: content; structure for a failed last check
Content capture: yes (without it: only a run that ended right after the check of its last change failed)

Judged when the trace is complete:
- a final answer claiming success ("done", "fixed", "all tests pass") right after a failed tool call (content);
  with content off, a run that ended right after the check of its last change failed (structure);
- a final answer claiming success while the check of the last change failed, or showed the system unhealthy, and
  was never passed since (content);
- a final answer claiming success while a change refused for good was never redone, nor done another way on the
  same record, nor explained to the user (a migration failed, the deploy that needs it went on, "released";
  content);
- a run that ended, without handing over, after telling the user that a change refused for the state its record
  was in (the refusal names it: "must be suspended", "Non-delivered order cannot be exchanged"; not transiently)
  could be done later ("once your order is delivered, just let me know and we can process the exchange"), the change
  never redone nor done another way on the same record: the agent tried it, so it read the rules as allowing it now,
  and the "later" is its own reading of the refusal (content). Not a refusal for a cause the user can remove (an
  expired card: "once your card is updated, I'll complete it");
- a handover to a person claiming every step was done while the problem was still there, naming no cause the agent
  could not remove (a locked SIM, an expired contract; content);
- success claimed after a change made to a record whose phone or email is not the one the user gave, or a figure
  told to the user that only such a record holds, whether or not the run called on it after its lookup, or its
  status told as that of the user's record of its kind ("your line appears active"; content).

A claim made on a condition ("once your return is completed") is none, nor is one in an answer telling the user
that something could not be done, or after the failed call was explained to the user.

A run stopped before the model saw the last tool result is FM-1.5's (stopped from outside, as by a step limit)."""

from __future__ import annotations

from ...model.steps import AGENT, LLM, TOOL, Finding, Step
from ..detector import Detector
from ..progress import Ending, Progress, final_turn, handover, refused, shared_progress
from ..records import Records, shared_records
from ..signals import CONTENT, STRUCTURE, explains_failure, hands_over


class IncorrectVerification(Detector):
    code = "FM-3.3"
    kinds = frozenset({TOOL, LLM, AGENT})  # agent spans: limits hit
    reusable = True  # no state of its own

    def __init__(self, settings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.progress = shared_progress(self)
        self.records = shared_records(self)

    def observe(self, step: Step) -> Finding | None:
        self.records.observe(step)  # both shared: each step is counted once, whichever detector feeds it
        self.progress.observe(step)
        return None

    def finish(self) -> Finding | None:
        p = self.progress
        end = false_claim(p) or handed_over_as_done(p) or deferred_refusal(p)
        if end is not None:
            return end.finding(self.code)
        return self._on_someone_elses_record(self.records)

    def _on_someone_elses_record(self, records: Records) -> Finding | None:
        if records.wrong_write is not None and records.claimed is not None:
            record, step = records.wrong_write
            claim = records.claimed
            return Finding(self.code, 0.7, [record.step.span_id, step.span_id, claim.span_id],
                           f"claimed success after {step.tool} changed a record whose {record.step.tool} result "
                           "names another phone or email than the user gave", CONTENT, quote=record.id)
        return records.told_wrong_record(self.code)


def false_claim(p: Progress) -> Ending | None:
    """The final answer (or, content off, the run's end) declaring done what the run's last failure, failed check
    or refused change contradicts (see the module). Its `ignored` is the change refused for good that the answer
    treats as done, which FM-2.5 reports too."""
    turn = final_turn(p)
    if turn is None:
        return None
    last, llm = turn
    claim = p.answer_claims_success() and not explains_failure(llm)  # a claim beside the failure told is no claim
    if p.error is last and p.answered:
        if claim and p.explained is not last:
            ignored = last if p.failed_check is not last and refused(p, last) else None
            return Ending(0.85, CONTENT, [last, llm], f"final answer claims success right after {last.tool} failed",
                          ignored, llm.output_preview)
        if not p.error_known and llm.output_preview is None and p.failed_check is last and p.write is not None:
            return Ending(0.6, p.error_basis or STRUCTURE, [p.write, last, llm],
                          f"run declared finished after its check {last.tool} of {p.write.tool} failed")
        return None
    if claim and p.failed_check is not None and p.write is not None:
        return Ending(0.8, CONTENT, [p.write, p.failed_check, llm],
                      f"final answer claims success while the check {p.failed_check.tool} of {p.write.tool} failed")
    error = p.error
    if claim and error is not None and refused(p, error) and p.explained is not error:
        return Ending(0.7, CONTENT, [error, llm], f"final answer claims success while {error.tool} failed and was "
                      "never redone", error)
    return None


def handed_over_as_done(p: Progress) -> Ending | None:
    """The run handed over to a person claiming every step was done, while the problem was still there."""
    h = handover(p)
    if h is None or h.claimed_done is None:
        return None
    return Ending(0.7, CONTENT, h.evidence, f"handed over with {h.step.tool} claiming every step was done while the "
                  "problem was still there", quote=h.claimed_done)


def deferred_refusal(p: Progress) -> Ending | None:
    """The run ended, without handing over, after telling the user that a change refused for the state its record was
    in could be done later, the change never redone nor done another way on the same record."""
    turn = final_turn(p)
    error, said = p.error, p.deferred_by
    if turn is None or error is None or p.deferred is not error or said is None or hands_over(turn[0].tool):
        return None
    llm = turn[1]
    evidence = [error, said] if said is llm else [error, said, llm]
    return Ending(0.65, CONTENT, evidence, f"told the user the change {error.tool} refused for its record's state "
                  "could be done later, and ended without redoing it, doing it another way or handing over",
                  quote=p.deferred_words)
