"""Runs the detector plugins over each trace, isolating failures: a detector that raises is logged,
counted and switched off for that trace; the others and the pipeline go on."""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..assemble import Trace
from ..steps import Finding, Step, StepKind
from .detector import Detector, DetectorSettings
from .detectors import load_detectors
from .modes import MODES
from .tools import ToolClassifier, ToolsConfig

log = logging.getLogger(__name__)


@dataclass(slots=True)
class TraceFindings:
    """The classifier's state for one trace."""

    detectors: list[Detector]
    by_kind: dict[StepKind, list[Detector]]  # the detectors each kind of step goes to, in order
    findings: dict[str, Finding] = field(default_factory=dict)


class ClassifierEngine:
    def __init__(self, settings: dict[str, Any] | None = None,
                 on_detector_error: Callable[[str], None] | None = None, tools: ToolsConfig | None = None) -> None:
        """`settings` maps a failure-mode code to that detector's settings (a mapping or its model)."""
        settings = settings or {}
        self.available = load_detectors()
        unknown = set(settings) - set(self.available)
        if unknown:
            raise ValueError(f"no detector for {sorted(unknown)}; detectors: {sorted(self.available)}")
        self.detectors: list[tuple[type[Detector], DetectorSettings]] = []
        for code, cls in self.available.items():
            value = settings.get(code) or {}
            parsed = value if isinstance(value, cls.Settings) else cls.Settings.model_validate(value)
            if parsed.enabled:
                self.detectors.append((cls, parsed))
        self.on_detector_error = on_detector_error or (lambda code: None)
        self.kinds = frozenset().union(*(cls.kinds for cls, _ in self.detectors))  # steps any detector wants
        self.tools = ToolClassifier(tools)
        assessed = {cls.code for cls, _ in self.detectors}
        self.not_assessed = [code for code in MODES if code not in assessed]  # no enabled detector for these

    def _start(self, trace: Trace) -> TraceFindings:
        detectors = [cls(s, trace, self.tools) for cls, s in self.detectors]
        return TraceFindings(detectors, {kind: [d for d in detectors if kind in d.kinds] for kind in StepKind})

    @staticmethod
    def _skipped(detector: Detector, step: Step | None) -> bool:
        """Whether the run's agent is one the detector is told to leave alone (checked only on findings)."""
        patterns = detector.settings.skip_agents
        if not patterns:
            return False
        trace = detector.trace
        agent = trace.root.agent if trace.root is not None and trace.root.agent else None
        if agent is None:
            agent = step.agent if step is not None and step.agent else next((s.agent for s in trace.steps if s.agent),
                                                                              None)
        return agent is not None and any(fnmatch.fnmatchcase(agent, p) for p in patterns)

    def _switch_off(self, state: TraceFindings, failed: list[Detector]) -> None:
        for detector in failed:
            state.detectors.remove(detector)
            for listed in state.by_kind.values():
                if detector in listed:
                    listed.remove(detector)
            self.on_detector_error(detector.code)

    def _feed(self, state: TraceFindings, step: Step) -> list[Finding] | tuple[()]:
        changed: list[Finding] | None = None
        failed: list[Detector] | None = None
        for detector in state.by_kind[step.kind]:
            try:
                finding = detector.observe(step)
            except Exception:
                log.exception("detector %s failed on trace %s; switched off for this trace",
                              detector.code, detector.trace.trace_id.hex())
                failed = [*(failed or ()), detector]
                continue
            if finding is not None and not self._skipped(detector, step):
                state.findings[finding.code] = finding
                changed = [*(changed or ()), finding]
        if failed:
            self._switch_off(state, failed)
        return changed or ()

    def observe(self, trace: Trace, step: Step) -> list[Finding] | tuple[()]:
        """Feed one step; returns the findings that are new or changed."""
        if step.kind not in self.kinds:
            return ()
        state: TraceFindings = trace.classifier
        if state is None:
            state = trace.classifier = self._start(trace)
        return self._feed(state, step)

    def finish(self, trace: Trace) -> dict[str, Finding]:
        """Final findings. Steps that arrived out of start order are classified again, in order."""
        state: TraceFindings = trace.classifier or self._start(trace)
        if not trace.in_order:
            state = self._start(trace)
            for step in trace.ordered_steps():
                self._feed(state, step)
        findings: dict[str, Finding] = {}
        failed: list[Detector] = []
        for detector in state.detectors:
            try:
                finding = detector.finish()
            except Exception:
                log.exception("detector %s failed finishing trace %s", detector.code, trace.trace_id.hex())
                failed.append(detector)
                continue
            if finding is not None and not self._skipped(detector, None):
                findings[finding.code] = finding
        self._switch_off(state, failed)
        trace.classifier = state
        return findings
