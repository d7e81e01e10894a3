"""FM-3.1 Premature termination: the run ended before its work was done.

Signals (see `progress.ending`): the run stopped right after a tool result the model asked for and never saw
(a loop cut off); the run ended right after a failed tool call, without trying anything else. A failed check
with a success claim is FM-3.3 instead."""

from __future__ import annotations

from ..progress import EndingDetector


class PrematureTermination(EndingDetector):
    code = "FM-3.1"
