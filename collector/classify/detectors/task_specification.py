"""FM-1.1 Disobey task specification: a step the task's rules forbid.

Looks for: the rules the agent's instructions state (one tool call at a time, explicit confirmation before a
  change); tools in `confirm_tools` called before the user was asked; a change made to someone else's record
Basis: content; structure for `confirm_tools`
Content capture: yes, but for `confirm_tools`

The rules come from two places:
- the agent's own instructions (`gen_ai.system_instructions`; content): "one tool call at a time" is broken by a
  model turn asking for several tool calls at once; "explicit confirmation before acting" by a state-changing call
  when the user has not said yes (or confirm, go ahead, proceed) since the last state-changing call (judged only in
  runs whose users' turns are captured);
- `confirm_tools`, tool patterns you configure that must only run after the user was asked, that is after a model
  call that ended its turn (no tool calls) since the run began or since the last such tool ran (structure).

Whatever the instructions say, a change that worked on a record whose lookup named another phone or email than the
user gave (someone else's line or account; not when the run had read the user's own record of that kind) did
other than the user asked (content; FM-2.5 reports the lookup disregarded). Otherwise a run whose instructions
state neither rule, with no `confirm_tools`, is never flagged."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated, ClassVar, Final

from pydantic import Field

from ...config import DetectorSettings
from ...model.steps import LLM, TOOL, Finding, Step
from ...normalize.instructions import CONFIRM_FIRST, ONE_CALL_AT_A_TIME
from ..detector import Detector
from ..records import shared_records
from ..signals import CONTENT, STRUCTURE, asks_for_tools, hands_over
from ..tools import STATE_CHANGING, Globs

# A user's turn saying yes to what the agent proposed.
_AFFIRMS: Final = re.compile(
    r"\b(yes|yeah|yep|confirm(ed)?|go ahead|proceed|please do|do it|sounds good|that'?s (right|correct)|correct|"
    r"sure|ok(ay)?|agreed?|i agree|approved?)\b", re.IGNORECASE)


def _confirm(settings: TaskSpecificationSettings) -> Globs:
    return Globs(settings.confirm_tools)


class TaskSpecificationSettings(DetectorSettings):
    """`processor.detectors."FM-1.1"` (fields annotated as strings: see DetectorSettings)."""

    confirm_tools: ("Annotated[list[str], Field(default_factory=list, description='tool patterns that may only run "
                    "after a model turn asked the user, e.g. `[refund_*, delete_*]`')]")

    # made once per settings, shared by the detectors of every trace (see DetectorSettings)
    confirm: "ClassVar[cached_property[Globs]]" = cached_property(_confirm)


class TaskSpecification(Detector):
    code = "FM-1.1"
    Settings = TaskSpecificationSettings
    kinds = frozenset({TOOL, LLM})
    reusable = True

    def __init__(self, settings: TaskSpecificationSettings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.configured = bool(settings.confirm_tools)  # tool patterns to judge by, whatever the instructions
        self.records = shared_records(self)
        self.begin()

    def begin(self) -> None:
        self.asked = False  # a model call ended its turn (asked the user) since the last confirmed action
        self.rules = 0  # the rules the agent's instructions state, as last seen
        self.affirmed = False  # the user said yes since the last state-changing call
        self.heard = False  # a user's turn was read: without any, a yes could not be seen either
        self.caller: Step | None = None  # the model call whose tool calls are arriving
        self.found: Finding | None = None

    def observe(self, step: Step) -> Finding | None:
        self.records.observe(step)  # shared: each step is counted once, whichever detector feeds it
        if self.found is not None:
            return None
        if step.kind is LLM:
            if step.rules:
                self.rules = step.rules
            elif not self.rules and not self.configured:
                return None  # no rule to judge by (yet): most runs, and every run without content
            if self.rules & CONFIRM_FIRST and step.user_text is not None:
                self.heard = True
                if _AFFIRMS.search(step.user_text):
                    self.affirmed = True
            if step.finish_reasons and not asks_for_tools(step):
                self.asked = True
            self.caller = step
            if self.rules & ONE_CALL_AT_A_TIME and step.tool_calls > 1:
                self.found = Finding(self.code, 0.8, [step.span_id], f"one model turn asked for {step.tool_calls} "
                                     "tool calls at once; the agent's instructions allow one at a time", CONTENT)
            return self.found
        tool = step.tool
        if tool is None or (not self.rules and not self.configured):
            return None
        if self.configured and self.settings.confirm(tool):
            if not self.asked:
                self.found = Finding(self.code, 0.8, [step.span_id], f"{tool} ran without asking the user first",
                                     STRUCTURE)
                return self.found
            self.asked = False
        if self.rules & CONFIRM_FIRST and self.heard and self.tools.effect(tool) is STATE_CHANGING and \
                not hands_over(tool) and not self.tools.is_final(tool):
            if not self.affirmed:
                evidence = [step.span_id] if self.caller is None else [self.caller.span_id, step.span_id]
                self.found = Finding(self.code, 0.7, evidence, f"{tool} changed state without the user's explicit "
                                     "confirmation, which the agent's instructions demand", CONTENT)
                return self.found
            self.affirmed = False
        return None

    def finish(self) -> Finding | None:
        if self.found is None and self.records.wrong_write is not None:
            record, step = self.records.wrong_write
            self.found = Finding(self.code, 0.6, [record.step.span_id, step.span_id], f"{step.tool} changed a record "
                                 f"whose {record.step.tool} result names another phone or email than the user gave: "
                                 "not what the user asked for", CONTENT, quote=record.id)
        return self.found
