"""What repeated steps burnt, as the processor accounts it (`spend.account`) and the verdict and exporters read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .steps import Step

NO_TOKENS: Final = (("input", 0), ("output", 0), ("cache_read", 0), ("cache_write", 0))


def float_sum(values: dict[str, float]) -> float:
    """The sum of a cost by model, or of seconds by tool. (A compiled loop: sum() is a call through Python.)"""
    total = 0.0
    for value in values.values():
        total += value
    return total


class RepeatedStep:
    """One repeated step and what it is charged with: the tokens and cost of the model call that produced
    it, at the first repeated step that call produced (later ones are charged nothing, so the steps' figures
    add up to the Waste's), and the time: the step's own, plus that call's where its tokens are charged."""

    __slots__ = ("code", "cost_usd", "model", "seconds", "step", "tokens", "tool")

    def __init__(self, code: str, step: Step, tool: str, model: str | None, tokens: tuple[tuple[str, int], ...],
                 cost_usd: float, seconds: float = 0.0) -> None:
        self.code = code  # the finding that marked it
        self.step = step
        self.tool = tool
        self.model = model  # of the producing model call ("unknown" when unnamed, None when there was none)
        self.tokens = tokens  # (type, tokens) as Step.tokens_by_type
        self.cost_usd = cost_usd
        self.seconds = seconds


@dataclass(init=False)  # __init__ written out: it is compiled, a generated one is not
class Waste:
    """What repeated steps burnt: counts by tool, tokens by (model, type), cost by model, time by tool (the
    repeated steps' own and that of the model calls that produced them, each call once), and step by step."""

    repeated_by_tool: dict[str, int]
    tokens: dict[tuple[str, str], int]
    cost: dict[str, float]
    seconds: dict[str, float]
    producers: set[bytes]
    accounted: dict[str, int]  # per finding code: repeated steps included
    steps: list[RepeatedStep]

    def __init__(self, repeated_by_tool: dict[str, int] | None = None, tokens: dict[tuple[str, str], int] | None = None,
                 cost: dict[str, float] | None = None, seconds: dict[str, float] | None = None,
                 steps: list[RepeatedStep] | None = None) -> None:
        self.repeated_by_tool = {} if repeated_by_tool is None else repeated_by_tool
        self.tokens = {} if tokens is None else tokens
        self.cost = {} if cost is None else cost
        self.seconds = {} if seconds is None else seconds
        self.producers = set()
        self.accounted = {}
        self.steps = [] if steps is None else steps

    @property
    def repeated_steps(self) -> int:
        total = 0
        for n in self.repeated_by_tool.values():  # not sum(): a call through Python
            total += n
        return total

    @property
    def seconds_total(self) -> float:
        return float_sum(self.seconds)

    def token_total(self, kind: str) -> int:
        return sum(v for (_, t), v in self.tokens.items() if t == kind)
