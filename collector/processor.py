"""The mastwatch processor: normalise spans to steps, assemble traces, classify them as steps arrive,
price the spend, and hand increments (live findings) and verdicts to the exporters.

One thread owns all of this state. Receivers only validate and enqueue; a bounded queue (counted in
spans) between them gives backpressure instead of unbounded memory.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Protocol

from mastwatch.collector.threads import name_os_thread
from mastwatch.collector.throttled_log import ThrottledLog

from .assemble import SHUTDOWN, TraceAssembler
from .classified import ClassifiedTraces
from .classify.engine import NO_FINDINGS, ClassifierEngine
from .config import ProcessorConfig
from .journal import JSON, PROTOBUF, SpanJournal
from .model.modes import MODES
from .model.published import NO_INCREMENT, Increment, LiveFindings, Published
from .model.steps import Finding, Step
from .model.trace import Trace
from .model.verdict import Verdict
from .model.waste import Waste, float_sum
from .normalize import normalize_span
from .receiver.decode import SpanRecord, decode, records
from .receiver.otlp_json import parse_request
from .signature import finding_signature
from .spend import account, add_tokens, load_prices, price
from .telemetry import NullTelemetry

log = logging.getLogger(__name__)


def _findings(trace: Trace) -> dict[str, Finding]:
    """The trace's findings so far."""
    state = trace.classifier
    return NO_FINDINGS if state is None or state.findings is None else state.findings


class LiveListener(Protocol):
    def findings_changed(self, changes: list[LiveFindings]) -> None:
        """Called on the processor's thread: must not block (queue, and return)."""


# The garbage collector's thresholds in a process running a processor. Buffered traces are many long-lived objects,
# and a completed trace is freed by reference counting (nothing points back at it): the young generation is collected
# seldom. Its count is of objects allocated less those freed, so a collection runs once 2,000,000 more are alive than
# after the last one: the traces buffered under load come and go below that, and a collection walks them all, on
# whichever thread allocated last (often a gRPC worker). Lower thresholds made collections a visible share of the
# server's CPU (benchmarks/throughput.py prints it); the benchmarks measure with the same thresholds. Garbage in
# reference cycles (rare here) can reach that many objects before it is collected.
GC_THRESHOLDS: Final = (2_000_000, 20, 100)  # set by the server at start (mastwatch/service.py)

NO_WASTE: Final = Waste()  # the waste of a trace without repeated steps; shared, never changed
MAX_NAMING_SERVICES: Final = 10_000  # services remembered as naming their agents


class Exporter(Protocol):
    def export_increments(self, increments: list[Increment]) -> None:
        """What live findings add to the counters: one increment per trace whose findings changed."""
    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        """Completed traces' verdicts, each with what it adds to the counters (`increments[i]` is verdicts[i]'s)."""
    def shutdown(self) -> None: ...


class Telemetry(Protocol):
    """Self-metrics the processor reports (see exporter.prometheus.SelfMetrics)."""

    def spans_processed(self, n: int) -> None: ...
    def spans_rejected(self, reason: str, n: int) -> None: ...
    def late_spans(self, n: int) -> None: ...
    def trace_completed(self, reason: str, seconds: float) -> None: ...
    def detector_failed(self, code: str) -> None: ...
    def unpriced_calls(self, model: str, n: int) -> None: ...
    def state(self, traces: int, spans: int, queued: int, queued_bytes: int) -> None: ...


class JudgeOffer(Protocol):
    """The judge stage (collector.judge.stage.Judge): takes completed traces without blocking."""

    def offer(self, trace: Trace, verdict: Verdict) -> None: ...
    def shutdown(self) -> None: ...


def _diff(new: dict, old: dict) -> dict:
    return {k: v - old.get(k, 0) for k, v in new.items() if v - old.get(k, 0) > 0}


class Processor:
    def __init__(self, config: ProcessorConfig, exporters: Iterable[Exporter],
                 telemetry: Telemetry | None = None, judge: JudgeOffer | None = None,
                 listeners: Iterable[LiveListener] = ()) -> None:
        self.config = config
        self.judge = judge
        self.listeners = list(listeners)
        self.exporters = list(exporters)
        # signatures of known problems not to alert on (`mastwatch mute`), replaced whole by whoever reads them
        self.muted: frozenset[str] = frozenset()
        self.telemetry = telemetry = telemetry or NullTelemetry()
        self._deferred: dict[Trace, None] = {}  # live findings waiting for the root or decision_wait
        # services some of whose runs named their agent: their runs' live findings wait for the agent's name
        self._naming_services: set[str] = set()
        self._unreadable = ThrottledLog(log)
        self._journal_errors = ThrottledLog(log)
        load_prices()
        self.engine = ClassifierEngine(config.detectors, on_detector_error=telemetry.detector_failed,
                                       tools=config.tools, agents=config.agents)
        self.assembler = TraceAssembler(
            decision_wait=config.decision_wait, max_age=config.max_trace_age,
            max_spans=config.max_spans_per_trace, max_traces=config.max_traces,
            max_buffered_spans=config.max_buffered_spans,
            late_span_memory=config.late_span_memory, on_complete=self._complete)
        self.journal: SpanJournal | None = None
        if config.journal and config.journal_path:
            self.journal = SpanJournal(config.journal_path, config.max_trace_age + config.decision_wait + 60)
        self.classified: ClassifiedTraces | None = None
        if config.late_span_memory_path and config.late_span_memory:
            self.classified = ClassifiedTraces(config.late_span_memory_path, config.late_span_memory)
            self.assembler.remember(self.classified.load())  # the previous process's: their spans are late
        self._queue: queue.SimpleQueue[tuple[list[SpanRecord], int] | None] = queue.SimpleQueue()
        self._queued_spans = 0
        self._queued_bytes = 0
        self._max_queued_bytes = config.queue_mib << 20
        self._queue_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._stopping = False
        self._late_reported = 0

    # --- receiving side (any thread) ---
    def submit(self, spans: list[SpanRecord], size: int, payload: bytes | None = None, kind: int = PROTOBUF) -> bool:
        """Queue the spans of one request of `size` bytes (what its decoded spans take grows with it: content
        captured is kept whole until normalised); False when the queue is full, in spans or in bytes (the caller
        signals backpressure). With a journal, the request (`payload`, of `kind`) is in it when this returns True."""
        n = len(spans)
        with self._queue_lock:
            if not self.admits(n, size):
                return False
            self._queued_spans += n
            self._queued_bytes += size
        journal = self.journal
        if journal is not None and payload is not None:
            try:
                journal.append(kind, payload, {s.trace_id for s in spans})
            except OSError as e:  # a full disk: not acknowledged, so the client keeps the spans and retries
                with self._queue_lock:
                    self._queued_spans -= n
                    self._queued_bytes -= size
                self._journal_errors.warning("journal", f"cannot journal a request ({e}): refused, to be retried")
                return False
        self._queue.put((spans, size))
        return True

    def recover(self, stored: Callable[[set[bytes]], set[bytes] | None] | None = None) -> int:
        """Replay the journal's requests into assembly (before the receivers start); returns the spans read. Spans
        of traces the previous process classified are late, as they would be live. `stored` says which of the
        replayed traces already have rows (the store, once it has written what it had queued): a process killed
        after queueing a trace's rows and before remembering it as classified left it in the journal too."""
        journal = self.journal
        if journal is None:
            return 0
        if stored is not None:
            replayed: set[bytes] = set()
            for spans, segment in self._journaled(journal, quiet=True):
                request = {s.trace_id for s in spans}
                journal.holds(segment, request)  # before any is marked classified: a segment goes once all its are
                replayed |= request
            held = stored(replayed) if replayed else set()
            if held is None:
                log.warning("journal: the store cannot say which replayed traces it holds already; a trace whose "
                            "rows were queued just before the process stopped may get a second row")
            elif held:
                ids = sorted(held)
                self.assembler.remember(ids)
                journal.classified(ids)
                if self.classified is not None:
                    self.classified.add(ids)
                log.info("journal: %d replayed traces have rows already; their spans are late", len(ids))
        spans_read = 0
        for spans, segment in self._journaled(journal):
            journal.holds(segment, {s.trace_id for s in spans})
            self.process(spans)
            spans_read += len(spans)
        if spans_read:
            log.info("journal: %d spans of requests accepted before the restart replayed", spans_read)
        return spans_read

    @staticmethod
    def _journaled(journal: SpanJournal, quiet: bool = False) -> Iterator[tuple[list[SpanRecord], Any]]:
        """The journal's requests decoded again, with their segments."""
        for kind, body, segment in journal.recovered():
            try:
                spans = records(parse_request(body)).spans if kind == JSON else decode(body).spans
            except ValueError as e:
                if not quiet:
                    log.warning("journal: a request that cannot be decoded again is skipped: %s", e)
                continue
            yield spans, segment

    def admits(self, spans: int, size: int) -> bool:
        """Whether the queue has room now for a request of `spans` spans and `size` bytes (without the lock: the
        receiver asks before decoding; `submit` asks again)."""
        # a request larger than the whole queue is taken when the queue is empty, never refused forever
        return not self._stopping and not (self._queued_spans and (
            self._queued_spans + spans > self.config.queue_spans or
            self._queued_bytes + size > self._max_queued_bytes))

    @property
    def queued_spans(self) -> int:
        return self._queued_spans

    def start(self) -> None:
        self._worker = threading.Thread(target=self._run, name="mastwatch-processor", daemon=True)
        self._worker.start()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop accepting, process what is queued, classify every buffered trace, flush the exporters."""
        with self._queue_lock:
            self._stopping = True
        self._queue.put(None)
        if self._worker is not None:
            self._worker.join(timeout)
        if self.judge is not None:
            self.judge.shutdown()
        for exporter in self.exporters:
            exporter.shutdown()
        if self.classified is not None:
            self.classified.close()
        if self.journal is not None:
            self.journal.close()

    def _run(self) -> None:
        name_os_thread()
        tick = self.config.tick
        next_tick = time.monotonic() + tick
        while True:
            try:
                request = self._queue.get(timeout=max(next_tick - time.monotonic(), 0.0))
            except queue.Empty:
                request = ([], 0)  # time to tick
            if request is None:
                break
            spans, size = request
            if spans:
                try:
                    self.process(spans)
                except Exception:
                    log.exception("processing a request failed; its spans are lost")
                with self._queue_lock:
                    self._queued_spans -= len(spans)
                    self._queued_bytes -= size
            now = time.monotonic()
            if now >= next_tick:
                self.tick(now)
                next_tick = now + tick
        self.drain()

    # --- processing (processor thread, or directly for replay) ---
    def process(self, spans: list[SpanRecord], now: float | None = None) -> None:
        """Normalise, assemble and classify one request's spans. The traces whose findings changed are published
        once each, after the request (a loop's repeats in one request are one increment, not one each)."""
        now = time.monotonic() if now is None else now
        assembler, engine = self.assembler, self.engine
        steps: list[Step] = []
        for record in spans:
            try:
                steps.append(normalize_span(record))
            except Exception as e:  # one odd span never costs the others
                self._unreadable.warning("unreadable", f"span {record.span_id.hex()} of trace "
                                         f"{record.trace_id.hex()} could not be normalised ({type(e).__name__}: {e}); "
                                         "dropped")
                self.telemetry.spans_rejected("unreadable", 1)
        touched: dict[Trace, None] = {}  # the traces the request added to, in order
        last: Trace | None = None  # (a trace's spans mostly come together: the dict is not asked again for each)
        for step in steps:
            trace = assembler.add(step, now)
            if trace is not None and trace is not last:
                touched[trace] = None
                last = trace
        open_traces = [trace for trace in touched if not trace.completed]  # (one completed: its verdict had it all)
        engine.prepare(open_traces)  # the detectors of its new traces, made in one pass
        changed_traces = [trace for trace in open_traces if engine.catch_up(trace)]
        if changed_traces and self.listeners:
            self._tell([(trace, _findings(trace)) for trace in changed_traces], False)
        ready = self._ready(changed_traces, now) if changed_traces else changed_traces
        if ready:
            self._publish_live(ready)
        self.telemetry.spans_processed(len(spans))

    def tick(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self._deferred:
            waiting, self._deferred = list(self._deferred), {}
            ready = self._ready([t for t in waiting if not t.completed], now)
            if ready:
                self._publish_live(ready)
        self.assembler.tick(now)
        self._report_state()

    def _ready(self, traces: list[Trace], now: float) -> list[Trace]:
        """The traces whose live findings can be published now; the others wait (in `_deferred`). Published live
        only while the steps came in the order the final verdict reads them (else only the verdict counts), and
        once the root (which names the agent) arrived or `decision_wait` passed: the labels and the modes counted
        then do not depend on the order spans arrive in. A trace whose steps name no agent, of a service whose runs
        have named one, waits for its root or its end: its series would be fixed under the service's name."""
        wait = self.config.decision_wait
        ready = []
        for trace in traces:
            if not trace.in_order:
                continue
            if trace.root is not None or trace.emitted is not None or (
                    now - trace.first_seen >= wait and not self._unnamed_yet(trace)):
                ready.append(trace)
            else:
                self._deferred[trace] = None
        return ready

    def _unnamed_yet(self, trace: Trace) -> bool:
        """Whether the trace's agent is still unknown while its service's runs name theirs (on the root, mostly)."""
        return bool(self._naming_services) and trace.first().service in self._naming_services and \
            trace.agent() is None

    def drain(self, reason: str = SHUTDOWN) -> None:
        self.assembler.drain(reason)
        self._report_state()

    def _report_state(self) -> None:
        stats = self.assembler.stats
        if stats.late_spans != self._late_reported:
            self.telemetry.late_spans(stats.late_spans - self._late_reported)
            self._late_reported = stats.late_spans
        self.telemetry.state(len(self.assembler.traces), self.assembler.spans_buffered, self._queued_spans,
                             self._queued_bytes)

    # --- publishing ---
    def _labels(self, trace: Trace) -> Published:
        """The trace's service and agent, fixed when first published so all its series agree."""
        if trace.emitted is None:
            service = trace.first().service
            agent = trace.agent()
            if agent is not None and len(self._naming_services) < MAX_NAMING_SERVICES:
                self._naming_services.add(service)
            trace.emitted = Published(service, agent or service)
        return trace.emitted

    def _increment(self, published: Published, findings: Iterable[Finding], waste: Waste) -> Increment:
        if not findings and not waste.repeated_by_tool:
            return NO_INCREMENT
        shown = published.modes
        if shown is None:
            shown = published.modes = set()
        new = [f for f in findings if f.code not in shown]
        shown.update(f.code for f in new)
        silenced = self._muted_codes(published.agent, new) if new and self.muted else []
        modes = [MODES[f.code] for f in new if f.code not in silenced]
        muted = [MODES[code] for code in silenced]
        old = published.waste or NO_WASTE
        increment = Increment(published.service, published.agent, modes,
                              _diff(waste.repeated_by_tool, old.repeated_by_tool),
                              _diff(waste.tokens, old.tokens), _diff(waste.cost, old.cost),
                              _diff(waste.seconds, old.seconds), muted)
        published.waste = Waste(dict(waste.repeated_by_tool), dict(waste.tokens), dict(waste.cost),
                                dict(waste.seconds))
        return increment

    def _muted_codes(self, agent: str, findings: Iterable[Finding]) -> list[str]:
        """The modes of `findings` whose signature is muted."""
        muted = self.muted
        return [f.code for f in findings if finding_signature(agent, f.code, f) in muted]

    def _waste(self, trace: Trace, findings: Iterable[Finding], waste: Waste | None = None) -> Waste:
        waste = waste or Waste()
        for f in findings:
            if f.repeated:
                account(waste, f.code, f.repeated, trace.llm_steps)
        return waste

    def _tell(self, traces: list[tuple[Trace, dict[str, Finding]]], final: bool) -> None:
        """The listeners hear every trace whose findings changed, at once (not after `decision_wait`)."""
        changes = []
        for trace, found in traces:
            findings = list(found.values())
            first = trace.first()
            service = first.service
            if self.muted:  # a known problem is no reason to act on a run
                muted = self._muted_codes(trace.agent() or service, findings)
                findings = [f for f in findings if f.code not in muted]
            waste = self._waste(trace, findings)
            tokens, cost = 0, 0.0
            for n in waste.tokens.values():
                tokens += n
            for usd in waste.cost.values():
                cost += usd
            changes.append(LiveFindings(trace.trace_id, service, trace.agent() or service, findings, tokens, cost,
                                        final, waste.seconds_total, first.version, first.environment))
        for listener in self.listeners:
            try:
                listener.findings_changed(changes)
            except Exception:
                log.exception("listener %s failed on %d traces' findings", type(listener).__name__, len(changes))

    def _publish_live(self, traces: list[Trace]) -> None:
        increments: list[Increment] = []
        for trace in traces:
            published = self._labels(trace)
            findings = _findings(trace).values()
            live = published.live = self._waste(trace, findings, published.live)  # new steps
            increments.append(self._increment(published, findings, live))  # modes not shown before
        for exporter in self.exporters:
            try:
                exporter.export_increments(increments)
            except Exception:  # one failing exporter costs the others nothing
                log.exception("exporter %s failed on %d live increments", type(exporter).__name__, len(increments))

    def _complete(self, completed: list[tuple[Trace, str]]) -> None:
        """Classify, account and export a batch of completed traces, one stage at a time over the batch."""
        started = time.perf_counter()
        engine = self.engine
        for trace, _ in completed:
            engine.catch_up(trace)  # steps of a trace completed while its request was assembled
        found = [engine.finish(trace) for trace, _ in completed]
        verdicts: list[Verdict] = []
        increments: list[Increment] = []
        for i, (trace, reason) in enumerate(completed):
            findings = found[i]
            published = self._labels(trace)
            if findings:  # in order, the detectors are those that published live: only new steps are accounted
                waste = self._waste(trace, findings.values(), published.live if trace.in_order else None)
            else:
                waste = NO_WASTE
            increments.append(self._increment(published, list(findings.values()), waste))
            verdicts.append(self._verdict(trace, published, findings, waste, reason))
        for exporter in self.exporters:
            try:
                exporter.export_verdicts(verdicts, increments)
            except Exception:  # one failing exporter costs the others (and the processor's thread) nothing
                log.exception("exporter %s failed on %d verdicts; they are lost to it", type(exporter).__name__,
                              len(verdicts))
        if self.listeners:
            self._tell([(trace, found[i]) for i, (trace, _) in enumerate(completed) if found[i]], True)
        if self.classified is not None or self.journal is not None:  # after the store queued their rows
            ids = [trace.trace_id for trace, _ in completed]
            if self.classified is not None:
                self.classified.add(ids)
            if self.journal is not None:
                self.journal.classified(ids)
        judge = self.judge
        for i, (trace, _) in enumerate(completed):
            if judge is not None:
                judge.offer(trace, verdicts[i])
            engine.release(trace)  # its detectors are kept for a new trace
            trace.emitted = None
        seconds = time.perf_counter() - started  # what each trace of the batch waited for its verdict
        for _, reason in completed:
            self.telemetry.trace_completed(reason, seconds)

    def _verdict(self, trace: Trace, published: Published, findings: dict[str, Finding], waste: Waste,
                 reason: str) -> Verdict:
        by_model: dict[tuple[str, str | None], list[Step]] = {}
        group: list[Step] | None = None
        model_of: str | None = None  # the group's (canonical strings: compared by identity)
        provider_of: str | None = None
        for s in trace.llm_steps:
            if group is None or s.model is not model_of or s.provider is not provider_of:
                model_of, provider_of = s.model, s.provider
                key = (model_of or "unknown", provider_of)
                group = by_model.get(key)
                if group is None:
                    group = by_model[key] = []
            group.append(s)
        tokens: dict[tuple[str, str], int] = {}
        cost: dict[str, float] = {}
        calls: dict[str, tuple[int, float]] = {}
        unpriced: dict[str, int] | None = None  # model -> inference calls (made at the first: most traces have none)
        input_tokens = output_tokens = 0
        for (model, provider), steps in by_model.items():
            uncached = output = cache_read = cache_write = nanoseconds = 0
            for s in steps:
                input_tokens += s.input_tokens
                uncached += max(s.input_tokens - s.cache_read_tokens - s.cache_write_tokens, 0)
                output += s.output_tokens
                cache_read += s.cache_read_tokens
                cache_write += s.cache_write_tokens
                nanoseconds += max(s.end_ns - s.start_ns, 0)
            output_tokens += output
            called = calls.get(model)  # one model through two providers: one entry
            calls[model] = (len(steps), nanoseconds / 1e9) if called is None else \
                (called[0] + len(steps), called[1] + nanoseconds / 1e9)
            if uncached:
                add_tokens(tokens, model, "input", uncached)
            if output:
                add_tokens(tokens, model, "output", output)
            if cache_read:
                add_tokens(tokens, model, "cache_read", cache_read)
            if cache_write:
                add_tokens(tokens, model, "cache_write", cache_write)
            spent = price(None if model == "unknown" else model, provider, steps)
            if spent is None:
                if unpriced is None:
                    unpriced = {}
                unpriced[model] = unpriced.get(model, 0) + len(steps)
            else:
                cost[model] = cost.get(model, 0.0) + spent
        if unpriced is not None:
            for model, n in unpriced.items():
                self.telemetry.unpriced_calls(model, n)
        models = [model for model, _ in by_model] if len(by_model) < 2 else sorted({m for m, _ in by_model})
        first = trace.first()
        return Verdict(
            trace_id=trace.trace_id.hex(), service=published.service, agent=published.agent,
            models=models, started_at_ns=trace.started_ns, ended_at_ns=trace.ended_ns,
            steps=len(trace.steps), llm_calls=len(trace.llm_steps), tool_calls=trace.tool_calls,
            input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=float_sum(cost),
            findings=findings, waste=waste, completion=reason, tokens=tokens, cost=cost,
            not_assessed=self.engine.not_assessed_for(trace), trace_steps=trace.steps, model_calls=calls,
            muted=self._muted_codes(published.agent, findings.values()) if self.muted and findings else None,
            version=first.version, environment=first.environment)
