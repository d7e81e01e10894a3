"""What repeated steps burnt, as the processor accounts it (`spend.account`) and the verdict and exporters read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .steps import Step

NO_TOKENS: Final = (("input", 0), ("output", 0), ("cache_read", 0), ("cache_write", 0))


def usd_total(cost: dict[str, float]) -> float:
    """The sum of a cost by model. (A compiled loop: sum() is a call through Python.)"""
    total = 0.0
    for usd in cost.values():
        total += usd
    return total


class RepeatedStep:
    """One repeated step and what it is charged with: the tokens and cost of the model call that produced
    it, at the first repeated step that call produced (later ones are charged nothing, so the steps' figures
    add up to the Waste's)."""

    __slots__ = ("code", "cost_usd", "model", "step", "tokens", "tool")

    def __init__(self, code: str, step: Step, tool: str, model: str | None, tokens: tuple[tuple[str, int], ...],
                 cost_usd: float) -> None:
        self.code = code  # the finding that marked it
        self.step = step
        self.tool = tool
        self.model = model  # of the producing model call ("unknown" when unnamed, None when there was none)
        self.tokens = tokens  # (type, tokens) as Step.tokens_by_type
        self.cost_usd = cost_usd


@dataclass(init=False)  # __init__ written out: it is compiled, a generated one is not
class Waste:
    """What repeated steps burnt: counts by tool, tokens by (model, type), cost by model, and step by step."""

    repeated_by_tool: dict[str, int]
    tokens: dict[tuple[str, str], int]
    cost: dict[str, float]
    producers: set[bytes]
    accounted: dict[str, int]  # per finding code: repeated steps included
    steps: list[RepeatedStep]

    def __init__(self, repeated_by_tool: dict[str, int] | None = None, tokens: dict[tuple[str, str], int] | None = None,
                 cost: dict[str, float] | None = None, steps: list[RepeatedStep] | None = None) -> None:
        self.repeated_by_tool = {} if repeated_by_tool is None else repeated_by_tool
        self.tokens = {} if tokens is None else tokens
        self.cost = {} if cost is None else cost
        self.producers = set()
        self.accounted = {}
        self.steps = [] if steps is None else steps

    @property
    def repeated_steps(self) -> int:
        total = 0
        for n in self.repeated_by_tool.values():  # not sum(): a call through Python
            total += n
        return total

    def token_total(self, kind: str) -> int:
        return sum(v for (_, t), v in self.tokens.items() if t == kind)
