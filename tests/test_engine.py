"""The classifier engine: plugins found by module, fed only the steps they want, isolated when they fail."""

from __future__ import annotations

import importlib
import importlib.machinery
from pathlib import Path
from typing import Any

import pytest

from mastwatch.collector.classify.detector import Detector, SharedState, is_reusable
from mastwatch.collector.classify.detectors import load_detectors
from mastwatch.collector.classify.engine import ClassifierEngine, TraceFindings, detector_routes
from mastwatch.collector.config import AgentDetectors, DetectorSettings, ProcessorConfig
from mastwatch.collector.model.content import Content
from mastwatch.collector.model.steps import Step, StepKind
from mastwatch.collector.model.trace import Trace
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.processor import Increment, Processor
from mastwatch.evaluate import LabelledRun, blind_runs, real_runs, scenario_runs
from tests.builds import needs_mypyc

DATA = Path(__file__).parent / "data"


def _step(n: int, kind: StepKind = StepKind.TOOL) -> Step:
    return Step(b"\x01" * 16, n.to_bytes(8, "big"), b"\x09" * 8, kind, "s", n, n + 1, "svc", tool="t",
                args=Content({"a": 1}))


class _Exploding(Detector):
    code = "FM-9.9"
    kinds = frozenset({StepKind.TOOL})
    seen: list[StepKind] = []

    def observe(self, step: Step):
        self.seen.append(step.kind)
        raise RuntimeError("boom")


def test_detectors_are_discovered_by_module() -> None:
    assert "FM-1.3" in load_detectors()


def test_a_failing_detector_is_switched_off_counted_and_the_others_go_on() -> None:
    errors: list[str] = []
    engine = ClassifierEngine(on_detector_error=errors.append)
    engine.detectors.insert(0, (_Exploding, DetectorSettings()))
    engine.routes = detector_routes(engine.detectors)
    trace = Trace(b"\x01" * 16, 0.0, 0.0)
    live = []
    for n in range(1, 5):
        trace.add(_step(n), 0.0)
        live += engine.observe(trace, _step(n))
    assert errors == ["FM-9.9"]  # once: switched off for this trace after its first failure
    assert _Exploding.seen == [StepKind.TOOL]
    assert [f.code for f in live][:1] == ["FM-1.3"]  # FM-1.3 still fired, live
    assert set(engine.finish(trace)) == {"FM-1.3"}


def test_steps_no_detector_wants_cost_no_state() -> None:
    engine = ClassifierEngine()
    trace = Trace(b"\x01" * 16, 0.0, 0.0)
    assert not engine.observe(trace, _step(1, StepKind.OTHER))
    assert trace.classifier is None


@needs_mypyc
@pytest.mark.parametrize("module", ["model.steps", "model.content", "model.trace", "model.verdict", "assemble",
                                    "normalize.span", "normalize.genai", "spend", "classify.engine",
                                    "classify.detector", "classify.detectors.step_repetition", "processor"])
def test_the_per_span_modules_are_compiled(module: str) -> None:
    """The build (setup.py) compiles them; a plain-Python detector (_Exploding above) still subclasses Detector."""
    loaded = importlib.import_module(f"mastwatch.collector.{module}")
    assert loaded.__file__ is not None and loaded.__file__.endswith(importlib.machinery.EXTENSION_SUFFIXES[0]), \
        f"{module} is not compiled: pip install -e . (with mypy available to the build)"


# every detector, FM-1.1 and FM-1.2 (off by default) with settings that make them fire
EVERY_DETECTOR: dict[str, Any] = {**{code: {"enabled": True} for code in load_detectors()},
                                  "FM-1.1": {"enabled": True, "confirm_tools": ["*"]},
                                  "FM-1.2": {"enabled": True, "roles": {"*": ["get_*", "read_*", "search*"]}}}


def _runs(content: bool) -> list[LabelledRun]:
    """The labelled corpora (scenarios of every mode, recorded runs, the blind corpus), each trace once (the blind
    corpus repeats some recorded runs)."""
    runs, seen = [], set()
    labels = DATA / "labels"
    for run in [*scenario_runs(labels, content), *real_runs(labels, content), *blind_runs(DATA / "blind", content)]:
        ids = {span.trace_id for span in run.spans}
        if not ids & seen:
            runs.append(run)
        seen |= ids
    return runs


class _Verdicts:
    def __init__(self) -> None:
        self.json: list[str] = []

    def export_increments(self, increments: list[Increment]) -> None:
        pass

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        self.json += [v.to_json() for v in verdicts]

    def shutdown(self) -> None:
        pass


def _classified(processor: Processor, run: LabelledRun, now: float) -> None:
    """The run's spans in one request at `now`, and its traces completed (then released) by a tick well after."""
    processor.process(run.spans, now=now)
    processor.tick(now + 1000.0)


def _state(obj: object) -> dict[str, Any]:
    """A detector's attributes (compiled classes list them), the state it shares by value, its trace left out."""
    state = {}
    for name in type(obj).__mypyc_attrs__:  # type: ignore[attr-defined]
        value = getattr(obj, name, AttributeError)
        if name != "trace":
            state[name] = _state(value) if isinstance(value, SharedState) else value
    return state


@needs_mypyc
@pytest.mark.parametrize("content", [True, False], ids=["content", "no-content"])
def test_released_detectors_are_reset_to_new_ones(content: bool) -> None:
    """After each run of the corpora, the detectors the engine keeps (every one, and the state they share) are in
    the state of detectors just made: nothing of the run they classified is left."""
    processor = Processor(ProcessorConfig(detectors=EVERY_DETECTOR), [])
    engine = processor.engine
    new = engine._new(Trace(bytes(16), 0.0, 0.0), -1, True)
    assert len(new.detectors) == len(load_detectors())
    fresh = [_state(d) for d in new.detectors]
    kept: dict[int, TraceFindings] = {}  # every set kept so far, by id
    runs = _runs(content)
    for n, run in enumerate(runs):
        _classified(processor, run, n * 2000.0)
        for state in engine._spare[0]:
            assert [_state(d) for d in state.detectors] == fresh, run.run_id
            assert state.findings is None
            kept[id(state)] = state
    assert len(kept) == 1  # one run at a time: every trace (classified again too) is given the one set


def test_a_subclass_that_does_not_say_it_is_reusable_is_not_reused() -> None:
    """Every built-in detector is reused; a subclass of one, which may keep state its base's `begin` does not reset,
    only when it says so itself."""
    detectors = load_detectors()
    assert all(is_reusable(cls) for cls in detectors.values())

    class Counting(detectors["FM-1.3"]):  # type: ignore[misc,valid-type]
        def __init__(self, settings, trace, tools=None) -> None:
            super().__init__(settings, trace, tools)
            self.seen = 0

    class Declared(Counting):
        reusable = True

    assert Counting.reusable and not is_reusable(Counting)
    assert is_reusable(Declared)


@pytest.mark.parametrize("content", [True, False], ids=["content", "no-content"])
def test_reused_detectors_give_the_verdicts_new_ones_give(content: bool) -> None:
    """Every run of the corpora classified by detectors reused from the runs before (one processor) gets the
    verdicts it gets from a processor of its own."""
    config = ProcessorConfig(detectors=EVERY_DETECTOR)
    reused = _Verdicts()
    processor = Processor(config, [reused])
    for n, run in enumerate(_runs(content)):
        alone = _Verdicts()
        _classified(Processor(config, [alone]), run, n * 2000.0)
        count = len(reused.json)
        _classified(processor, run, n * 2000.0)
        assert reused.json[count:] == alone.json, run.run_id
        assert alone.json


def test_a_trace_classified_again_with_its_agents_settings_starts_from_fresh_shared_state() -> None:
    """FM-2.1 alone feeds the prompt sizes until the root names an agent whose settings enable FM-1.4 too: the trace
    is classified again, and FM-1.4 does not join the sizes already fed (each call would count twice)."""
    root = Step(b"\x01" * 16, b"\x00" * 7 + b"\x01", b"", StepKind.AGENT, "invoke_agent", 0, 100, "svc",
                agent="special")
    calls = []
    for n, tokens in enumerate((3000, 1400, 1450, 9000, 2000, 2100), start=2):
        call = Step(b"\x01" * 16, n.to_bytes(8, "big"), root.span_id, StepKind.LLM, "chat", n * 10, n * 10 + 5, "svc",
                    model="m")
        call.input_tokens = tokens
        calls.append(call)
    engine = ClassifierEngine({"FM-1.4": {"enabled": False}},
                              agents=[AgentDetectors(match=["special"], detectors={"FM-1.4": {"enabled": True}})])
    trace = Trace(root.trace_id, 0.0, 0.0)
    for step in [*calls, root]:
        trace.add(step, 0.0)
        engine.observe(trace, step)
        if step is calls[-1]:
            before = trace.classifier.detectors[[d.code for d in trace.classifier.detectors].index("FM-2.1")].sizes
    detectors = {d.code: d for d in trace.classifier.detectors}
    assert trace.classifier.profile == 0
    sizes = detectors["FM-1.4"].sizes
    assert sizes is detectors["FM-2.1"].sizes and sizes is not before  # one state, fresh, shared by the two
    (series,) = sizes.series.values()
    assert series.calls == len(calls) - 1  # each call counted once (the first opens the series)
    assert "FM-1.4" not in engine.finish(trace)
