"""FM-3.3 Incorrect verification: the run declared its work done while its own evidence says otherwise.

Signals (see `progress.ending`): a final answer claiming success ("done", "fixed", "all tests pass") right after
a failed tool call, or while the check of the last change failed and was never passed (content capture on);
with content off, a run that ended right after the check of its last change failed. With content: a handover
claiming every step was done (`progress.handover`); success claimed after a change made to a record whose phone
or email is not the user's, or a figure told to the user that only such a record holds (`records`)."""

from __future__ import annotations

from ...steps import Finding, Step
from ..progress import EndingDetector
from ..records import shared_records
from ..signals import CONTENT


class IncorrectVerification(EndingDetector):
    code = "FM-3.3"
    reusable = True

    def __init__(self, settings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.records = shared_records(self)

    def observe(self, step: Step) -> Finding | None:
        self.records.observe(step)
        return super().observe(step)

    def finish(self) -> Finding | None:
        found = super().finish()
        records = self.records
        if found is None and records.wrong_write is not None and records.claimed is not None:
            record, step = records.wrong_write
            claim = records.claimed
            found = Finding(self.code, 0.7, [record.step.span_id, step.span_id, claim.span_id],
                            f"claimed success after {step.tool} changed a record whose {record.step.tool} result "
                            "names another phone or email than the user gave", CONTENT, quote=record.id)
        if found is None and records.told is not None and records.acted is not None:
            record, step = records.acted
            told, figure = records.told
            found = Finding(self.code, 0.6, [record.step.span_id, step.span_id, told.span_id],
                            f"told the user a figure of a record whose {record.step.tool} result names another phone "
                            "or email than the user gave", CONTENT, quote=f"{figure} ({record.id})")
        return found
