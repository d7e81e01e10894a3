"""FM-1.4 Loss of conversation history: the prompt collapses while the conversation goes on.

Looks for: an agent's prompt (input tokens) falls below half its peak mid-conversation and stays small
Basis: structure
Content capture: no

Per agent, conversation and model, a model call's input tokens normally grow with the history. When, after
`min_calls` calls, a call's prompt falls below `drop_ratio` of the largest one so far (which had at least
`min_tokens`), and the next call stays that small, the history was truncated or dropped. A drop back to within
`reset_ratio` of the conversation's first call is FM-2.1 (a reset) instead."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, ClassVar, NamedTuple

from pydantic import Field

from ...config import DetectorSettings
from ...model.steps import LLM, Finding, Step
from ...model.trace import Trace
from ..detector import Detector, SharedState, shared


def _limits(settings: HistoryLossSettings) -> tuple[int, int, float]:
    """What a collapse is (min_calls, min_tokens, drop_ratio), read once: detectors are made per trace."""
    return settings.min_calls, settings.min_tokens, settings.drop_ratio


class HistoryLossSettings(DetectorSettings):
    """`processor.detectors."FM-1.4"`, and FM-2.1's (fields annotated as strings: see DetectorSettings)."""

    min_calls: "Annotated[int, Field(ge=1, description='model calls in the conversation before a drop counts')]" = 3
    min_tokens: ("Annotated[int, Field(ge=1, description='smallest peak prompt (input tokens) whose collapse "
                 "counts')]") = 2000
    drop_ratio: ("Annotated[float, Field(gt=0, lt=1, description='a prompt below this share of the peak, twice in a "
                 "row, is a collapse')]") = 0.5
    reset_ratio: ("Annotated[float, Field(ge=1, description='a collapse to within this factor of the prompt of the "
                  "first call is a reset (FM-2.1), else a loss (FM-1.4)')]") = 1.25

    # made once per settings, shared by the detectors of every trace (see DetectorSettings)
    limits: "ClassVar[cached_property[tuple[int, int, float]]]" = cached_property(_limits)


class _Series:
    __slots__ = ("agent", "calls", "conversation", "first", "largest", "model", "pending")

    def __init__(self, step: Step) -> None:
        self.agent, self.conversation, self.model = step.agent, step.conversation_id, step.model  # its key
        self.calls = 0
        self.first = step.input_tokens
        self.largest: Step = step
        self.pending: Step | None = None  # a collapsed call waiting for the next to confirm it


class Collapse(NamedTuple):
    largest: Step  # the largest prompt before the collapse
    first: Step  # the first collapsed call
    first_tokens: int  # the input tokens of the conversation's first call


class PromptSizes(SharedState):
    """The prompt sizes of a trace's conversations, fed once per model call; shared by FM-1.4 and FM-2.1 when
    their settings agree on what a collapse is."""

    __slots__ = ("collapse", "last", "limits", "seen", "series")

    def __init__(self, limits: tuple[int, int, float]) -> None:
        super().__init__()
        self.limits = limits  # min_calls, min_tokens, drop_ratio
        self.series: dict[tuple, _Series] = {}
        self.begin()

    def begin(self) -> None:
        self.series.clear()
        self.last: _Series | None = None  # of the call seen last: mostly the next one's too
        self.seen: Step | None = None
        self.collapse: Collapse | None = None  # confirmed by the step last seen

    def observe(self, step: Step) -> Collapse | None:
        if step is self.seen:  # a detector sharing this history already fed it
            return self.collapse
        self.seen, self.collapse = step, None
        series = self.last
        if series is None or step.agent is not series.agent or step.model is not series.model \
                or step.conversation_id is not series.conversation:  # names are canonical: compared by identity
            key = (step.agent, step.conversation_id, step.model)
            series = self.series.get(key)
            if series is None:
                self.series[key] = self.last = _Series(step)
                return None
            self.last = series
        min_calls, min_tokens, drop_ratio = self.limits
        series.calls += 1
        largest = series.largest
        tokens = step.input_tokens
        if not (series.calls >= min_calls and largest.input_tokens >= min_tokens and
                tokens < drop_ratio * largest.input_tokens):
            series.pending = None
            if tokens > largest.input_tokens:
                series.largest = step
            return None
        if series.pending is None:
            series.pending = step
            return None
        self.collapse = Collapse(largest, series.pending, series.first)
        return self.collapse


class HistoryLoss(Detector):
    code = "FM-1.4"
    Settings = HistoryLossSettings
    kinds = frozenset({LLM})
    resets = False  # FM-2.1 subclasses this with True: drops back to the first call's size
    reusable = True

    def __init__(self, settings: HistoryLossSettings, trace: Trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        limits = settings.limits
        self.sizes = shared(self, "prompt_sizes", lambda: PromptSizes(limits), lambda s: s.limits == limits)
        self.begin()

    def begin(self) -> None:
        self.found: Finding | None = None

    def observe(self, step: Step) -> Finding | None:
        if self.found is not None or not step.input_tokens:
            return None
        collapse = self.sizes.observe(step)
        if collapse is None:
            return None
        largest, first = collapse.largest, collapse.first
        reset = first.input_tokens <= self.settings.reset_ratio * collapse.first_tokens
        if reset is not self.resets:
            return None
        what = "back to the size of its first call" if reset else "and stayed small"
        self.found = Finding(self.code, 0.6, [largest.span_id, first.span_id, step.span_id],
                             f"prompt of {step.agent or step.model} fell from {largest.input_tokens} to "
                             f"{first.input_tokens} input tokens mid-conversation, {what}", "structure")
        return self.found

    def finish(self) -> Finding | None:
        return self.found
