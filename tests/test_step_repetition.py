"""FM-1.3 step repetition: the detector on step sequences, and the whole processor path with its spend."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from genai_prices import Usage, calc_price
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from mastwatch.collector.classify.detectors.step_repetition import StepRepetition, StepRepetitionSettings
from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.model.content import PREVIEW_CHARS, RAW_LIMIT, Content, canonical_json, fingerprint
from mastwatch.collector.model.steps import Finding, Step, StepKind
from mastwatch.collector.model.trace import Trace
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.processor import Increment, Processor
from mastwatch.collector.receiver.decode import records

_ids = itertools.count(1)
MS = 1_000_000


def fp(value: Any) -> int:
    return fingerprint(canonical_json(value))


def make_step(kind: StepKind, **fields: Any) -> Step:
    n = next(_ids)
    return Step(trace_id=b"\x01" * 16, span_id=n.to_bytes(8, "big"), parent_span_id=b"\x09" * 8, kind=kind,
                name=f"step {n}", start_ns=n * MS, end_ns=n * MS + MS // 2, service="svc", **fields)


def call(tool: str, args: Any = None, *, result: Any = None, error: bool = False, known: bool = True) -> Step:
    """A tool step; `known=False` is a call whose arguments were not captured."""
    return make_step(StepKind.TOOL, tool=tool, args=Content(args) if known else None,
                     result=None if result is None else Content(result), error=error)


def reply(text: str, finish: tuple[str, ...] = ("stop",)) -> Step:
    return make_step(StepKind.LLM, model="gpt-4.1-mini", output_fingerprint=fingerprint(text),
                     output_chars=len(text), output_preview=text[:40], finish_reasons=finish)


def run(steps: list[Step], **settings: Any) -> tuple[list[Finding | None], Finding | None]:
    """What observe returned for each step, and the final finding."""
    detector = StepRepetition(StepRepetitionSettings(**settings), Trace(b"\x01" * 16, 0.0, 0.0))
    live = [detector.observe(s) for s in steps]
    return live, detector.finish()


def fired_at(live: list[Finding | None]) -> list[int]:
    return [i + 1 for i, f in enumerate(live) if f is not None]


# --- same call with equivalent arguments ------------------------------------------------------


def test_three_equivalent_calls_fire_live_with_evidence() -> None:
    steps = [call("search_flights", {"to": "Rome", "date": "2026-05-01"}) for _ in range(3)]
    live, final = run(steps)
    assert fired_at(live) == [3]
    finding = live[2]
    assert finding is not None and finding.code == "FM-1.3" and finding.basis == "structure"
    assert finding.evidence == [s.span_id for s in steps]
    assert "search_flights" in finding.reason and "3 times" in finding.reason
    assert finding.repeated == steps[1:]
    assert final is not None and final.evidence == finding.evidence


def test_two_calls_do_not_fire() -> None:
    live, final = run([call("search", {"q": "x"}), call("search", {"q": "x"})])
    assert fired_at(live) == [] and final is None


def test_different_arguments_do_not_fire() -> None:
    assert run([call("search", {"q": q}) for q in ("a", "b", "c", "d")])[1] is None


def test_key_order_does_not_matter() -> None:
    live, _ = run([call("search", {"q": "x", "n": 1}), call("search", {"n": 1, "q": "x"}),
                   call("search", json.dumps({"n": 1, "q": "x"}, indent=2))])
    assert fired_at(live) == [3]


@pytest.mark.parametrize(("raw", "canonical"), [
    ('{"n":1,"q":"x"}', '{"n":1,"q":"x"}'),  # canonical already
    ('{"q": "x", "n": 1}', '{"n":1,"q":"x"}'),
    ('[{"b":[2,{"d":null,"c":true}],"a":"\u00e9"}]', '[{"a":"é","b":[2,{"c":true,"d":null}]}]'),
    ('{"q":"a  b"}', '{"q":"a b"}'),
    ('{"q":" a b "}', '{"q":"a b"}'),
    ('{"q":"a\\nb"}', '{"q":"a b"}'),
    ('{"q":"a\\tb\\r"}', '{"q":"a b"}'),
    ('{"q":"a\\u000bb"}', '{"q":"a b"}'),
    ('{"q":"a\u00a0b"}', '{"q":"a b"}'),
    ('{"q":"a\u2003b"}', '{"q":"a b"}'),
    ('{"q":"{\\"b\\": 1, \\"a\\": 2.0}"}', '{"q":{"a":2,"b":1}}'),  # JSON inside a string
    ('{"q":"[1, 2]"}', '{"q":[1,2]}'),
    ('{"q":"{not json"}', '{"q":"{not json"}'),
    ('{"n":2.0,"m":2.5,"e":1e3}', '{"e":1000,"m":2.5,"n":2}'),
    ('{"q":"C:\\\\new"}', '{"q":"C:\\\\new"}'),  # an escaped backslash, not whitespace
    ('{"q":"say \\"hi\\" "}', '{"q":"say \\"hi\\""}'),
    ('{"a": {"z": "v1.2", "y": [true, false]}}', '{"a":{"y":[true,false],"z":"v1.2"}}'),
    ('  {"q": 1}', '{"q":1}'),
    ("plain  text", '"plain text"'),
    ({"b": " x ", "a": 1.0}, '{"a":1,"b":"x"}'),
])
def test_canonical_json(raw: Any, canonical: str) -> None:
    assert canonical_json(raw) == canonical


def test_content_keys_match_for_equivalent_values_small_or_large() -> None:
    value = {"items": [{"sku": f"A{i}", "qty": i} for i in range(20)], "note": "x"}
    compact, indented = json.dumps(value, separators=(",", ":")), json.dumps(value, indent=4)
    assert len(compact) <= RAW_LIMIT < len(indented)  # one kept raw until compared, one reduced at once
    small, large = Content(compact), Content(indented)
    assert small.key == large.key == canonical_json(value)  # a short canonical text is the key
    assert small.fingerprint == large.fingerprint == fingerprint(canonical_json(value))
    assert small.preview == large.preview == canonical_json(value)[:PREVIEW_CHARS - 1] + "…"
    long_value = {"text": "word " * 200}
    assert Content(long_value).key == Content(json.dumps(long_value)).key == fingerprint(canonical_json(long_value))
    assert Content({"q": 1}).key != Content({"q": "1"}).key


def test_retries_after_a_failure_are_not_repetition() -> None:
    failing = [call("charge_card", {"amount": 10}, error=True) for _ in range(5)]
    live, _ = run(failing)  # retry_limit 2: calls 2 and 3 are retries, 1, 4 and 5 count
    assert fired_at(live) == [5]
    live, _ = run([call("charge_card", {"amount": 10}, error=True) for _ in range(6)], retry_limit=3)
    assert fired_at(live) == [6]
    live, _ = run([call("charge_card", {"amount": 10}, error=True) for _ in range(3)], retry_limit=0)
    assert fired_at(live) == [3]


def test_polling_tools_are_exempt() -> None:
    assert run([call("get_job_status", {"id": 7}) for _ in range(6)], polling_tools=["get_*_status"])[1] is None
    live, _ = run([call("get_job_result", {"id": 7}) for _ in range(3)], polling_tools=["get_*_status"])
    assert fired_at(live) == [3]


def test_a_changed_result_means_the_world_changed() -> None:
    assert run([call("read_queue", {"q": "jobs"}, result=f"{n} jobs") for n in (3, 2, 1)])[1] is None
    live, _ = run([call("read_queue", {"q": "jobs"}, result="3 jobs") for _ in range(3)])
    assert fired_at(live) == [3]


def test_legit_re_read_after_edit() -> None:
    path = {"path": "src/app.py"}
    assert run([call("read_file", path), call("edit_file", path), call("read_file", path)])[1] is None


def lookup(tool: str, args: dict[str, Any], result: dict[str, Any]) -> Step:
    """A tool step whose arguments and result were captured as text, as normalisation records them."""
    step = call(tool, args, result=result)
    step.args_text, step.result_text = json.dumps(args), json.dumps(result)
    return step


@pytest.mark.parametrize(("changed", "fires"), [("#W2", True), ("#W1", False), (None, False)])
def test_a_lookup_again_is_repetition_unless_a_change_since_may_have_touched_its_record(changed: str | None,
                                                                                       fires: bool) -> None:
    """A change to another order leaves this one as it was: reading it again is redone work. A change to it, or
    one naming no record, makes the second read a check of the change."""
    order = {"order_id": "#W1"}
    change = {"order_id": changed, "zip": "10228"} if changed else {"zip": "10228"}
    steps = [lookup("get_order_details", order, {"order_id": "#W1", "status": "delivered"}),
             lookup("modify_pending_order_address", change, {"ok": True}),
             lookup("get_order_details", order, {"order_id": "#W1", "status": "delivered"}),
             lookup("get_product_details", {"product_id": "p1"}, {"name": "Watch"})]
    live, final = run(steps)
    found = next((f for f in [*live, final] if f is not None), None)
    assert (found is not None) is fires
    if found is not None:
        assert found.evidence == [steps[0].span_id, steps[2].span_id]
        assert "the same result, nothing changed since" in found.reason


# --- cycles -----------------------------------------------------------------------------------


def test_cycle_of_two_fires() -> None:
    steps = [call("open_ticket", {"id": 1}), call("close_ticket", {"id": 1}),
             call("open_ticket", {"id": 1}), call("close_ticket", {"id": 1})]
    live, final = run(steps)
    assert fired_at(live) == [4]
    assert final is not None and "open_ticket→close_ticket" in final.reason
    assert final.repeated == steps[2:]


def test_cycle_of_three_fires() -> None:
    steps = [call(t, {"id": 1}) for t in ("a", "b", "c", "a", "b", "c")]
    live, final = run(steps)
    assert fired_at(live) == [6] and final is not None and final.repeated == steps[3:]


def test_broken_cycle_does_not_fire() -> None:
    assert run([call(t, {"id": 1}) for t in ("a", "b", "a", "c")])[1] is None


# --- model output and uncaptured arguments ---------------------------------------------------------


def test_identical_long_model_output_fires_on_content() -> None:
    text = "I could not find any flights to Rome on that date, please pick another."
    steps = [reply(text), reply(text)]
    live, final = run(steps)
    assert fired_at(live) == [2]
    assert final is not None and final.basis == "content" and final.repeated == [steps[1]]


def test_tool_call_outputs_and_short_outputs_do_not_fire() -> None:
    text = "Calling search_flights with destination Rome and date 2026-05-01."
    for finish in (("tool_call",), ("tool_calls",), ("tool-calls",)):
        assert run([reply(text, finish), reply(text, finish)])[1] is None
    assert run([reply("OK, done."), reply("OK, done.")])[1] is None  # shorter than output_min_chars
    asking = [reply(text), reply(text)]  # no finish reason recorded, but tool-call parts in the output
    for step in asking:
        step.tool_calls = 1
    assert run(asking)[1] is None


def test_run_of_calls_without_arguments_fires_with_low_confidence_when_enabled() -> None:
    live, final = run([call("list_orders", known=False) for _ in range(5)], unknown_args_min_run=5)
    assert fired_at(live) == [5]
    assert final is not None and final.confidence < 0.5 and len(final.repeated) == 4
    assert run([call("list_orders", known=False) for _ in range(4)], unknown_args_min_run=5)[1] is None
    assert run([call("list_orders", known=False) for _ in range(9)])[1] is None  # off by default: paging looks alike


# --- whole processor path -----------------------------------------------------------------------------


class Sink:
    def __init__(self) -> None:
        self.increments: list[Increment] = []
        self.verdicts: list[Verdict] = []

    def export_increments(self, increments: list[Increment]) -> None:
        self.increments.extend(increments)

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        self.verdicts.extend(verdicts)

    def shutdown(self) -> None:
        pass


def otlp_span(n: int, parent: int, name: str, start: int, end: int, trace: bytes = b"\x07" * 16, **attrs: Any) -> Span:
    def value(v: Any) -> AnyValue:
        return AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=str(v))

    return Span(trace_id=trace, span_id=n.to_bytes(8, "big"),
                parent_span_id=parent.to_bytes(8, "big") if parent else b"", name=name,
                start_time_unix_nano=start, end_time_unix_nano=end,
                attributes=[KeyValue(key=k.replace("__", "."), value=value(v)) for k, v in attrs.items()])


LLM_TOKENS = [(1000, 40), (1100, 50), (1200, 60), (1300, 70), (1400, 80)]  # five model calls


ASKS = json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "search_flights",
                                                    "arguments": {"to": "Rome", "date": "2026-05-01"}}]}])


def loop_request(outputs: bool = False, trace: bytes = b"\x07" * 16) -> ExportTraceServiceRequest:
    """A model call before each of 4 identical tool calls, then a last model call answering; `outputs`: the model
    calls' captured outputs are their tool-call parts (no finish reason recorded)."""
    spans = [otlp_span(1, 0, "invoke_agent booker", 0, 100 * MS, trace, gen_ai__operation__name="invoke_agent",
                       gen_ai__agent__name="booker")]
    t = MS
    for i, (tokens_in, tokens_out) in enumerate(LLM_TOKENS):
        spans.append(otlp_span(10 + i, 1, "chat gpt-4.1-mini", t, t + 5 * MS, trace, gen_ai__operation__name="chat",
                               gen_ai__provider__name="openai", gen_ai__request__model="gpt-4.1-mini",
                               gen_ai__usage__input_tokens=tokens_in, gen_ai__usage__output_tokens=tokens_out))
        if outputs and i < 4:
            spans[-1].attributes.append(KeyValue(key="gen_ai.output.messages", value=AnyValue(string_value=ASKS)))
        t += 6 * MS
        if i < 4:
            spans.append(otlp_span(20 + i, 1, "execute_tool search_flights", t, t + 2 * MS, trace,
                                   gen_ai__operation__name="execute_tool", gen_ai__tool__name="search_flights",
                                   gen_ai__tool__call__arguments='{"to": "Rome", "date": "2026-05-01"}'))
            t += 3 * MS
    resource = Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value="travel"))])
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(resource=resource,
                                                                   scope_spans=[ScopeSpans(spans=spans)])])


@pytest.mark.parametrize("outputs", [False, True], ids=["outputs not captured", "tool-call outputs"])
def test_processor_verdict_counts_the_waste_of_repeated_calls(outputs: bool) -> None:
    """The waste goes to the tool repeated, also when the model outputs asking for it were captured (the same
    output each time: the calls' repetition, not a second one)."""
    sink = Sink()
    processor = Processor(ProcessorConfig(), [sink])
    spans = records(loop_request(outputs)).spans
    processor.process(spans[1:] + spans[:1], now=0.0)  # as an SDK exports them: the root ends, and comes, last
    live = [m.code for inc in sink.increments for m in inc.modes]
    assert live == ["FM-1.3"] and not sink.verdicts  # published while the trace is still open
    processor.drain()
    (verdict,) = sink.verdicts
    out = verdict.to_dict()
    assert (out["llm_calls"], out["tool_calls"], out["agent"]) == (5, 4, "booker")
    assert out["repeated_steps"] == 3 and verdict.waste.repeated_by_tool == {"search_flights": 3}
    producers = LLM_TOKENS[1:4]  # the calls that asked for tool calls 2, 3 and 4
    assert out["wasted_input_tokens"] == sum(i for i, _ in producers) == 3600
    assert out["wasted_output_tokens"] == sum(o for _, o in producers) == 180
    expected = sum(float(calc_price(Usage(input_tokens=i, output_tokens=o), model_ref="gpt-4.1-mini",
                                    provider_id="openai").total_price) for i, o in producers)
    assert verdict.wasted_cost_usd > 0
    assert abs(verdict.wasted_cost_usd - expected) < 1e-9
    assert out["failure_modes"]["FM-1.3"]["evidence"] == [(20 + i).to_bytes(8, "big").hex() for i in range(4)]


def test_a_loop_waits_for_its_agents_name_where_the_services_runs_name_theirs() -> None:
    """Only the root names the agent and it comes last: a loop found before it is published under the agent's
    name, not the service's, once the service's runs are known to name their agent; until then, as before."""
    sink = Sink()
    processor = Processor(ProcessorConfig(), [sink])
    first = records(loop_request(trace=b"\x05" * 16)).spans
    processor.process(first[1:], now=0.0)  # the service's first run: nothing says its runs name an agent
    processor.tick(10.0)  # decision_wait passed
    assert [(i.service, i.agent) for i in sink.increments] == [("travel", "travel")]
    processor.process(first[:1], now=10.0)
    processor.tick(100.0)
    assert [v.agent for v in sink.verdicts] == ["travel"]  # its labels were fixed when first published
    second = records(loop_request(trace=b"\x06" * 16)).spans
    processor.process(second, now=100.0)  # a run whose root came: it names the agent
    processor.tick(200.0)
    third = records(loop_request(trace=b"\x08" * 16)).spans
    published = len(sink.increments)
    processor.process(third[1:], now=200.0)
    processor.tick(210.0)
    processor.tick(400.0)
    assert len(sink.increments) == published  # waiting for the agent's name
    processor.process(third[:1], now=400.0)
    processor.tick(401.0)
    (live,) = sink.increments[published:]
    assert (live.service, live.agent, [m.code for m in live.modes]) == ("travel", "booker", ["FM-1.3"])
    processor.drain()
    assert sink.verdicts[-1].agent == "booker" and sink.verdicts[-1].waste.repeated_by_tool == {"search_flights": 3}


class Failing(Sink):
    """An exporter that fails on everything it is given."""

    def export_increments(self, increments: list[Increment]) -> None:
        raise OSError("no space left on device")

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        raise OSError("no space left on device")


def test_a_failing_exporter_costs_the_other_exporters_nothing(caplog) -> None:
    sink = Sink()
    processor = Processor(ProcessorConfig(), [Failing(), sink])
    spans = records(loop_request()).spans
    processor.process(spans[1:] + spans[:1], now=0.0)  # as an SDK exports them: the root ends, and comes, last
    assert [m.code for inc in sink.increments for m in inc.modes] == ["FM-1.3"]
    processor.drain()
    (verdict,) = sink.verdicts
    assert verdict.waste.repeated_by_tool == {"search_flights": 3}
    assert "exporter Failing failed on 1 verdicts" in caplog.text
