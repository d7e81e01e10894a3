"""FM-1.5 Unaware of termination conditions: the run went on until a limit stopped it.

Signals: a step that failed with a framework's limit error (LangGraph GraphRecursionError, OpenAI Agents SDK
MaxTurnsExceeded, smolagents AgentMaxStepsError, pydantic-ai UsageLimitExceeded, ...: `Step.limit`, structure);
a framework's "stopped at the limit" text in a model output or tool result (CrewAI and LangChain "Agent stopped
due to iteration limit", LlamaIndex "Reached max iterations", ...: content). Fires as soon as it is seen."""

from __future__ import annotations

from pydantic import Field

from ...steps import Finding, Step
from ..detector import Detector, DetectorSettings
from ..signals import CONTENT, STRUCTURE, limit_text


class TerminationSettings(DetectorSettings):
    limit_texts: bool = Field(True, description="also read frameworks' limit messages in captured content")


class Termination(Detector):
    code = "FM-1.5"
    Settings = TerminationSettings

    def __init__(self, settings: TerminationSettings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.found: Finding | None = None

    def observe(self, step: Step) -> Finding | None:
        if self.found is not None and self.found.basis == STRUCTURE:
            return None
        if step.limit is not None:
            self.found = Finding(self.code, 0.95, [step.span_id], f"{step.name} stopped by the framework's limit "
                                 f"({step.limit})", STRUCTURE)
            return self.found
        if self.found is None and self.settings.limit_texts and (step.output_preview or step.result is not None) \
                and limit_text(step):
            text = step.output_preview or (step.result.preview if step.result is not None else "")
            self.found = Finding(self.code, 0.85, [step.span_id], f"{step.name} reports a limit hit: {text!r}",
                                 CONTENT)
            return self.found
        return None

    def finish(self) -> Finding | None:
        return self.found
