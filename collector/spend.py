"""Token spend and its price, from genai-prices.

Prices are looked up once per model: for models with flat prices the library is asked for the price of
each token type once and those rates are applied per trace; models with tiered (context-length) prices
are priced call by call. Unknown models: tokens are counted, the cost is 0 and the call counts as unpriced.
What a lookup found is kept for the process (every processor shares it, a replay's or an evaluation's too), for
at most `MODELS_KEPT` names (they come from untrusted spans, and distinct ones must not grow memory without end:
when that many are kept, they are dropped and looked up again as they come).
genai-prices' price data is loaded when a processor is made (`load_prices`), not by the first trace priced.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from genai_prices import Usage, calc_price
from genai_prices.data_snapshot import get_snapshot
from genai_prices.types import TieredPrices

from .bounded import remember
from .model.steps import LLM, Step, ended_by
from .model.waste import NO_TOKENS, RepeatedStep, Waste

log = logging.getLogger(__name__)
MTOK: Final = 1_000_000
MODELS_KEPT: Final = 4096  # (model, provider) lookups kept; past this all are dropped


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per token by type; `per_call` is a fixed fee per request."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    per_call: float

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int, calls: int) -> float:
        uncached = max(input_tokens - cache_read - cache_write, 0)
        return (uncached * self.input + output_tokens * self.output + cache_read * self.cache_read
                + cache_write * self.cache_write + calls * self.per_call)


@dataclass(slots=True)
class _Model:
    rates: Rates | None  # None: tiered, price each call
    model_ref: str
    provider: str | None


def load_prices() -> None:
    """Load genai-prices' bundled price data (once per process) now: otherwise the first lookup loads it, on the
    processor's thread while traces wait."""
    get_snapshot()


def _lookup(model: str, provider: str | None) -> _Model | None:
    """What genai-prices knows of a model: its rates when its prices are flat."""
    # the provider name in spans may not be genai-prices' provider id; a "provider/model" id (LiteLLM,
    # any-agent) is looked up as that model of that provider
    candidates = [(model, provider), (model, None)]
    if "/" in model:
        prefix, _, name = model.rpartition("/")
        candidates += [(name, prefix.rpartition("/")[2]), (name, None)]
    base = None
    for model_ref, provider_id in dict.fromkeys(candidates):
        try:
            base = calc_price(Usage(), model_ref=model_ref, provider_id=provider_id)
        except LookupError:
            continue
        model, provider = model_ref, provider_id
        break
    if base is None:
        log.info("no price known for model %r (provider %r): counted as unpriced", model, provider)
        return None
    mp = base.model_price
    if any(isinstance(getattr(mp, name, None), TieredPrices) for name in
           ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")):
        return _Model(None, model, provider)

    def rate(**tokens: int) -> float:
        price = calc_price(Usage(**tokens), model_ref=model, provider_id=provider).total_price
        return float(price - base.total_price) / MTOK

    return _Model(Rates(
        input=rate(input_tokens=MTOK), output=rate(output_tokens=MTOK),
        cache_read=rate(input_tokens=MTOK, cache_read_tokens=MTOK),
        cache_write=rate(input_tokens=MTOK, cache_write_tokens=MTOK),
        per_call=float(base.total_price)), model, provider)


_RESOLVED: Final[dict[tuple, _Model | None]] = {}  # (model, provider) -> what _lookup found (a plain dict: an
# lru_cache would be a call through Python per lookup)
_NOT_LOOKED_UP: Final = _Model(None, "", None)  # not in _RESOLVED (None is an answer: no price known)


def _resolve(model: str, provider: str | None) -> _Model | None:
    key: tuple = (model, provider)
    known = _RESOLVED.get(key, _NOT_LOOKED_UP)
    if known is _NOT_LOOKED_UP:
        known = remember(_RESOLVED, key, _lookup(model, provider), MODELS_KEPT)
    return known


def price(model: str | None, provider: str | None, steps: list[Step]) -> float | None:
    """Price of these inference calls of one model; None when the model has no known price."""
    resolved = _resolve(model, provider) if model else None
    if resolved is None:
        return None
    if resolved.rates is not None:
        i = o = cr = cw = n = 0
        for s in steps:
            i += s.input_tokens
            o += s.output_tokens
            cr += s.cache_read_tokens
            cw += s.cache_write_tokens
            n += 1
        return resolved.rates.cost(i, o, cr, cw, n)
    return sum(float(calc_price(Usage(input_tokens=s.input_tokens, output_tokens=s.output_tokens,
                                      cache_read_tokens=s.cache_read_tokens,
                                      cache_write_tokens=s.cache_write_tokens),
                                model_ref=resolved.model_ref, provider_id=resolved.provider).total_price)
               for s in steps)


def call_price(model: str, provider: str | None, input_tokens: int, output_tokens: int) -> float | None:
    """Price of one inference call that is no span of an agent (the judge's own), priced as `price` prices a
    step; None when the model has no known price."""
    call = Step(b"", b"", b"", LLM, "", 0, 0, "", model=model, provider=provider, input_tokens=input_tokens,
                output_tokens=output_tokens)
    return price(model, provider, [call])


def producer(step: Step, llm_steps: list[Step]) -> Step | None:
    """The model call that produced a step: itself for an inference, for a tool call the latest
    inference that ended before it started (`llm_steps` is in end order), preferring the same parent."""
    if step.kind is LLM:
        return step
    i = ended_by(llm_steps, step.start_ns)
    if i == 0:
        return None
    best = llm_steps[i - 1]
    for llm in reversed(llm_steps[max(i - 8, 0):i - 1]):
        if llm.parent_span_id == step.parent_span_id and best.parent_span_id != step.parent_span_id:
            best = llm
            break
    return best


def add_tokens(tokens: dict[tuple[str, str], int], model: str, kind: str, n: int) -> None:
    """`n` more tokens of `kind` for `model` in `tokens` (keyed by model and type, as Waste.tokens and verdicts)."""
    key: tuple = (model, kind)  # boxed once (a tuple[str, str] would be boxed again for each dict operation)
    tokens[key] = tokens.get(key, 0) + n


def account(waste: Waste, code: str, repeated: list[Step], llm_steps: list[Step]) -> None:
    """Add to `waste` the repeated steps of finding `code` not yet accounted (its list only grows)."""
    for step in repeated[waste.accounted.get(code, 0):]:
        tool = step.tool if step.tool is not None else "(model output)"
        waste.repeated_by_tool[tool] = waste.repeated_by_tool.get(tool, 0) + 1
        took = step.seconds
        llm = producer(step, llm_steps)
        if llm is None or llm.span_id in waste.producers:
            model = (llm.model or "unknown") if llm else None
            if llm is step:  # a repeated model output whose time was charged already, to a repeat it asked for
                took = 0.0
            waste.seconds[tool] = waste.seconds.get(tool, 0.0) + took
            waste.steps.append(RepeatedStep(code, step, tool, model, NO_TOKENS, 0.0, took))
            continue
        waste.producers.add(llm.span_id)
        if llm is not step:  # a repeated model output is its own producer: its time is counted once
            took += llm.seconds
        waste.seconds[tool] = waste.seconds.get(tool, 0.0) + took
        model = llm.model or "unknown"
        tokens = llm.tokens_by_type()
        for kind, n in tokens:
            if n:
                add_tokens(waste.tokens, model, kind, n)
        cost = price(llm.model, llm.provider, [llm])
        if cost:
            waste.cost[model] = waste.cost.get(model, 0.0) + cost
        waste.steps.append(RepeatedStep(code, step, tool, model, tokens, cost or 0.0, took))
    waste.accounted[code] = len(repeated)
