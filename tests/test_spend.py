"""Token spend and its price (genai-prices), and what repeated steps wasted."""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Any

import pytest
from genai_prices import Usage, calc_price

from mastwatch.collector import spend
from mastwatch.collector.model.steps import Step, StepKind, ended_by
from mastwatch.collector.model.waste import Waste
from mastwatch.collector.spend import account, producer

_ids = itertools.count(1)


def make_step(kind: StepKind, start: int, end: int, parent: bytes = b"\x01", **fields: Any) -> Step:
    return Step(trace_id=b"\x07" * 16, span_id=next(_ids).to_bytes(8, "big"), parent_span_id=parent, kind=kind,
                name=kind.name, start_ns=start, end_ns=end, service="svc", **fields)


def llm(input_tokens: int = 0, output_tokens: int = 0, cache_read: int = 0, cache_write: int = 0, *,
        start: int = 0, end: int = 1, parent: bytes = b"\x01", model: str = "gpt-4.1-mini") -> Step:
    return make_step(StepKind.LLM, start, end, parent, model=model, provider="openai", input_tokens=input_tokens,
                     output_tokens=output_tokens, cache_read_tokens=cache_read, cache_write_tokens=cache_write)


def tool(start: int, parent: bytes = b"\x01", name: str = "search", took: int = 1) -> Step:
    return make_step(StepKind.TOOL, start, start + took, parent, tool=name)


def reference(model: str, provider: str | None, s: Step) -> float:
    usage = Usage(input_tokens=s.input_tokens, output_tokens=s.output_tokens, cache_read_tokens=s.cache_read_tokens,
                  cache_write_tokens=s.cache_write_tokens)
    return float(calc_price(usage, model_ref=model, provider_id=provider).total_price)


def test_flat_price_matches_genai_prices() -> None:
    calls = [llm(12_000, 800, cache_read=9_000), llm(3_000, 150), llm(40_000, 2_000, cache_read=38_000)]
    cost = spend.price("gpt-4.1-mini", "openai", calls)
    assert cost is not None and cost > 0
    assert cost == pytest.approx(sum(reference("gpt-4.1-mini", "openai", s) for s in calls), abs=1e-9)
    # cache reads are cheaper than uncached input: the same call without them costs more
    assert cost < spend.price("gpt-4.1-mini", "openai", [llm(12_000, 800), llm(3_000, 150), llm(40_000, 2_000)])


def test_tiered_price_is_per_call() -> None:
    calls = [llm(10_000, 500, model="gemini-2.5-pro"), llm(250_000, 1_000, model="gemini-2.5-pro")]
    cost = spend.price("gemini-2.5-pro", "google", calls)
    per_call = [reference("gemini-2.5-pro", "google", s) for s in calls]
    assert cost == pytest.approx(sum(per_call), abs=1e-9)
    # the call above 200k input tokens is priced at the higher tier, not at the first call's rates
    assert per_call[1] > 25 * reference("gemini-2.5-pro", "google", llm(10_000, 40))


def test_unknown_model_is_unpriced() -> None:
    assert spend.price("no-such-model-xyz", "openai", [llm(100, 10)]) is None
    assert spend.price(None, None, [llm(100, 10)]) is None


def test_unknown_provider_still_prices_a_known_model() -> None:
    calls = [llm(5_000, 300)]
    assert spend.price("gpt-4.1-mini", "my-gateway", calls) == pytest.approx(
        spend.price("gpt-4.1-mini", "openai", calls), abs=1e-12)


def test_provider_prefixed_model_id_is_priced() -> None:
    calls = [llm(5_000, 300, model="mistral/mistral-small-latest")]  # any-agent / LiteLLM form
    cost = spend.price("mistral/mistral-small-latest", None, calls)
    assert cost == pytest.approx(reference("mistral-small-latest", "mistral", calls[0]), abs=1e-12) and cost > 0


def test_producer_is_latest_call_ended_before_the_tool() -> None:
    a, b = b"\x0a", b"\x0b"
    first = llm(start=0, end=10, parent=a)
    other = llm(start=5, end=20, parent=b)
    late = llm(start=25, end=40, parent=a)
    calls = [first, other, late]  # in end order
    assert producer(tool(30, parent=b), calls) is other  # `late` had not ended yet
    assert producer(tool(30, parent=a), calls) is first  # same parent preferred over a later other-parent call
    assert producer(tool(15, parent=b), calls) is first  # `other` ended after the tool started
    assert producer(tool(5, parent=a), calls) is None
    assert producer(late, calls) is late


def test_ended_by_counts_the_calls_ended_at_or_before_a_time() -> None:
    calls = [llm(start=0, end=end) for end in (10, 20, 20, 40)]  # in end order
    assert [ended_by(calls, ns) for ns in (5, 10, 19, 20, 39, 40, 99)] == [0, 1, 1, 3, 3, 4, 4]
    assert ended_by([], 5) == 0


def test_waste_counts_a_producer_once() -> None:
    model_call = llm(1_000, 100, start=0, end=10)
    parallel = [tool(11, name="search"), tool(11, name="lookup")]  # one model call asked for both
    waste = Waste()
    account(waste, "FM-1.3", parallel, [model_call])
    assert waste.repeated_by_tool == {"search": 1, "lookup": 1} and waste.repeated_steps == 2
    assert waste.token_total("input") == 1_000 and waste.token_total("output") == 100
    assert waste.cost["gpt-4.1-mini"] == pytest.approx(reference("gpt-4.1-mini", "openai", model_call), abs=1e-12)
    # step by step: the first step the call produced carries its tokens and cost, the second nothing
    first, second = waste.steps
    assert (first.step, first.tool, first.model, dict(first.tokens)) == (
        parallel[0], "search", "gpt-4.1-mini", {"input": 1_000, "output": 100, "cache_read": 0, "cache_write": 0})
    assert first.cost_usd == waste.cost["gpt-4.1-mini"]
    assert (second.step, second.model, sum(n for _, n in second.tokens), second.cost_usd) == (
        parallel[1], "gpt-4.1-mini", 0, 0.0)


def test_wasted_time_is_the_repeats_own_and_their_producers_once() -> None:
    second = 1_000_000_000
    model_call = llm(10, 1, start=0, end=2 * second)
    parallel = [tool(3 * second, name="search", took=second // 2), tool(3 * second, name="lookup", took=second)]
    reply = llm(10, 1, start=5 * second, end=9 * second)  # a repeated model output: its own producer
    backwards = tool(10 * second, name="search", took=-5)  # a span ending before it starts takes no time
    waste = Waste()
    account(waste, "FM-1.3", [*parallel, reply, backwards], [model_call, reply])
    assert waste.seconds == pytest.approx({"search": 2.5, "lookup": 1.0, "(model output)": 4.0})
    assert [r.seconds for r in waste.steps] == pytest.approx([2.5, 1.0, 4.0, 0.0])
    assert waste.seconds_total == pytest.approx(7.5) == sum(r.seconds for r in waste.steps)
    # a model call charged as the producer of a repeated call, then found repeating its own output: counted once
    once = Waste()
    account(once, "FM-1.3", [parallel[0]], [model_call])
    account(once, "FM-1.3", [parallel[0], model_call], [model_call])
    assert once.seconds == pytest.approx({"search": 2.5, "(model output)": 0.0})


def test_waste_is_incremental() -> None:
    calls = [llm(1_000 * (i + 1), 10 * (i + 1), cache_read=100 * i, start=20 * i, end=20 * i + 5) for i in range(4)]
    repeated = [tool(20 * i + 6) for i in range(4)]
    once = Waste()
    account(once, "FM-1.3", repeated, calls)
    twice = Waste()
    account(twice, "FM-1.3", repeated[:2], calls)
    account(twice, "FM-1.3", repeated, calls)
    assert (twice.repeated_by_tool, twice.tokens, twice.producers) == (once.repeated_by_tool, once.tokens,
                                                                       once.producers)
    assert twice.cost == pytest.approx(once.cost) and once.repeated_steps == 4
    assert once.token_total("cache_read") == 600 and once.token_total("input") == 10_000 - 600
    assert [(r.step, r.tokens, r.seconds) for r in twice.steps] == [(r.step, r.tokens, r.seconds) for r in once.steps]
    assert twice.seconds == pytest.approx(once.seconds)
    for kind in ("input", "output", "cache_read", "cache_write"):  # the steps' figures add up to the totals
        assert sum(dict(r.tokens)[kind] for r in once.steps) == once.token_total(kind)
    assert sum(r.cost_usd for r in once.steps) == pytest.approx(sum(once.cost.values()))


def test_model_lookups_are_bounded() -> None:
    """Model names come from spans: a stream of distinct ones keeps at most MODELS_KEPT lookups."""
    names = [f"no-such-model-{i}" for i in range(spend.MODELS_KEPT + 10)]
    for name in names:
        assert spend.price(name, None, [llm(100, 10)]) is None
        assert len(spend._RESOLVED) <= spend.MODELS_KEPT
    assert (names[-1], None) in spend._RESOLVED  # kept
    assert (names[0], None) not in spend._RESOLVED  # dropped: looked up again when it comes
    spend.price(names[0], None, [llm(100, 10)])
    assert (names[0], None) in spend._RESOLVED
    assert spend.price("gpt-4.1-mini", "openai", [llm(100, 10)]) == pytest.approx(
        reference("gpt-4.1-mini", "openai", llm(100, 10)), abs=1e-12)


def test_a_new_processor_has_the_price_data_loaded() -> None:
    """genai-prices loads its data on first use: a processor loads it when made, not on its thread when the first
    trace is priced (a fresh interpreter: this one's tests have loaded it already)."""
    code = ("from genai_prices import data_snapshot\n"
            "from mastwatch.collector.config import ProcessorConfig\n"
            "from mastwatch.collector.processor import Processor\n"
            "assert data_snapshot._bundled_snapshot.cache_info().currsize == 0\n"
            "Processor(ProcessorConfig(), [])\n"
            "assert data_snapshot._bundled_snapshot.cache_info().currsize == 1\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
