"""FM-1.4 Loss of conversation history: the prompt collapses while the conversation goes on.

Per agent, conversation and model, a model call's input tokens normally grow with the history. When, after
`min_calls` calls, a call's prompt falls below `drop_ratio` of the largest one so far (which had at least
`min_tokens`), and the next call stays that small, the history was truncated or dropped (structure). A drop
back to the size of the conversation's first call is FM-2.1 (reset) instead."""

from __future__ import annotations

from pydantic import Field

from ...steps import Finding, Step, StepKind
from ..detector import Detector, DetectorSettings


class HistoryLossSettings(DetectorSettings):
    min_calls: int = Field(3, ge=1, description="model calls in the conversation before a drop counts")
    min_tokens: int = Field(2000, ge=1, description="smallest prompt whose collapse counts")
    drop_ratio: float = Field(0.5, gt=0, lt=1, description="a prompt below this share of the largest is a collapse")
    reset_ratio: float = Field(1.25, ge=1, description="a prompt within this factor of the first call's is a reset")


class _Series:
    __slots__ = ("calls", "first", "largest", "pending")

    def __init__(self, step: Step) -> None:
        self.calls = 0
        self.first = step.input_tokens
        self.largest: Step = step
        self.pending: Step | None = None  # a collapsed call waiting for the next to confirm it


class HistoryLoss(Detector):
    code = "FM-1.4"
    Settings = HistoryLossSettings
    kinds = frozenset({StepKind.LLM})
    resets = False  # FM-2.1 subclasses this with True: drops back to the first call's size

    def __init__(self, settings: HistoryLossSettings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.series: dict[tuple, _Series] = {}
        self.found: Finding | None = None

    def observe(self, step: Step) -> Finding | None:
        tokens = step.input_tokens
        if self.found is not None or not tokens:
            return None
        key = (step.agent, step.conversation_id, step.model)
        series = self.series.get(key)
        if series is None:
            self.series[key] = _Series(step)
            return None
        s = self.settings
        series.calls += 1
        largest = series.largest
        small = series.calls >= s.min_calls and largest.input_tokens >= s.min_tokens and \
            tokens < s.drop_ratio * largest.input_tokens
        if not small:
            series.pending = None
            if tokens > largest.input_tokens:
                series.largest = step
            return None
        if series.pending is None:
            series.pending = step
            return None
        first = series.pending
        reset = first.input_tokens <= s.reset_ratio * series.first
        if reset is not self.resets:
            return None
        what = "back to the size of its first call" if reset else "and stayed small"
        self.found = Finding(self.code, 0.6, [largest.span_id, first.span_id, step.span_id],
                             f"prompt of {step.agent or step.model} fell from {largest.input_tokens} to "
                             f"{first.input_tokens} input tokens mid-conversation, {what}", "structure")
        return self.found

    def finish(self) -> Finding | None:
        return self.found
