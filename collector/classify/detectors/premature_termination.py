"""FM-3.1 Premature termination: the run ended before its work was done.

Signal (see `progress.ending`): the run ended right after a failed tool call, without trying anything else
(structure when the failure is in the span's status or error type, content when only its result text shows it).
A failed call followed by a success claim, or a failed check of a change, is FM-3.3 instead; a run stopped
before the model saw the last tool result is FM-1.5 (stopped from outside, as by a step limit). With content: a
handover to a person giving up (`progress.handover`); a run that ended right after a change saying nothing
(`progress.silent_end`)."""

from __future__ import annotations

from ..progress import EndingDetector


class PrematureTermination(EndingDetector):
    code = "FM-3.1"
    reusable = True
