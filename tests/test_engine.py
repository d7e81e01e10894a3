"""The classifier engine: plugins found by module, fed only the steps they want, isolated when they fail."""

from __future__ import annotations

import importlib
import importlib.machinery
import os

import pytest

from mastwatch.collector.assemble import Trace
from mastwatch.collector.classify.detector import Detector
from mastwatch.collector.classify.detectors import load_detectors
from mastwatch.collector.classify.engine import ClassifierEngine, detector_routes
from mastwatch.collector.config import DetectorSettings
from mastwatch.collector.content import Content
from mastwatch.collector.steps import Step, StepKind


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


@pytest.mark.skipif(os.environ.get("MASTWATCH_COMPILE") == "0", reason="built as plain Python")
@pytest.mark.parametrize("module", ["steps", "content", "assemble", "normalize.span", "normalize.genai", "spend",
                                    "classify.engine", "classify.detector", "classify.detectors.step_repetition",
                                    "processor", "verdict"])
def test_the_per_span_modules_are_compiled(module: str) -> None:
    """The build (setup.py) compiles them; a plain-Python detector (_Exploding above) still subclasses Detector."""
    loaded = importlib.import_module(f"mastwatch.collector.{module}")
    assert loaded.__file__ is not None and loaded.__file__.endswith(importlib.machinery.EXTENSION_SUFFIXES[0]), \
        f"{module} is not compiled: pip install -e . (with mypy available to the build)"
