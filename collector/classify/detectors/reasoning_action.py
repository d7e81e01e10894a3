"""FM-2.6 Reasoning-action mismatch: the model says one thing and does another.

Looks for: "I will call X" then calls Y; "I will correct it" then repeats the failed call unchanged
Basis: content
Content capture: yes

Signals: the model names the tool it will use ("I will call search_flights") and calls another one; the model
says it will change its approach ("I will correct the syntax and try again") and repeats, unchanged, the call
that just failed."""

from __future__ import annotations

from ...model.steps import LLM, TOOL, Finding, Step
from ..detector import Detector
from ..signals import stated_tool, states_change, tool_error


class ReasoningAction(Detector):
    code = "FM-2.6"
    kinds = frozenset({LLM, TOOL})
    reusable = True

    def __init__(self, settings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.begin()

    def begin(self) -> None:
        self.said: Step | None = None  # the model call whose first tool call is awaited
        self.last_tool: Step | None = None
        self.found: Finding | None = None

    def observe(self, step: Step) -> Finding | None:
        if self.found is not None:
            return None
        if step.kind is LLM:
            self.said = step if step.output_preview else None
            return None
        if step.tool is None:
            return None
        said, self.said = self.said, None
        previous, self.last_tool = self.last_tool, step
        if said is None:
            return None
        named = stated_tool(said)
        if named is not None and named != step.tool:  # a snake_case or camelCase name
            self.found = Finding(self.code, 0.75, [said.span_id, step.span_id],
                                 f"the model said it would use another tool and called {step.tool}", "content",
                                 quote=named)
        elif previous is not None and tool_error(previous) is not None and previous.tool == step.tool and \
                previous.args is not None and step.args is not None and \
                previous.args_key == step.args_key and states_change(said):
            self.found = Finding(self.code, 0.75, [previous.span_id, said.span_id, step.span_id],
                                 f"the model said it would change its approach and repeated the failed {step.tool} "
                                 "call unchanged", "content", quote=said.output_preview)
        return self.found

    def finish(self) -> Finding | None:
        return self.found
