"""The judge stage: budget, sampling, the chat client's retries, judgements, and that it never holds up
ingestion. The chat endpoint is a local OpenAI-compatible server answering from a script."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter

import pytest

from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.judge.budget import CALLS, TOKENS, Budget
from mastwatch.collector.judge.client import HTTP_ERROR, RATE_LIMITED, UNREACHABLE, CallFailed, ChatClient, retry_after
from mastwatch.collector.judge.stage import Judge, JudgeConfig, sampled
from mastwatch.collector.processor import Processor
from mastwatch.collector.receiver.decode import SpanRecord
from mastwatch.config import ConfigError, load
from tests.chat_server import Reply, answer, asked, span_ids


class Recorder:
    """JudgeTelemetry and JudgeSink, counting what it is told."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.judgements: list = []
        self.queue = 0

    def judge_request(self, outcome: str, seconds: float) -> None:
        self.counts[f"request:{outcome}"] += 1

    def judge_tokens(self, input_tokens: int, output_tokens: int) -> None:
        self.counts["tokens"] += input_tokens + output_tokens

    def judge_cost(self, usd: float) -> None:
        self.cost = getattr(self, "cost", 0.0) + usd

    def judge_rejected(self, reason: str) -> None:
        self.counts[f"rejected:{reason}"] += 1

    def judge_skipped(self, reason: str) -> None:
        self.counts[f"skipped:{reason}"] += 1

    def judge_retry(self) -> None:
        self.counts["retry"] += 1

    def judge_queue(self, depth: int) -> None:
        self.queue = depth

    def export_judgement(self, judgement) -> None:
        self.judgements.append(judgement)


class Verdicts:
    """A processor exporter keeping the verdicts."""

    def __init__(self) -> None:
        self.verdicts: list = []

    def export_increments(self, increments) -> None:
        pass

    def export_verdicts(self, verdicts, increments) -> None:
        self.verdicts.extend(verdicts)

    def shutdown(self) -> None:
        pass


# the low-confidence FM-1.3 signal (same tool in a row, arguments not captured) is opt-in
UNSURE_REPEATS = ProcessorConfig(detectors={"FM-1.3": {"unknown_args_min_run": 5}})

def judge_config(base_url: str, **kw) -> JudgeConfig:
    return JudgeConfig(**{"enabled": True, "base_url": base_url, "model": "judge-test", "sample_rate": 1.0,
                          "backoff": 0.01, "timeout": 5.0, **kw})


def client(base_url: str, **kw) -> ChatClient:
    args = {"base_url": base_url, "model": "judge-test", "api_key": "sk-test", "timeout": 5.0, "max_retries": 2,
            "backoff": 0.01, "max_retry_wait": 5.0, "max_output_tokens": 256, "json_mode": True, **kw}
    return ChatClient(**args)


def run_spans(trace: int, tools: list[tuple[str, dict | None]], error_at: int = -1,
              low_id: int | None = None) -> list[SpanRecord]:
    """An agent run: root, then a model call and a tool call per tool."""
    trace_id = trace.to_bytes(8, "big") + (low_id if low_id is not None else trace).to_bytes(8, "big")
    root = (trace << 16).to_bytes(8, "big")
    spans = []
    t = 1_000_000_000
    for i, (name, args) in enumerate(tools):
        llm_id, tool_id = (((trace << 16) + 2 * i + k).to_bytes(8, "big") for k in (1, 2))
        spans.append(SpanRecord("shop", trace_id, llm_id, root, "chat gpt-4.1-mini", t, t + 10, 0, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1-mini", "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 10}))
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        if args is not None:
            attrs["gen_ai.tool.call.arguments"] = json.dumps(args)
        spans.append(SpanRecord("shop", trace_id, tool_id, root, f"execute_tool {name}", t + 20, t + 30,
                                2 if i == error_at else 0, attrs))
        t += 100
    spans.append(SpanRecord("shop", trace_id, root, b"", "invoke_agent support", 1_000_000_000, t, 0, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}))
    return spans


# --- budget ---

def test_budget_counts_calls_and_tokens_over_a_sliding_hour() -> None:
    now = [0.0]
    budget = Budget(calls_per_hour=3, tokens_per_hour=10_000, clock=lambda: now[0])
    first = budget.spend(4000)
    assert isinstance(first, list) and budget.exceeded() is None
    budget.settle(first, 1000)  # the response's usage replaces the estimate
    now[0] = 100.0
    assert isinstance(budget.spend(4000), list) and isinstance(budget.spend(4000), list)
    assert budget.spend(1) == CALLS and budget.exceeded() == CALLS
    assert budget.exceeded(0) == CALLS
    now[0] = 3600.0  # the first call left the window: 8,000 tokens spent within the hour
    assert budget.exceeded(2001) == TOKENS and budget.spend(2001) == TOKENS
    assert isinstance(budget.spend(2000), list)
    now[0] = 3700.0
    assert budget.exceeded(8000) is None and budget.exceeded(8001) == TOKENS


# --- sampling ---

def test_sampling_is_decided_by_the_trace_id() -> None:
    rng = random.Random(7)
    ids = [rng.randbytes(16) for _ in range(20_000)]
    for rate in (0.0, 0.05, 0.5, 1.0):
        share = sum(sampled(i, rate) for i in ids) / len(ids)
        assert abs(share - rate) < 0.01
        assert [sampled(i, rate) for i in ids[:100]] == [sampled(i, rate) for i in ids[:100]]
    assert not sampled(b"\xff" * 16, 0.999) and sampled(b"\xff" * 16, 1.0)


def test_rates_per_agent_and_confirmation_of_unsure_findings(chat_server) -> None:
    rec = Recorder()
    config = judge_config(chat_server.base_url, sample_rate=0.0, agents={"supp*": 1.0, "*": 0.0})
    judge = Judge(config, [rec], rec, environ={})
    out = Verdicts()
    processor = Processor(UNSURE_REPEATS, [out], judge=judge)
    processor.process(run_spans(1, [("get_order", {"id": 1}), ("refund", {"id": 1})]), now=0.0)
    processor.drain()
    assert judge._queue.qsize() == 1
    assert judge._queue.get_nowait().modes == ["FM-1.1", "FM-1.2", "FM-2.2", "FM-2.3", "FM-2.4"]
    judge._agent_rates.clear()
    judge.config = judge_config(chat_server.base_url, sample_rate=0.0, confirm_rate=1.0)
    # arguments not captured: FM-1.3 found at low confidence, so the judge is asked to confirm it
    processor.process(run_spans(2, [("search", None)] * 6), now=0.0)
    processor.process(run_spans(3, [("search", {"q": i}) for i in range(6)]), now=0.0)
    processor.drain()
    assert out.verdicts[1].findings["FM-1.3"].confidence < 0.6 and "FM-1.3" not in out.verdicts[2].findings
    pending = judge._queue.get_nowait()
    assert judge._queue.empty() and pending.trace_id == out.verdicts[1].trace_id
    assert pending.modes == ["FM-1.1", "FM-1.2", "FM-1.3", "FM-2.2", "FM-2.3", "FM-2.4"] and pending.structural == {
        "FM-1.3": out.verdicts[1].findings["FM-1.3"].confidence}


def test_a_trace_with_too_few_calls_is_not_judged(chat_server) -> None:
    rec = Recorder()
    judge = Judge(judge_config(chat_server.base_url, min_steps=3), [rec], rec, environ={})
    processor = Processor(ProcessorConfig(), [Verdicts()], judge=judge)
    processor.process(run_spans(1, [("get_order", {"id": 1})]), now=0.0)
    processor.drain()
    assert judge._queue.empty()


# --- the chat client ---

def test_client_sends_a_chat_completion_request_and_reads_usage(chat_server) -> None:
    chat_server.script.append(Reply("{}", usage=(321, 12)))
    result = client(chat_server.base_url).complete([{"role": "user", "content": "hi"}])
    assert (result.content, result.input_tokens, result.output_tokens) == ("{}", 321, 12)
    request, headers = chat_server.requests[0], chat_server.headers[0]
    assert request["model"] == "judge-test" and request["temperature"] == 0 and request["max_tokens"] == 256
    assert request["response_format"] == {"type": "json_object"} and headers["Authorization"] == "Bearer sk-test"
    chat_server.script.append(Reply("{}", usage=None))
    result = client(chat_server.base_url, api_key=None, json_mode=False).complete([])
    assert result.input_tokens is None and "Authorization" not in chat_server.headers[1]
    assert "response_format" not in chat_server.requests[1]


def test_client_retries_429_after_retry_after_and_5xx_with_backoff(chat_server) -> None:
    retries = []
    c = client(chat_server.base_url, on_retry=lambda: retries.append(1))
    chat_server.script += [Reply(status=429, headers={"Retry-After": "0"}), Reply(status=503), Reply("{}")]
    assert c.complete([]).content == "{}" and len(retries) == 2 and len(chat_server.requests) == 3
    chat_server.script += [Reply(status=500)] * 3
    with pytest.raises(CallFailed) as e:
        c.complete([])
    assert e.value.outcome == HTTP_ERROR and len(chat_server.requests) == 6  # 1 + max_retries
    chat_server.script += [Reply(status=400)]
    with pytest.raises(CallFailed) as e:
        c.complete([])
    assert e.value.outcome == HTTP_ERROR and len(chat_server.requests) == 7  # a client error is not retried
    chat_server.script += [Reply(status=429, headers={"Retry-After": "3600"})]
    with pytest.raises(CallFailed) as e:
        c.complete([])
    assert e.value.outcome == RATE_LIMITED and len(chat_server.requests) == 8  # too long a wait: given up


def test_client_gives_up_on_a_slow_endpoint_and_an_unreachable_one(chat_server) -> None:
    chat_server.script += [Reply("{}", delay=1.0)]
    with pytest.raises(CallFailed) as e:
        client(chat_server.base_url, timeout=0.2, max_retries=0).complete([])
    assert e.value.outcome == UNREACHABLE
    with pytest.raises(CallFailed) as e:
        client("http://127.0.0.1:9/v1", max_retries=1).complete([])
    assert e.value.outcome == UNREACHABLE


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after("7") == 7.0 and retry_after(None) is None and retry_after("soon") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past


# --- judgements ---

def pending_of(judge, spans):
    out = Verdicts()
    processor = Processor(UNSURE_REPEATS, [out], judge=judge)
    processor.process(spans, now=0.0)
    processor.drain()
    return judge._queue.get_nowait(), out.verdicts[0]


def test_judgement_merges_with_the_structural_verdict(chat_server) -> None:
    rec = Recorder()
    judge = Judge(judge_config(chat_server.base_url), [rec], rec, environ={})
    item, verdict = pending_of(judge, run_spans(2, [("search", None)] * 6))
    chat_server.default = lambda request: Reply(answer(request, yes={"FM-2.3": "searches unrelated to the order"}))
    judgement = judge.judge(item)
    assert rec.judgements == [judgement] and rec.counts["request:ok"] == 1 and rec.counts["tokens"] == 1280
    assert {code: judgement.verdict(code) for code in judgement.assessments} == {
        "FM-1.1": "not_found", "FM-1.2": "not_found", "FM-1.3": "rejected", "FM-2.2": "not_found", "FM-2.3": "found",
        "FM-2.4": "not_found"}
    finding = judgement.findings["FM-2.3"]
    assert list(judgement.findings) == ["FM-2.3"] and finding.basis == "judge"
    assert finding.evidence == [bytes.fromhex(span_ids(chat_server.requests[0])[-1])]
    assert asked(chat_server.requests[0]) == item.modes
    # no detector for FM-2.3/2.4; FM-1.2 is off until its rules are configured (FM-1.1 reads the instructions)
    assert verdict.not_assessed == ["FM-1.2", "FM-2.3", "FM-2.4"]
    chat_server.default = lambda request: Reply(answer(request, yes={"FM-1.3": "same search six times"}))
    assert judge.judge(item).verdict("FM-1.3") == "confirmed"


def test_the_judges_own_calls_are_priced_when_its_model_has_a_price(chat_server) -> None:
    """What the judge costs shows beside what the agents cost: its tokens priced by genai-prices, as theirs are; a
    model without a known price is counted in tokens only."""
    from mastwatch.collector.spend import call_price

    for model, priced in (("gpt-4o-mini", True), ("judge-test", False)):
        rec = Recorder()
        judge = Judge(judge_config(chat_server.base_url, model=model), [rec], rec, environ={})
        item, _ = pending_of(judge, run_spans(3, [("search", None)] * 6))
        chat_server.default = lambda request: Reply(answer(request))
        judge.judge(item)
        assert rec.counts["tokens"] == 1280
        if priced:
            assert rec.cost == pytest.approx(call_price(model, None, 1200, 80)) and rec.cost > 0
        else:
            assert not hasattr(rec, "cost")


def test_bad_answers_and_failed_calls_are_counted_never_raised(chat_server) -> None:
    rec = Recorder()
    judge = Judge(judge_config(chat_server.base_url, max_retries=0, tolerant_json=False), [rec], rec, environ={})
    item, _ = pending_of(judge, run_spans(1, [("get_order", {"id": 1}), ("refund", {"id": 1})]))
    chat_server.script += [Reply("I think FM-1.1 applies."), Reply('{"modes": {"FM-7.7": {}}}'),
                           Reply(json.dumps({"modes": {c: {"answer": "yes", "confidence": 1, "evidence": [
                               "0123456789abcdef"], "reason": "r"} for c in item.modes}})),
                           Reply(status=500), Reply(body=b"<html>")]
    for _ in range(5):
        assert judge.judge(item) is None
    assert rec.counts["rejected:malformed_json"] == rec.counts["rejected:unknown_mode"] == 1
    assert rec.counts["rejected:unknown_evidence"] == 1 and rec.counts["request:rejected"] == 3
    assert rec.counts["request:http_error"] == rec.counts["request:bad_response"] == 1 and not rec.judgements


def test_over_budget_calls_are_skipped_and_counted(chat_server) -> None:
    rec = Recorder()
    judge = Judge(judge_config(chat_server.base_url, calls_per_hour=2, tokens_per_hour=100_000), [rec], rec,
                  environ={})
    item, _ = pending_of(judge, run_spans(1, [("get_order", {"id": 1}), ("refund", {"id": 1})]))
    assert judge.judge(item) and judge.judge(item) and judge.judge(item) is None
    assert rec.counts["skipped:budget_calls"] == 1 and len(chat_server.requests) == 2
    judge = Judge(judge_config(chat_server.base_url, tokens_per_hour=4000, max_output_tokens=1024), [rec], rec,
                  environ={})
    assert judge.judge(item)  # estimated at about 1,900 tokens, used 1,280
    assert judge.judge(item)  # 1,280 + about 1,900 still fits
    assert judge.judge(item) is None and rec.counts["skipped:budget_tokens"] == 1


# --- never in the way ---

def test_ingestion_goes_on_while_the_judge_is_slow(chat_server) -> None:
    gate = threading.Event()
    chat_server.default = lambda request: Reply(answer(request), gate=gate)
    rec = Recorder()
    judge = Judge(judge_config(chat_server.base_url, queue_size=5), [rec], rec, environ={})
    judge.start()
    out = Verdicts()
    processor = Processor(ProcessorConfig(), [out], judge=judge)
    processor.process(run_spans(1, [("get_order", {"id": 1}), ("refund", {"id": 1})]), now=0.0)
    processor.drain()
    for _ in range(500):
        if chat_server.in_flight:
            break
        gate.wait(0.01)
    assert chat_server.in_flight == 1  # the judge is waiting for its first answer
    for trace in range(2, 21):
        processor.process(run_spans(trace, [("get_order", {"id": trace}), ("refund", {"id": trace})]), now=0.0)
        processor.drain()
    assert len(out.verdicts) == 20 and not rec.judgements and chat_server.in_flight == 1
    assert rec.queue == 5 and rec.counts["skipped:queue_full"] == 14  # bounded: 1 in flight, 5 queued
    gate.set()
    for _ in range(500):
        if len(rec.judgements) == 6:
            break
        time.sleep(0.01)
    assert [j.trace_id for j in rec.judgements] == [v.trace_id for v in out.verdicts[:6]]
    judge.shutdown()


def test_shutdown_skips_what_is_queued(chat_server) -> None:
    gate = threading.Event()
    chat_server.default = lambda request: Reply(answer(request), gate=gate)
    rec = Recorder()
    judge = Judge(judge_config(chat_server.base_url), [rec], rec, environ={})
    judge.start()
    processor = Processor(ProcessorConfig(), [Verdicts()], judge=judge)
    for trace in range(1, 4):
        processor.process(run_spans(trace, [("get_order", {"id": trace}), ("refund", {"id": trace})]), now=0.0)
    processor.drain()
    for _ in range(500):
        if chat_server.in_flight:
            break
        gate.wait(0.01)
    threading.Timer(0.2, gate.set).start()
    processor.shutdown()  # shuts the judge down too: the call in flight ends, the two queued are skipped
    assert rec.counts["skipped:shutdown"] == 2 and len(rec.judgements) == 1


# --- configuration ---

def test_judge_configuration_is_validated() -> None:
    assert not load(None, {}, environ={}).judge.enabled
    with pytest.raises(ConfigError, match="needs base_url and model"):
        load(None, {"judge": {"enabled": True}}, environ={})
    with pytest.raises(ConfigError, match=r"FM-9\.1"):
        load(None, {"judge": {"modes": ["FM-9.1"]}}, environ={})
    with pytest.raises(ConfigError, match=r"judge\.agents"):
        load(None, {"judge": {"agents": {"x": 2}}}, environ={})
    config = load(None, {}, environ={"MASTWATCH_JUDGE__ENABLED": "true", "MASTWATCH_JUDGE__MODEL": "m",
                                     "MASTWATCH_JUDGE__BASE_URL": "http://127.0.0.1:1/v1",
                                     "MASTWATCH_JUDGE__CALLS_PER_HOUR": "10"})
    assert config.judge.enabled and config.judge.calls_per_hour == 10
