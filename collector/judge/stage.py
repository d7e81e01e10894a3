"""The judge stage: samples completed traces, queues a compact transcript of each, and a worker thread asks
the chat endpoint about them within a budget of calls and tokens per hour.

A trace is offered when it completes. It is judged when it is sampled (by its trace id, as OpenTelemetry's
TraceIdRatioBased sampler does, so every replica decides alike) and has at least `min_steps` model or tool
calls. Modes assessed: `modes` (by default those structure cannot settle), plus every structural finding of
the trace whose confidence is below `confirm_below`, to confirm or reject; traces with such findings are
sampled at `confirm_rate`. Nothing here blocks the processor: the queue is bounded and a full queue, an
exhausted budget or a failed call skips the trace (counted).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mastwatch.collector.durations import Duration
from mastwatch.collector.threads import name_os_thread

from ..bounded import remember
from ..model.judgement import Judgement
from ..model.modes import MODES
from ..model.steps import StepKind
from ..model.trace import Trace
from ..model.verdict import Verdict
from ..spend import call_price
from .budget import Budget
from .client import CallFailed, ChatClient
from .prompt import AnswerRejected, messages, parse_answer
from .transcript import Transcript, build_transcript

log = logging.getLogger(__name__)

# modes no structural detector settles (FM-2.2's finds made-up values only, not a guess between two real ones)
UNSETTLED = ("FM-1.1", "FM-1.2", "FM-2.2", "FM-2.3", "FM-2.4")
CHARS_PER_TOKEN = 3  # prompt size estimate before the call (JSON and ids are denser than prose)


class JudgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = False
    base_url: str | None = Field(None, description="OpenAI-compatible API root, e.g. https://api.openai.com/v1")
    model: str | None = None
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key")
    timeout: Duration = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0)
    backoff: Duration = Field(1.0, gt=0, description="first retry wait, doubled each time")
    max_retry_wait: Duration = Field(60.0, gt=0, description="a longer wait (Retry-After) ends the attempt")
    max_output_tokens: int = Field(1024, ge=16)
    json_mode: bool = Field(True, description='send response_format {"type": "json_object"}')
    tolerant_json: bool = Field(True, description="take the JSON object out of a fenced code block or prose")
    modes: list[str] = Field(default_factory=lambda: list(UNSETTLED))
    confirm_below: float = Field(0.6, ge=0, le=1, description="structural findings less sure than this are judged")
    sample_rate: float = Field(0.05, ge=0, le=1)
    confirm_rate: float = Field(1.0, ge=0, le=1, description="sample rate of traces with such findings")
    agents: dict[str, float] = Field(default_factory=dict, description="agent name glob -> sample rate")
    min_steps: int = Field(2, ge=1, description="model and tool calls a trace needs to be judged")
    calls_per_hour: int = Field(60, ge=1)
    tokens_per_hour: int = Field(500_000, ge=1)
    queue_size: int = Field(100, ge=1, description="transcripts waiting for the judge")
    max_transcript_steps: int = Field(200, ge=2)
    max_transcript_chars: int = Field(20_000, ge=1000)

    @field_validator("modes")
    @classmethod
    def _known_modes(cls, modes: list[str]) -> list[str]:
        unknown = [m for m in modes if m not in MODES]
        if unknown:
            raise ValueError(f"unknown failure modes {unknown}; codes are {list(MODES)}")
        return sorted(set(modes))

    @field_validator("agents")
    @classmethod
    def _rates(cls, agents: dict[str, float]) -> dict[str, float]:
        bad = {a: r for a, r in agents.items() if not 0 <= r <= 1}
        if bad:
            raise ValueError(f"sample rates must be from 0 to 1: {bad}")
        return agents

    @model_validator(mode="after")
    def _endpoint(self) -> JudgeConfig:
        if self.enabled and not (self.base_url and self.model):
            raise ValueError("an enabled judge needs base_url and model")
        return self


@dataclass(frozen=True, slots=True)
class Pending:
    trace_id: str
    service: str
    agent: str
    started_at_ns: int
    transcript: Transcript
    modes: list[str]
    structural: dict[str, float]  # mode -> confidence of the structural finding, for the modes it found


class JudgeSink(Protocol):
    def export_judgement(self, judgement: Judgement) -> None: ...


class JudgeTelemetry(Protocol):
    """Self-metrics of the judge (see exporter.prometheus.JudgeMetrics)."""

    def judge_request(self, outcome: str, seconds: float) -> None: ...
    def judge_tokens(self, input_tokens: int, output_tokens: int) -> None: ...
    def judge_cost(self, usd: float) -> None: ...
    def judge_rejected(self, reason: str) -> None: ...
    def judge_skipped(self, reason: str) -> None: ...
    def judge_retry(self) -> None: ...
    def judge_queue(self, depth: int) -> None: ...


def sampled(trace_id: bytes, rate: float) -> bool:
    """Decided by the trace id's low 64 bits, as OpenTelemetry's TraceIdRatioBased sampler does."""
    return int.from_bytes(trace_id[8:16], "big") < rate * 2 ** 64


class Judge:
    def __init__(self, config: JudgeConfig, sinks: Iterable[JudgeSink], telemetry: JudgeTelemetry,
                 environ: dict[str, str] | None = None) -> None:
        if not (config.base_url and config.model):
            raise ValueError("the judge needs base_url and model")
        self.config = config
        self.sinks = list(sinks)
        self.telemetry = telemetry
        api_key = (os.environ if environ is None else environ).get(config.api_key_env)
        if not api_key:
            log.warning("judge: $%s is not set; requests carry no API key", config.api_key_env)
        self._stop = threading.Event()
        self.client = ChatClient(config.base_url, config.model, api_key, config.timeout, config.max_retries,
                                 config.backoff, config.max_retry_wait, config.max_output_tokens, config.json_mode,
                                 self._stop, telemetry.judge_retry)
        self.budget = Budget(config.calls_per_hour, config.tokens_per_hour)
        self._queue: queue.Queue[Pending | None] = queue.Queue(config.queue_size)
        self._agent_rates: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, name="mastwatch-judge", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def shutdown(self) -> None:
        """Finish the call in flight (its retries are cut short); what is still queued is skipped."""
        self._stop.set()
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self.telemetry.judge_skipped("shutdown")
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(self.config.timeout + 1)
        self.telemetry.judge_queue(0)

    # --- processor thread: must stay cheap ---
    def _agent_rate(self, agent: str) -> float:
        rate = self._agent_rates.get(agent)
        if rate is None:
            rate = next((r for pattern, r in self.config.agents.items() if fnmatch.fnmatchcase(agent, pattern)),
                        self.config.sample_rate)
            remember(self._agent_rates, agent, rate, 10_000)  # agent names come from spans
        return rate

    def offer(self, trace: Trace, verdict: Verdict) -> None:
        """A completed trace: queued for the judge if it is sampled, qualifies and fits (never raises)."""
        try:
            self._offer(trace, verdict)
        except Exception:
            log.exception("judge: trace %s could not be queued", verdict.trace_id)

    def _offer(self, trace: Trace, verdict: Verdict) -> None:
        c = self.config
        if self._stop.is_set():
            return
        unsure = {code: f.confidence for code, f in verdict.findings.items() if f.confidence < c.confirm_below}
        if not sampled(trace.trace_id, c.confirm_rate if unsure else self._agent_rate(verdict.agent)):
            return
        if len(trace.llm_steps) + trace.tool_calls < c.min_steps:
            return
        limit = self.budget.exceeded()
        if limit is not None:
            self.telemetry.judge_skipped(limit)
            return
        modes = sorted(set(c.modes) | set(unsure))
        steps = [s for s in trace.ordered_steps() if s.kind is not StepKind.OTHER or s.is_root]
        transcript = build_transcript(steps, verdict.agent, c.max_transcript_steps, c.max_transcript_chars)
        structural = {code: verdict.findings[code].confidence for code in modes if code in verdict.findings}
        item = Pending(verdict.trace_id, verdict.service, verdict.agent, verdict.started_at_ns, transcript, modes,
                       structural)
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.telemetry.judge_skipped("queue_full")
            return
        self.telemetry.judge_queue(self._queue.qsize())

    # --- worker thread ---
    def _run(self) -> None:
        name_os_thread()
        while True:
            item = self._queue.get()
            if item is None:
                return
            self.telemetry.judge_queue(self._queue.qsize())
            try:
                self.judge(item)
            except Exception:
                log.exception("judge: trace %s failed", item.trace_id)

    def judge(self, item: Pending) -> Judgement | None:
        """Ask about one trace and hand the judgement to the sinks; None when skipped, failed or rejected."""
        prompt = messages(item.transcript, item.modes, item.service, item.agent)
        estimate = sum(len(m["content"]) for m in prompt) // CHARS_PER_TOKEN + self.config.max_output_tokens
        entry = self.budget.spend(estimate)
        if isinstance(entry, str):
            self.telemetry.judge_skipped(entry)
            return None
        started = time.monotonic()
        try:
            result = self.client.complete(prompt)
        except CallFailed as e:
            self.budget.settle(entry, 0)
            log.warning("judge: trace %s not judged: %s", item.trace_id, e)
            self.telemetry.judge_request(e.outcome, time.monotonic() - started)
            return None
        elapsed = time.monotonic() - started
        if result.input_tokens is not None and result.output_tokens is not None:
            self.budget.settle(entry, result.input_tokens + result.output_tokens)
        self.telemetry.judge_tokens(result.input_tokens or 0, result.output_tokens or 0)
        if result.input_tokens or result.output_tokens:
            usd = call_price(self.client.model, None, result.input_tokens or 0, result.output_tokens or 0)
            if usd is not None:  # a model genai-prices does not know: its tokens are counted, not priced
                self.telemetry.judge_cost(usd)
        try:
            assessments = parse_answer(result.content, item.modes, item.transcript.span_ids, self.config.tolerant_json)
        except AnswerRejected as e:
            log.warning("judge: answer on trace %s rejected: %s", item.trace_id, e)
            self.telemetry.judge_rejected(e.reason)
            self.telemetry.judge_request("rejected", elapsed)
            return None
        self.telemetry.judge_request("ok", elapsed)
        judgement = Judgement(item.trace_id, item.service, item.agent, item.started_at_ns, self.config.model or "",
                              assessments, item.structural)
        for sink in self.sinks:
            try:
                sink.export_judgement(judgement)
            except Exception:
                log.exception("judge: exporting the judgement of trace %s failed", item.trace_id)
        return judgement
