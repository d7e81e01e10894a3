"""FM-1.2 Disobey role specification: an agent uses a tool outside its role.

Looks for: a tool call outside the agent's configured `roles` (off by default)
Basis: structure
Content capture: no

`roles` maps agent name patterns to the tool patterns each may use; a tool call by a matching agent outside its
patterns is a finding (structure). Off until roles are configured: the tool definitions given to a model are not
read from spans."""

from __future__ import annotations

import fnmatch
from typing import Annotated

from pydantic import Field

from ...config import DetectorSettings
from ...model.steps import LLM, TOOL, Finding, Step
from ..detector import Detector


class RoleSettings(DetectorSettings):
    """`processor.detectors."FM-1.2"` (fields annotated as strings: see DetectorSettings)."""

    enabled: "Annotated[bool, Field(description='run this detector: off until `roles` are configured')]" = False
    roles: ("Annotated[dict[str, list[str]], Field(default_factory=dict, description='agent name pattern -> the tool "
            "patterns it may use, e.g. `{triage-*: [get_*, search_*]}`')]")


class Role(Detector):
    code = "FM-1.2"
    Settings = RoleSettings
    kinds = frozenset({TOOL, LLM})
    reusable = True

    def __init__(self, settings: RoleSettings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.begin()

    def begin(self) -> None:
        self.agent: str | None = None  # of the last model call, for tool spans that do not name their agent
        self.found: Finding | None = None

    def observe(self, step: Step) -> Finding | None:
        if step.kind is LLM:
            self.agent = step.agent or self.agent
            return None
        agent = step.agent or self.agent
        if self.found is not None or agent is None or step.tool is None:
            return None
        for pattern, allowed in self.settings.roles.items():
            if fnmatch.fnmatchcase(agent, pattern):
                if not any(fnmatch.fnmatchcase(step.tool, p) for p in allowed):
                    self.found = Finding(self.code, 0.9, [step.span_id],
                                         f"{agent} called {step.tool}, outside its role ({pattern}: "
                                         f"{', '.join(allowed)})", "structure")
                    return self.found
                return None
        return None

    def finish(self) -> Finding | None:
        return self.found
