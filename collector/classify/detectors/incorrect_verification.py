"""FM-3.3 Incorrect verification: the run declared its work done while its own evidence says otherwise.

Signals (see `progress.ending`): a final answer claiming success ("done", "fixed", "all tests pass") right after
a failed tool call, or while the check of the last change failed and was never passed (content capture on);
with content off, a run that ended right after the check of its last change failed."""

from __future__ import annotations

from ..progress import EndingDetector


class IncorrectVerification(EndingDetector):
    code = "FM-3.3"
    reusable = True
