"""FM-1.1 Disobey task specification: a step the task's rules forbid.

Needs the rules configured: `confirm_tools` are tool patterns that must only run after the user was asked,
that is after a model call that ended its turn (no tool calls) since the run began or since the last such
tool ran. A matching call without one is a finding (structure). Off until configured: a run's task and
policy are message content that spans rarely carry whole."""

from __future__ import annotations

from ...config import TaskSpecificationSettings
from ...steps import LLM, TOOL, Finding, Step
from ..detector import Detector
from ..signals import asks_for_tools


class TaskSpecification(Detector):
    code = "FM-1.1"
    Settings = TaskSpecificationSettings
    kinds = frozenset({TOOL, LLM})
    reusable = True

    def __init__(self, settings: TaskSpecificationSettings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.begin()

    def begin(self) -> None:
        self.asked = False  # a model call ended its turn (asked the user) since the last confirmed action
        self.found: Finding | None = None

    def observe(self, step: Step) -> Finding | None:
        if step.kind is LLM:
            if step.finish_reasons and not asks_for_tools(step):
                self.asked = True
            return None
        if self.found is not None or step.tool is None or not self.settings.confirm(step.tool):
            return None
        if not self.asked:
            self.found = Finding(self.code, 0.8, [step.span_id], f"{step.tool} ran without asking the user first",
                                 "structure")
            return self.found
        self.asked = False
        return None

    def finish(self) -> Finding | None:
        return self.found
