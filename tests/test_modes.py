"""The MAST detectors beyond FM-1.3, through the whole processor path, on generated runs: positives fire with
evidence and a reason, look-alikes stay silent, content-only signals go quiet with content off."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from mastwatch.collector.assemble import END_OF_INPUT
from mastwatch.collector.classify.detector import Detector
from mastwatch.collector.classify.engine import ClassifierEngine
from mastwatch.collector.classify.tools import ToolClassifier, ToolEffect
from mastwatch.collector.config import AgentDetectors, ProcessorConfig, ToolsConfig
from mastwatch.collector.model.content import Content
from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.steps import Step, StepKind
from mastwatch.collector.model.trace import Trace
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.normalize.limits import limit_hit
from mastwatch.collector.processor import Processor
from mastwatch.collector.receiver.decode import decode, records
from mastwatch.evaluate import without_content
from tests.scenarios import Run, scenarios


class Sink:
    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []

    def export_increments(self, increments) -> None:
        pass

    def export_verdicts(self, verdicts: list[Verdict], increments) -> None:
        self.verdicts.extend(verdicts)

    def shutdown(self) -> None:
        pass


def classify(run: Run, content: bool = True, config: ProcessorConfig | None = None) -> Verdict:
    return classify_request(run.request(), content, config)


def classify_request(request: ExportTraceServiceRequest, content: bool = True,
                     config: ProcessorConfig | None = None) -> Verdict:
    sink = Sink()
    processor = Processor(config or ProcessorConfig(), [sink])
    spans = decode(request.SerializeToString()).spans
    processor.process(spans if content else without_content(spans), now=0.0)
    processor.drain(END_OF_INPUT)
    (verdict,) = sink.verdicts
    return verdict


SCENARIOS = {s.name: s for s in scenarios()}
LABELS = Path(__file__).parent / "data" / "labels"  # of the checkout whose tests/scenarios eval reads


@pytest.mark.parametrize("name", sorted(n for n in SCENARIOS if n.startswith("d0-")))
def test_every_scenario_gets_its_labels_with_content_on(name: str) -> None:
    from mastwatch.evaluate import classify as classify_runs
    from mastwatch.evaluate import scenario_runs

    run = next(r for r in scenario_runs(LABELS) if r.run_id == name)
    found, _ = classify_runs([run])
    assert found[name] == set(run.modes)


def test_findings_carry_span_evidence_reason_and_basis() -> None:
    for name in ("d0-stops-after-error", "d0-restart-unchecked", "d0-check-fails-claimed", "d0-langgraph-limit",
                 "d0-prompt-collapse", "d0-goes-on-after-failed-write", "d0-says-x-does-y", "d0-parallel-calls",
                 "d0-hands-over-giving-up", "d0-acts-on-someone-elses-record", "d0-looks-up-again"):
        sink = Sink()
        processor = Processor(ProcessorConfig(), [sink])
        spans = records(SCENARIOS[name].request).spans
        processor.process(spans, now=0.0)
        processor.drain(END_OF_INPUT)
        ids = {s.span_id.hex() for s in spans}
        out = sink.verdicts[0].to_dict()
        assert out["failure_modes"], name
        for code, mode in out["failure_modes"].items():
            assert mode["evidence"] and set(mode["evidence"]) <= ids, (name, code)
            assert mode["reason"] and mode["basis"] in ("structure", "content"), (name, code)


def test_structure_alone_settles_limits_endings_and_unchecked_changes() -> None:
    expected = {"d0-langgraph-limit": "FM-1.5", "d0-cut-off": "FM-1.5", "d0-stops-after-error": "FM-3.1",
                "d0-restart-unchecked": "FM-3.2", "d0-check-fails-claimed": "FM-3.3",
                "d0-prompt-collapse": "FM-1.4", "d0-goes-on-after-failed-write": "FM-2.5"}
    for name, code in expected.items():
        sink = Sink()
        processor = Processor(ProcessorConfig(), [sink])
        processor.process(without_content(records(SCENARIOS[name].request).spans), now=0.0)
        processor.drain(END_OF_INPUT)
        finding = sink.verdicts[0].findings.get(code)
        assert finding is not None and finding.basis == "structure", name


def test_a_change_after_the_user_was_answered_is_not_a_failure_ignored() -> None:
    """A failed change, then a turn that answered the user (its words unread with content off) and another change:
    the user may have asked for it. Without the answer between, the failure was gone past."""
    def run(answered: bool) -> Run:
        r = Run("answered" if answered else "went on").call("modify_order", {"id": "#1"}, "error: not pending",
                                                             error="ToolError")
        if answered:
            r.answer("I could not change the order: it is no longer pending.").user("Then change my address.")
        return r.call("modify_address", {"user": "u1"}, {"status": "ok"})

    for content in (True, False):
        assert "FM-2.5" not in classify(run(True), content=content).findings
    assert classify(run(False), content=False).findings["FM-2.5"].basis == "structure"


def test_content_only_signals_need_content() -> None:
    run = Run("claim").call("update_ticket", {"id": 1}, "error: locked", error="LockedError")
    run.answer("The ticket has been updated successfully.")
    assert set(classify(run).findings) == {"FM-2.5", "FM-3.3"}  # the refusal ignored, and success claimed
    # the answer is not seen: a change refused for good may have been explained, claimed or given up on
    assert not classify(run, content=False).findings
    gave_up = Run("gave up").call("update_ticket", {"id": 1}, "upstream timed out", error="TimeoutError")
    gave_up.answer("Sorry, I cannot update it right now.")
    assert set(classify(gave_up).findings) == set(classify(gave_up, content=False).findings) == {"FM-3.1"}
    refused = Run("refused").call("update_ticket", {"id": 1}, "error: locked", error="LockedError")
    assert not classify(refused.answer("Sorry, the ticket is locked and cannot be changed.")).findings
    said = Run("said").llm("I will call search_flights now.", [("search_hotels", {"city": "Oslo"})])
    said.tool("search_hotels", {"city": "Oslo"}, "[]").answer("No hotels.")
    assert classify(said).findings["FM-2.6"].basis == "content"
    assert "FM-2.6" not in classify(said, content=False).findings


@pytest.mark.parametrize("name", ["d0-parallel-calls", "d0-acts-without-yes", "d0-hands-over-giving-up",
                                  "d0-hands-over-claiming-all-done", "d0-acts-on-someone-elses-record",
                                  "d0-looks-up-again", "d0-changes-then-ends-silently"])
def test_conversation_signals_need_content(name: str) -> None:
    """The users' turns, the instructions, arguments and results are opt-in content: without them none of these
    findings can be made, and none is made up."""
    from mastwatch.evaluate import classify as classify_runs
    from mastwatch.evaluate import scenario_runs

    run = next(r for r in scenario_runs(LABELS, content=False) if r.run_id == name)
    found, _ = classify_runs([run])
    assert not found[name] & set(run.modes)


def test_handover_reasons_and_claims() -> None:
    from mastwatch.collector.classify.signals import claims_all_done, gives_up, hands_over

    assert hands_over("transfer_to_human_agents") and hands_over("escalateTicket") and not hands_over("transfer_funds")
    assert gives_up("Despite a reboot the data connection still fails. Further technical support is required.")
    assert gives_up("The fix did not help and the line is still not working.") == "still not"
    assert gives_up("The SIM card is locked with a PIN the user does not know; it cannot be unlocked here.") is None
    assert gives_up("The customer asks for a refund above the limit.") is None
    assert claims_all_done("All standard troubleshooting steps have been completed.")
    assert claims_all_done("I have tried all the available options.")
    assert claims_all_done("All items were returned.") is None


def test_a_figure_of_someone_elses_record_told_to_the_user() -> None:
    run = Run("figures")
    run.user("Hi, my number is 555-010-2002.").call("get_customer", {"phone": "555-010-2002"},
                                                    {"customer_id": "C1", "phone_number": "555-010-2002"})
    run.call("get_line", {"id": "L1"}, {"line_id": "L1", "phone_number": "555-010-2001", "data_used_gb": 3.2})
    run.call("get_usage", {"line_id": "L1"}, {"used": 3.2, "limit": 5.5})
    found = classify(run.answer("You have used 3.2 GB of your 5.5 GB.")).findings
    assert set(found) == {"FM-2.5", "FM-3.3"} and found["FM-3.3"].quote == "3.2 (L1)"
    own = Run("own figures")
    own.user("Hi, my number is 555-010-2001.").call("get_line", {"id": "L1"},
                                                    {"line_id": "L1", "phone_number": "555-010-2001", "used": 3.2})
    own.call("get_usage", {"line_id": "L1"}, {"used": 3.2, "limit": 5.5})
    assert not classify(own.answer("You have used 3.2 GB of your 5.5 GB.")).findings


def test_a_change_to_someone_elses_record_is_not_what_the_user_asked() -> None:
    """FM-1.1 whatever the instructions say: the line changed is one whose lookup showed another phone number; not
    when the run had read the user's own line too (it chose the other one) or when the change was refused."""
    def run(name: str, number: str, result: object = "roaming enabled", error: str | None = None) -> Run:
        r = Run(name).user(f"Hi, my number is {number}. Roaming does not work abroad.")
        r.call("get_line", {"id": "L1"}, {"line_id": "L1", "phone_number": "555-010-2001", "roaming": False})
        return r.call("enable_roaming", {"line_id": "L1"}, result, error=error)

    found = classify(run("other", "555-010-2002").answer("Done: roaming is on for your line.")).findings
    assert "FM-1.1" in found and found["FM-1.1"].reason.startswith("enable_roaming changed a record whose get_line")
    assert found["FM-1.1"].quote == "L1"
    assert "FM-1.1" not in classify(run("own", "555-010-2001").answer("Done: roaming is on.")).findings
    refused = run("refused", "555-010-2002", "error: line suspended", "SuspendedError")
    assert "FM-1.1" not in classify(refused.answer("Sorry, the line is suspended.")).findings


def test_a_retry_that_passes_resolves_the_error() -> None:
    run = Run("retry").call("get_status", {"id": 1}, "timeout", error="TimeoutError")
    run.call("get_status", {"id": 1}, {"status": "ok"}).answer("All good.")
    assert not classify(run).findings


def test_final_tools_end_a_run_by_design() -> None:
    run = Run("submits").call("read_file", {"path": "a"}, "x").llm("", [("submit", {})]).tool("submit", {}, "")
    assert not classify(run).findings
    custom = ProcessorConfig(tools=ToolsConfig(final=["deliver*"]))
    run = Run("delivers").call("read_file", {"path": "a"}, "x").llm("", [("deliver", {})]).tool("deliver", {}, "")
    assert set(classify(run).findings) == {"FM-1.5"}
    assert not classify(run, config=custom).findings


def test_verification_patterns_are_configurable() -> None:
    run = Run("flush").call("flush_cache", {"region": "eu"}, "flushed").answer("Cache flushed.")
    assert not classify(run).findings
    config = ProcessorConfig(detectors={"FM-3.2": {"needs_check": ["flush_*"]}},
                             tools=ToolsConfig(state_changing=["flush_*"]))
    assert set(classify(run, config=config).findings) == {"FM-3.2"}


def test_role_and_confirmation_rules_fire_only_when_configured() -> None:
    run = Run("roles", agent="triage").call("get_ticket", {"id": 1}, {"id": 1})
    run.call("refund_payment", {"id": 1}, {"refunded": True}).answer("Refunded.")
    assert not classify(run).findings
    config = ProcessorConfig(detectors={"FM-1.2": {"enabled": True, "roles": {"triage": ["get_*"]}},
                                        "FM-1.1": {"enabled": True, "confirm_tools": ["refund_*"]}})
    findings = classify(run, config=config).findings
    assert set(findings) == {"FM-1.1", "FM-1.2"} and "refund_payment" in findings["FM-1.2"].reason
    asked = Run("asked", agent="triage").call("get_ticket", {"id": 1}, {"id": 1}).answer("Refund it? (yes/no)")
    asked.call("refund_payment", {"id": 1}, {"refunded": True}).answer("Refunded.")
    assert set(classify(asked, config=config).findings) == {"FM-1.2"}


def test_verdict_lists_the_modes_not_assessed() -> None:
    verdict = classify(Run("plain").call("get_order", {"id": 1}, {"id": 1}).answer("Here it is."))
    out = verdict.to_dict()
    assert out["not_assessed"] == ["FM-1.2", "FM-2.3", "FM-2.4"]
    config = ProcessorConfig(detectors={"FM-3.2": {"enabled": False}})
    assert "FM-3.2" in classify(Run("x").answer("hi"), config=config).to_dict()["not_assessed"]
    assert set(out["not_assessed"]) <= set(MODES)


def test_tools_are_told_apart_by_name_pattern_and_override() -> None:
    tools = ToolClassifier(ToolsConfig(read_only=["kubectl_get*"], state_changing=["kubectl_*"],
                                       overrides={"get_and_reset": "state_changing"}))
    assert tools.effect("get_order") is ToolEffect.READ_ONLY
    assert tools.effect("searchFlights") is ToolEffect.READ_ONLY
    assert tools.effect("cancel_order") is ToolEffect.STATE_CHANGING
    assert tools.effect("restartPod") is ToolEffect.STATE_CHANGING
    assert tools.effect("kubectl_apply") is ToolEffect.STATE_CHANGING
    assert tools.effect("kubectl_get_pods") is ToolEffect.STATE_CHANGING  # state_changing patterns come first
    assert tools.effect("get_and_reset") is ToolEffect.STATE_CHANGING
    assert tools.effect("python") is ToolEffect.UNKNOWN and tools.effect(None) is ToolEffect.UNKNOWN
    assert ToolClassifier(ToolsConfig(infer_from_names=False)).effect("get_order") is ToolEffect.UNKNOWN
    names = ToolClassifier()  # a command-line tool's name first: its verb comes next
    assert names.effect("kubectl_scale") is names.effect("git_commit") is ToolEffect.STATE_CHANGING
    assert names.effect("kubectl_describe") is ToolEffect.READ_ONLY and names.effect("kubectl") is ToolEffect.UNKNOWN


def test_a_run_stopped_from_outside_had_no_chance_to_check() -> None:
    run = Run("cut").call("get_pods", {"ns": "a"}, "2/2").llm("", [("restart_deployment", {"ns": "a"})])
    run.tool("restart_deployment", {"ns": "a"}, "restarted")
    assert set(classify(run).findings) == {"FM-1.5"}
    limit = Run("limit").call("restart_deployment", {"ns": "a"}, "restarted").fail_root("GraphRecursionError")
    assert set(classify(limit).findings) == {"FM-1.5"}
    unchecked = Run("unchecked").call("restart_deployment", {"ns": "a"}, "restarted").answer("Restarted.")
    assert set(classify(unchecked).findings) == {"FM-3.2"}


def test_the_same_failure_met_again_after_other_calls_stopped_nothing() -> None:
    run = Run("diagnosis")
    for _ in range(2):
        run.call("get_pods", {"ns": "a"}, "a-1 0/1 ImagePullBackOff").call("describe_pod", {"pod": "a-1"},
                                                                             "Failed to pull image: not found")
    assert "FM-3.1" not in classify(run.answer("a-1 cannot start: its image does not exist.")).findings
    once = Run("once").call("describe_pod", {"pod": "a-1"}, "Failed to pull image: not found")
    once.answer("Here is what I found.")
    assert "FM-3.1" in classify(once).findings


def test_limit_errors_of_the_frameworks() -> None:
    for name in ("GraphRecursionError", "langgraph.errors.GraphRecursionError", "MaxTurnsExceeded",
                 "AgentMaxStepsError", "UsageLimitExceeded", "LlmCallsLimitExceededError"):
        assert limit_hit(name) == name
    for name in ("RecursionError", "ValueError", "tool_error", "TimeoutError", "_OTHER"):
        assert limit_hit(name) is None


def test_limits_and_failures_recorded_only_as_exceptions() -> None:
    """The exception leaving a span (event and ERROR status, no error attribute), as the OpenTelemetry SDK records
    it: its type names the limit, or its message does; its message tells a transient failure."""
    for name, limit in (("d0-langgraph-limit-raised", "langgraph.errors.GraphRecursionError"),
                        ("d0-llamaindex-limit-raised", "Reached max iterations.")):
        request = SCENARIOS[name].request
        root = request.resource_spans[0].scope_spans[0].spans[0]
        finding = classify_request(request).findings["FM-1.5"]
        assert finding.evidence == [root.span_id] and finding.confidence == 0.95, name  # the limit, not a cut-off
        assert f"({limit})" in finding.reason
    # a write that fails with a 503 in its exception message only, then an apology: given up on a transient failure
    for content in (True, False):
        verdict = classify_request(SCENARIOS["d0-gives-up-after-unavailable-raised"].request, content)
        assert set(verdict.findings) == {"FM-3.1"}
        assert set(classify_request(SCENARIOS["d0-refused-explained-raised"].request, content).findings) == set()
    # an exception recorded on a tool span that still returned (status unset) is not a failure of the call
    handled = Run("handled").call("get_order", {"id": 1}, {"id": 1})
    handled.spans[-1].events.add(name="exception", attributes=[
        KeyValue(key="exception.type", value=AnyValue(string_value="KeyError"))])
    assert set(classify(handled.answer("Here is your order.")).findings) == set()


class _Broken(Detector):
    def observe(self, step):
        raise RuntimeError("boom")


def _broken(detector: Detector) -> Detector:
    """A stand-in for the detector (its code, its kinds of steps) that raises on every step."""
    cls = type("Broken", (_Broken,), {"code": detector.code, "kinds": detector.kinds})
    return cls(detector.settings, detector.trace, detector.tools)


@pytest.mark.parametrize("code", ["FM-1.4", "FM-1.5", "FM-2.1", "FM-2.5", "FM-2.6", "FM-3.1", "FM-3.2", "FM-3.3"])
def test_a_failing_new_detector_is_isolated_logged_and_counted(code: str, caplog) -> None:
    errors: list[str] = []
    engine = ClassifierEngine(on_detector_error=errors.append)
    run = Run(f"broken-{code}")
    for _ in range(3):
        run.call("search_flights", {"to": "Rome"}, "[]")
    spans = records(run.request()).spans
    from mastwatch.collector.normalize import normalize_span

    trace = Trace(spans[0].trace_id, 0.0, 0.0)
    for record in spans[1:]:
        step = normalize_span(record)
        trace.add(step, 0.0)
        if trace.classifier is None:
            engine.observe(trace, step)
            state = trace.classifier
            state.detectors[:] = [_broken(d) if d.code == code else d for d in state.detectors]
            continue
        engine.observe(trace, step)
    assert errors == [code]
    assert f"detector {code} failed" in caplog.text
    assert "FM-1.3" in engine.finish(trace)  # the others went on


def test_detectors_leave_configured_agents_alone() -> None:
    run = Run("sre", agent="batch-bot").call("restart_deployment", {"svc": "a"}, "restarted").answer("Done.")
    assert set(classify(run).findings) == {"FM-3.2"}
    config = ProcessorConfig(detectors={"FM-3.2": {"skip_agents": ["batch-*"]}})
    assert not classify(run, config=config).findings


def test_work_started_over_after_a_crash_is_a_reset_and_its_redone_calls_are_wasted() -> None:
    run = Run("crash").invoke().call("get_order", {"id": 1}, {"id": 1}).call("get_policy", {"t": "refund"}, "30 days")
    run.end_invocation("WorkerLostError").invoke().call("get_order", {"id": 1}, {"id": 1})
    run.call("get_policy", {"t": "refund"}, "30 days").answer("Refunds are possible within 30 days.").end_invocation()
    verdict = classify(run)
    assert set(verdict.findings) == {"FM-2.1"}  # not step repetition: a fresh invocation redid the work
    reset = verdict.findings["FM-2.1"]
    assert [s.tool for s in reset.repeated] == ["get_order", "get_policy"] and len(reset.evidence) == 4
    assert verdict.waste.repeated_steps == 2 and verdict.waste.tokens
    # arguments not captured: the same tools redone after the failure still show the work started over
    blind = classify(run, content=False).findings["FM-2.1"]
    assert blind.confidence == 0.5 and "arguments not captured" in blind.reason and len(blind.repeated) == 2
    # the same calls without the failure in between: one agent doing its lookups twice is no reset
    twice = Run("twice").invoke().call("get_order", {"id": 1}, {"id": 1}).end_invocation()
    twice.invoke().call("get_order", {"id": 1}, {"id": 1}).answer("Order 1.").end_invocation()
    assert "FM-2.1" not in classify(twice).findings


def test_agents_get_settings_of_their_own() -> None:
    config = ProcessorConfig(detectors={"FM-1.3": {"polling_tools": ["wait_*"]}}, agents=[
        {"match": ["batch-*"], "detectors": {"FM-1.3": {"min_occurrences": 5, "unchanged_min_occurrences": 5}}},
        {"match": ["triage-*"], "detectors": {"FM-1.2": {"enabled": True, "roles": {"triage-*": ["get_*"]}}}}])

    def looping(agent: str) -> Run:
        run = Run(f"loop-{agent}", agent=agent)
        for _ in range(3):
            run.call("get_queue", {"q": "jobs"}, {"depth": 9})
        return run.answer("The queue holds 9 jobs.")

    assert "FM-1.3" in classify(looping("sre-bot"), config=config).findings
    assert "FM-1.3" not in classify(looping("batch-nightly"), config=config).findings  # 5 calls for batch agents
    triage = classify(looping("triage-1").call("update_ticket", {"id": 1}, {"id": 1}), config=config)
    assert "FM-1.2" in triage.findings and "FM-1.2" not in triage.not_assessed
    assert "FM-1.2" in classify(looping("sre-bot"), config=config).not_assessed


def test_the_root_spans_agent_settles_the_settings() -> None:
    """Steps that name no agent are classified with the service's settings until the root names the agent."""
    engine = ClassifierEngine(agents=[AgentDetectors(match=["batch-*"],
                                                     detectors={"FM-1.3": {"min_occurrences": 5}})])
    trace = Trace(b"\x07" * 16, 0.0, 0.0)
    live = []
    for n in range(1, 4):
        step = Step(trace.trace_id, n.to_bytes(8, "big"), b"\x01" * 8, StepKind.TOOL, "t", n, n + 1, "svc",
                    tool="get_queue", args=Content({"q": "jobs"}))
        trace.add(step, 0.0)
        live += engine.observe(trace, step)
    assert [f.code for f in live] == ["FM-1.3"]  # live, with the defaults: the agent is not known yet
    root = Step(trace.trace_id, b"\x01" * 8, b"", StepKind.AGENT, "invoke_agent", 0, 9, "svc", agent="batch-7")
    trace.add(root, 0.0)
    engine.observe(trace, root)
    assert engine.finish(trace) == {}  # classified again with the batch agents' settings


def test_a_made_up_value_is_named_with_its_call_and_needs_content_and_instructions() -> None:
    made_up = SCENARIOS["d0-changes-a-made-up-record"].request
    finding = classify_request(made_up).findings["FM-2.2"]
    assert (finding.basis, finding.quote) == ("content", "W10017")
    assert finding.reason.startswith("cancel_order was called with a value") and len(finding.evidence) == 1
    assert "FM-2.2" not in classify_request(made_up, content=False).findings
    uninstructed = Run("made-up-without-instructions")  # the value may be one the instructions prescribe
    uninstructed.user("I would like this change: order W1001").call("get_order", {"order_id": "W1001"}, {"id": 1})
    uninstructed.call("cancel_order", {"order_id": "W10017"}, {"id": 1, "status": "cancelled"})
    assert "FM-2.2" not in classify(uninstructed.answer("Done: it shows cancelled.")).findings
    instructed = Run("made-up-after-a-long-result")  # past a cut result only ids that name their kind are judged
    instructed.instructions = "You help customers with their orders."
    instructed.user("Cancel order W1001, please.").call("get_order", {"order_id": "W1001"}, "x" * 3000)
    instructed.call("cancel_order", {"order_id": "W1001", "refund_to": "card_9912", "fee": 7}, {"status": "cancelled"})
    found = classify(instructed.answer("Done: it shows cancelled.")).findings["FM-2.2"]
    assert found.quote == "card_9912"  # the fee of 7 may be in what was cut off: not judged


def test_a_date_the_agent_worked_out_is_no_made_up_value() -> None:
    booked = Run("books-tomorrow")
    booked.instructions = "You book flights for customers."
    booked.user("Book me on the first flight to Rome tomorrow.").call("search_flights", {"to": "Rome"}, [{"f": "AZ1"}])
    booked.call("book_flight", {"flight": "AZ1", "date": "2026-01-02", "departs": "07:40"}, {"status": "booked"})
    assert "FM-2.2" not in classify(booked.answer("Booked: it shows status booked.")).findings
