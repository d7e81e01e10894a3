"""FM-2.4 Information withholding: the run kept from the user a warning its tools gave it.

Looks for: a tool result that warns (`warning`, `caution`, `deprecated`) while the final answer passes none of it on
Basis: content
Content capture: yes: tool results and the final answer

Judged when the trace is complete: a tool result holding one of `words` (content capture on), and the run's last
model turn, its answer to the user, holding none of them.

A detector added from outside mastwatch, as a package would add one: this module, declared under the
`mastwatch.detectors` entry point group (`tests/test_plugin.py` installs it that way), holds the rule, its settings
and this description."""

from __future__ import annotations

import re

from pydantic import Field

from mastwatch.collector.classify.detector import Detector
from mastwatch.collector.config import DetectorSettings
from mastwatch.collector.model.steps import LLM, TOOL, Finding, Step


class WithholdingSettings(DetectorSettings):
    words: list[str] = Field(default_factory=lambda: ["warning", "caution", "deprecated"], min_length=1,
                             description="words that make a tool result a warning (case ignored)")


class Withholding(Detector):
    code = "FM-2.4"
    Settings = WithholdingSettings
    kinds = frozenset({LLM, TOOL})

    def __init__(self, settings: WithholdingSettings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.words = re.compile("|".join(re.escape(w) for w in settings.words), re.IGNORECASE)
        self.warning: Step | None = None  # the first tool result that warned
        self.answer: Step | None = None  # the last model turn

    def observe(self, step: Step) -> Finding | None:
        if step.kind is TOOL:
            if self.warning is None and step.result_text and self.words.search(step.result_text):
                self.warning = step
        else:
            self.answer = step
        return None

    def finish(self) -> Finding | None:
        warning, answer = self.warning, self.answer
        if warning is None or answer is None or answer.end_ns < warning.end_ns or not answer.said or \
                self.words.search(answer.said):
            return None
        return Finding(self.code, 0.6, [warning.span_id, answer.span_id], f"{warning.tool} warned and the final "
                       "answer does not pass it on", "content")
