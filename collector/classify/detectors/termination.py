"""FM-1.5 Unaware of termination conditions: the run went on until a limit stopped it.

Looks for: framework limit errors (`GraphRecursionError`, `MaxTurnsExceeded`...); a run stopped before the model
  saw the tool result it asked for; "stopped due to iteration limit" texts
Basis: structure; content for the texts
Content capture: no, but for the texts

Signals:
- a step that failed with a framework's limit error (LangGraph `GraphRecursionError`, OpenAI Agents SDK
  `MaxTurnsExceeded`, smolagents `AgentMaxStepsError`, pydantic-ai `UsageLimitExceeded`...), as `error.type`, a
  recorded exception or its message (structure); found as soon as it is seen;
- a framework's "stopped at the limit" text in a final model output (CrewAI and LangChain "Agent stopped due to
  iteration limit", LlamaIndex "Reached max iterations"...; content, `limit_texts`);
- when the trace is complete: the model asked for a tool and never saw its result, the run having stopped right
  after the tool returned: the loop was stopped from outside, as a step or turn limit does (structure,
  `cut_off`); tools that end a run by design (`processor.tools.final`) excepted."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ...config import DetectorSettings
from ...model.steps import AGENT, LLM, TOOL, Finding, Step
from ..detector import Detector
from ..signals import CONTENT, STRUCTURE, asks_for_tools, limit_text


class TerminationSettings(DetectorSettings):
    """`processor.detectors."FM-1.5"` (fields annotated as strings: see DetectorSettings)."""

    limit_texts: ("Annotated[bool, Field(description='also read the messages frameworks write when "
                  "they stop a run at its limit, in final model outputs (content)')]") = True
    cut_off: ("Annotated[bool, Field(description='a run stopped before the model saw the tool result it asked for "
              "counts as stopped by a limit')]") = True


class Termination(Detector):
    code = "FM-1.5"
    Settings = TerminationSettings
    kinds = frozenset({LLM, TOOL, AGENT})  # limits are raised by any of these
    reusable = True

    def __init__(self, settings: TerminationSettings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.limit_texts: bool = settings.limit_texts  # read on every final model output
        self.begin()

    def begin(self) -> None:
        self.found: Finding | None = None
        self.asked: Step | None = None  # the last model call, when it asked for tools
        self.unseen: Step | None = None  # a tool result that came after it, no model call since

    def observe(self, step: Step) -> Finding | None:
        kind = step.kind
        final_output = False
        if kind is LLM:
            final_output = not asks_for_tools(step)
            self.asked = None if final_output else step
            self.unseen = None
        elif kind is TOOL and self.asked is not None:
            self.unseen = step
        if self.found is not None and self.found.basis == STRUCTURE:
            return None
        if step.limit is not None:
            self.found = Finding(self.code, 0.95, [step.span_id], f"{step.name} stopped by the framework's limit "
                                 f"({step.limit})", STRUCTURE)
            return self.found
        if final_output and self.found is None and self.limit_texts and limit_text(step):
            self.found = Finding(self.code, 0.85, [step.span_id], f"{step.name} reports a limit hit", CONTENT,
                                 quote=step.output_preview)
            return self.found
        return None

    def finish(self) -> Finding | None:
        tool, asked = self.unseen, self.asked
        if self.found is None and self.settings.cut_off and tool is not None and asked is not None \
                and not self.tools.is_final(tool.tool):
            self.found = Finding(self.code, 0.6, [asked.span_id, tool.span_id],
                                 f"run stopped right after {tool.tool} returned: the model that asked for it never "
                                 "saw the result (stopped from outside, as by a step limit)", STRUCTURE)
        return self.found
