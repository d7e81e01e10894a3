"""FM-1.3 Step repetition: a step redone although it already completed.

Looks for: the same tool with equivalent arguments three times, A→B→A→B cycles, identical model text outputs,
  a lookup redone with the same result and nothing changed since; not retries, polling or re-checks after a change
Basis: structure; content for model outputs
Content capture: tool arguments and results must be captured

Signals, each seen as the steps arrive:
- the same tool with equivalent arguments (canonically equal JSON) `min_occurrences` times or more;
- short cycles of tool calls (A→B→A→B, period 2 to `cycle_max_period`) repeated `cycle_min_repeats` times;
- identical model text outputs, `output_min_occurrences` times or more (content); not outputs asking for tool
  calls (by finish reason or tool-call parts): repeated, they are their calls' repetition;
- with arguments not captured: the same tool called `unknown_args_min_run` times in a row (low confidence; off by
  default: paging, polling and batch lookups look the same);
- a read-only call made again with the same result and no state-changing call since that may have touched what it
  reads, `unchanged_min_occurrences` times (a lookup whose answer the run already had), unless it shows work in
  progress (polling), comes in another conversation or after the prompt collapsed (a restart: FM-2.1, FM-1.4), or
  is followed at once by a state-changing call (a look at the current state before changing it).

Not repetition: tools matching `polling_tools`; up to `retry_limit` calls right after the same call failed
(retries); a call whose captured result differs from the previous one (the world changed), or made again after a
state-changing call that may have touched what it reads (a check of the change): any, unless the arguments of both
are captured and the change names records (`*_id` values) of which the call's is not one; work redone by a fresh
agent invocation after the one before it failed (a restart: FM-2.1 accounts for it)."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated, ClassVar, Final

from pydantic import Field

from ...config import DetectorSettings
from ...model.steps import AGENT, LLM, TOOL, Finding, Step
from ..detector import Detector
from ..signals import asks_for_tools, named_record, named_records, tool_error
from ..tools import READ_ONLY, STATE_CHANGING, Globs

EVIDENCE_LIMIT: Final = 50
# A result showing work still going on: asking again is polling.
_IN_PROGRESS: Final = re.compile(r"\b(pending|running|in[ _-]progress|queued|processing|starting|waiting|"
                                 r"scheduled|deploying|creating|initiali[sz]ing)\b", re.IGNORECASE)


Plain = tuple[int, int, int, int, int, int, int, Globs | None, int]


def _polling(settings: StepRepetitionSettings) -> Globs:
    return Globs(settings.polling_tools)


def _plain(settings: StepRepetitionSettings) -> Plain:
    """min_occurrences, retry_limit, cycle_max_period, cycle_min_repeats, output_min_occurrences, output_min_chars,
    unknown_args_min_run, the polling tools (None: none) and unchanged_min_occurrences, read once: detectors are
    made per trace, and read a plain attribute for less than a model's."""
    return (settings.min_occurrences, settings.retry_limit, settings.cycle_max_period, settings.cycle_min_repeats,
            settings.output_min_occurrences, settings.output_min_chars, settings.unknown_args_min_run,
            settings.polling if settings.polling_tools else None, settings.unchanged_min_occurrences)


class StepRepetitionSettings(DetectorSettings):
    """`processor.detectors."FM-1.3"` (fields annotated as strings: see DetectorSettings)."""

    min_occurrences: ("Annotated[int, Field(ge=2, description='calls of one tool with equivalent arguments that make a "
                      "repetition')]") = 3
    polling_tools: ("Annotated[list[str], Field(default_factory=list, description='glob patterns of tools that poll "
                    "(never repetition), e.g. `get_*_status`')]")
    retry_limit: ("Annotated[int, Field(ge=0, description='calls right after the same call failed that count as "
                  "retries')]") = 2
    cycle_max_period: "Annotated[int, Field(ge=0, description='longest cycle of tool calls looked for (0: off)')]" = 3
    cycle_min_repeats: "Annotated[int, Field(ge=2, description='times a cycle must run')]" = 2
    output_min_occurrences: ("Annotated[int, Field(ge=2, description='identical model text outputs that make a "
                             "repetition')]") = 2
    output_min_chars: "Annotated[int, Field(ge=1, description='shorter outputs are ignored')]" = 32
    unknown_args_min_run: ("Annotated[int, Field(ge=0, description='same tool this many times in a row when arguments "
                           "are not captured (0: off, the default: paging and batch lookups look the same)')]") = 0
    unchanged_min_occurrences: ("Annotated[int, Field(ge=2, description='calls of one read-only tool with equivalent "
                                "arguments and the same result, no state-changing call between (not work in progress, "
                                "not right before a change)')]") = 2

    # made once per settings, shared by the detectors of every trace (see DetectorSettings)
    polling: "ClassVar[cached_property[Globs]]" = cached_property(_polling)
    plain: "ClassVar[cached_property[Plain]]" = cached_property(_plain)


class StepRepetition(Detector):
    code = "FM-1.3"
    Settings = StepRepetitionSettings
    kinds = frozenset({TOOL, LLM, AGENT})  # agent steps: invocations that failed
    reusable = True

    def __init__(self, settings: StepRepetitionSettings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        # settings, kept as plain attributes (reading a settings model costs more)
        (self._min_occurrences, self._retry_limit, self._max_period, self._cycle_min_repeats,
         self._output_min_occurrences, self._output_min_chars, self._unknown_args_min_run,
         self._polling, self._unchanged_min_occurrences) = settings.plain
        # emptied by `_start_over`, never handed out
        self._calls: dict[tuple[str, str | int | None], list[Step]] = {}
        # per call: the state-changing calls made before its last time, and the conversation it was in
        self._state_at: dict[tuple[str, str | int | None], tuple[int, str | None]] = {}
        # a tool's first call, with the state-changing calls before it and its conversation; None: compared
        self._first_call: dict[str, tuple[Step, int, str | None] | None] = {}
        self._sequence: list[Step] = []  # tool calls, in order
        self._match_run = [0] * (self._max_period + 1)
        self.begin()

    def begin(self) -> None:
        # made when first needed: most runs repeat nothing and have no failed invocation
        self.repeated: list[Step] | None = None  # append-only; the processor accounts for it incrementally
        self._repeated_ids: set[bytes] | None = None
        self._evidence: dict[bytes, None] | None = None
        self._failed_invocations: set[bytes] | None = None
        self._parent: bytes | None = None  # of the last model or tool step
        # signal -> (confidence, basis, reason, quote: the content that shows it, or "")
        self._reasons: dict[str, tuple[float, str, str, str]] | None = None
        self._start_over()

    def _start_over(self) -> None:
        """Forget the calls made so far (a fresh invocation of the agent restarted the work)."""
        self._calls.clear()
        self._state_at.clear()
        self._conversation: str | None = None  # the conversation the last step named
        self._writes = 0  # state-changing calls so far
        self._written: list[frozenset[str] | None] = []  # the records each named (None: none, so any record)
        self._unchanged: tuple[list[Step], str, str] | None = None  # a lookup made again, judged at the next tool call
        self._max_input = 0  # the largest prompt so far (input tokens), and the last one
        self._last_input = 0
        self._first_call.clear()
        self._sequence.clear()
        match_run = self._match_run
        for i in range(len(match_run)):
            match_run[i] = 0
        self._outputs: dict[int, list[Step]] | None = None  # made at the first model output compared
        self._last_tool: Step | None = None
        self._retries = 0
        self._run = 0

    def _mark(self, steps: list[Step], evidence: list[Step]) -> None:
        ids, repeated = self._repeated_ids, self.repeated
        if ids is None or repeated is None:
            ids, repeated = self._repeated_ids, self.repeated = set(), []
        for step in steps:
            if step.span_id not in ids:
                ids.add(step.span_id)
                repeated.append(step)
        kept = self._evidence
        if kept is None:
            kept = self._evidence = {}
        for step in evidence:
            if len(kept) < EVIDENCE_LIMIT:
                kept.setdefault(step.span_id, None)

    def _reason(self, signal: str, confidence: float, basis: str, reason: str, quote: str | None = None) -> None:
        if self._reasons is None:
            self._reasons = {}
        self._reasons[signal] = (confidence, basis, reason, quote or "")

    def observe(self, step: Step) -> Finding | None:
        if step.kind is AGENT:
            if step.error:
                if self._failed_invocations is None:
                    self._failed_invocations = set()
                self._failed_invocations.add(step.span_id)
            return None
        if step.conversation_id is not None:
            self._conversation = step.conversation_id
        if step.parent_span_id != self._parent:
            failed = self._failed_invocations
            if failed is not None and self._parent in failed:
                self._start_over()
            self._parent = step.parent_span_id
        if step.kind is TOOL and step.tool is not None:
            return self._observe_tool(step, step.tool)
        if step.kind is LLM:
            if step.input_tokens:
                self._last_input = step.input_tokens
                if step.input_tokens > self._max_input:
                    self._max_input = step.input_tokens
            if step.output_fingerprint is not None:
                return self._observe_output(step, step.output_fingerprint)
        return None

    def _observe_tool(self, step: Step, tool: str) -> Finding | None:
        if self._polling is not None and self._polling(tool):
            return None
        writes = self.tools.effect(tool) is STATE_CHANGING
        if writes and not step.error and tool_error(step) is None:  # a refused change changed nothing
            self._writes += 1
            self._written.append(named_records(step.args_text))
        found = self._settle_unchanged() if not writes else None  # not a look before a change
        self._unchanged = None
        previous = self._last_tool
        self._last_tool = step
        changed = False
        if step.args is None:
            self._run = self._run + 1 if previous is not None and previous.tool == tool \
                and previous.args is None else 1
            if self._unknown_args_min_run and self._run >= self._unknown_args_min_run:
                run = [*self._sequence[len(self._sequence) - self._run + 1:], step]
                self._mark(run[1:], run)
                self._reason("run", 0.4, "structure", f"{tool} called {self._run} times in a row "
                             "(arguments not captured, so equivalence is not known)")
                changed = True
        else:
            # Arguments are compared only once a tool is called again: the first call waits here.
            if tool not in self._first_call:
                self._first_call[tool] = (step, self._writes, self._conversation)
            else:
                first = self._first_call[tool]
                if first is not None:
                    key = (tool, first[0].args_key)
                    self._calls[key] = [first[0]]
                    self._state_at[key] = (first[1], first[2])
                    self._first_call[tool] = None
                changed = self._same_call(tool, step, previous)
        self._sequence.append(step)
        changed |= self._observe_cycle()
        return self.current() if changed else found

    def _same_call(self, tool: str, step: Step, previous: Step | None) -> bool:
        key = (tool, step.args_key)
        calls = self._calls.setdefault(key, [])
        now = (self._writes, self._conversation)
        writes, conversation = self._state_at.get(key, now)
        self._state_at[key] = now
        if calls and writes != self._writes and self._changed(writes, step):
            calls.clear()  # a state-changing call came between: this one checks the change
        if calls and previous is not None and previous.error and previous.tool == tool \
                and previous.args_key == step.args_key:  # previous may be a skipped retry
            self._retries += 1
        else:
            self._retries = 0
        if calls and step.result is not None and calls[-1].result is not None and not calls[-1].error \
                and step.result_key != calls[-1].result_key:
            calls.clear()  # a different result: the call observed a change, it is not redone work
        if 0 < self._retries <= self._retry_limit:
            return False  # a retry after a failure
        calls.append(step)
        if len(calls) < self._min_occurrences:
            if len(calls) >= self._unchanged_min_occurrences and conversation == self._conversation and \
                    self._unchanged_lookup(tool, step, calls[-2]):
                self._unchanged = (list(calls), f"{tool} called again with equivalent arguments and the same "
                                   "result, nothing changed since", step.args_preview or "")
            return False
        self._mark(calls[1:], calls)
        self._reason("same_call", 0.9, "structure", f"{tool} called {len(calls)} times with equivalent arguments",
                     step.args_preview)
        return True

    def _changed(self, since: int, step: Step) -> bool:
        """Whether the state-changing calls after the first `since` may have changed what `step` looks up: one
        naming no record, or the record `step` names, or any when `step` names none (or content is not captured).
        A change to another order does not make a second look at this one a check of it."""
        own = named_record(step.args_text)
        return own is None or any(records is None or own in records for records in self._written[since:])

    def _unchanged_lookup(self, tool: str, step: Step, before: Step) -> bool:
        """Whether `step` repeats the lookup `before` to no purpose: read-only, the same result (not work in
        progress), the prompt not collapsed since (a restart)."""
        text = step.result_text
        return step.result is not None and not step.error and before.result_key == step.result_key and \
            self.tools.effect(tool) is READ_ONLY and 2 * self._last_input >= self._max_input and \
            (text is None or _IN_PROGRESS.search(text) is None)

    def _observe_cycle(self) -> bool:
        seq = self._sequence
        end = len(seq) - 1
        step = seq[end]
        tool, args = step.tool, step.args
        match_run = self._match_run
        for period in range(2, min(self._max_period, end) + 1):  # longer periods have matched nothing yet
            other = seq[end - period]
            if other.tool != tool or args is None or other.args is None or other.args.key != args.key:
                match_run[period] = 0  # not the same call (same tool, equivalent arguments): no cycle of it
                continue
            run = match_run[period] = match_run[period] + 1
            if run >= period * (self._cycle_min_repeats - 1):
                block = seq[end - period + 1:end + 1]
                if len({(x.tool, x.args_key) for x in block}) < 2:
                    continue
                cycle_steps = seq[end - run - period + 1:end + 1]
                self._mark(cycle_steps[period:], cycle_steps)
                names = "→".join(x.tool or "" for x in cycle_steps[:period])
                self._reason("cycle", 0.8, "structure", f"cycle {names} repeated {(run + period) / period:.3g} times "
                             "with the same arguments")
                return True
        return False

    def _observe_output(self, step: Step, fingerprint: int) -> Finding | None:
        if step.output_chars < self._output_min_chars or step.tool_calls or asks_for_tools(step):
            return None  # an output asking for tools is repeated as its calls are: their repetition is the finding
        if self._outputs is None:
            self._outputs = {}
        outputs = self._outputs.setdefault(fingerprint, [])
        outputs.append(step)
        if len(outputs) < self._output_min_occurrences:
            return None
        self._mark(outputs[1:], outputs)
        self._reason("output", 0.85, "content", f"model {step.model or ''} gave the same output {len(outputs)} times",
                     step.output_preview)
        return self.current()

    def current(self) -> Finding | None:
        reasons = self._reasons
        if not reasons:  # None or empty
            return None
        # mostly one signal: no sort, no join (calls through Python)
        ranked = list(reasons.values()) if len(reasons) == 1 else sorted(reasons.values(), reverse=True)
        confidence, basis, reason, quote = ranked[0]
        if len(ranked) > 1:
            reason = "; ".join([r for _, _, r, _ in ranked])
            quote = "; ".join([q for _, _, _, q in ranked if q])
        return Finding(self.code, confidence, list(self._evidence or ()), reason, basis, self.repeated, quote or None)

    def _settle_unchanged(self) -> Finding | None:
        """Count the lookup made again that waits for the next tool call (or the end), if one does."""
        unchanged, self._unchanged = self._unchanged, None
        if unchanged is None:
            return None
        self._mark(unchanged[0][1:], unchanged[0])
        self._reason("unchanged", 0.8, "content", unchanged[1], unchanged[2])
        return self.current()

    def finish(self) -> Finding | None:
        self._settle_unchanged()
        return self.current()
