"""Runs the detector plugins over each trace, isolating failures: a detector that raises is logged,
counted and switched off for that trace; the others and the pipeline go on.

Detector settings may differ per agent (`AgentDetectors`). A run's agent is its root span's, else the first
step naming one, else its service; until the root arrives that is provisional, and when the root names an
agent with other settings the trace is classified again from its first step with them.

When a trace's verdict is out, the processor `release`s it: its detectors, if all are `reusable`, are reset and
kept (up to `SPARE_SETS` sets per settings profile) for the next new trace instead of making new ones."""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final, cast

from pydantic import BaseModel

from ..config import AgentDetectors, DetectorSettings, ToolsConfig
from ..model.modes import MODES
from ..model.steps import Finding, Step, StepKind
from ..model.trace import ClassifierState, Trace
from .detector import Detector, SharedState, is_reusable
from .detectors import load_detectors
from .tools import ToolClassifier

log = logging.getLogger(__name__)
NO_FINDINGS: Final[dict[str, Finding]] = {}  # the live findings of a trace without any; shared, never changed
SPARE_SETS: Final = 1024  # reset detector sets kept per settings profile (2,750 B each with the defaults, memory.py)
RELEASED: Final = Trace(bytes(16), 0.0, 0.0)  # what a kept detector points at: not the trace it classified
Routes = list[list[int]]  # by step kind (its value): the positions of the detectors that observe it, in order


class TraceFindings(ClassifierState):
    """The classifier's state for one trace (`Trace.classifier`)."""

    def __init__(self, detectors: list[Detector], routes: Routes, profile: int, settled: bool,
                 shared: list[SharedState], reusable: bool) -> None:
        super().__init__()
        self.detectors = detectors  # one per detector enabled, in the engine's order (a switched off one inert)
        self.routes = routes  # the profile's, shared by its traces
        self.profile = profile  # index into the engine's agent settings, -1 for the defaults
        self.settled = settled  # the profile was chosen from the root span's agent (else it may change with the root)
        self.shared = shared  # the state its detectors share (reset with them)
        self.reusable = reusable  # every detector is (none was switched off): reset and kept when released


class ClassifierEngine:
    def __init__(self, settings: dict[str, Any] | None = None,
                 on_detector_error: Callable[[str], None] | None = None, tools: ToolsConfig | None = None,
                 agents: Sequence[AgentDetectors] = ()) -> None:
        """`settings` maps a failure-mode code to that detector's settings (a mapping or its model)."""
        settings = settings or {}
        self.available = load_detectors()
        self.detectors = self._enabled(settings)
        self.agents: list[tuple[tuple[str, ...], list[tuple[type[Detector], DetectorSettings]]]] = []
        for a in agents:
            merged = dict(settings)
            for code, values in a.detectors.items():
                merged[code] = {**_plain(settings.get(code)), **values}
            self.agents.append((tuple(a.match), self._enabled(merged)))
        # for each kind of step, the positions of the detectors that observe it (worked out once, not per trace)
        self.routes = detector_routes(self.detectors)
        self.agents_routes = [detector_routes(detectors) for _, detectors in self.agents]
        self.on_detector_error = on_detector_error or (lambda code: None)
        self.kinds = frozenset().union(*(cls.kinds for profile in (self.detectors, *(d for _, d in self.agents))
                                         for cls, _ in profile))  # steps any detector wants
        self.tools = ToolClassifier(tools)
        self.not_assessed = self._not_assessed(self.detectors)  # no enabled detector for these, by default
        # by profile + 1 (the defaults first): whether its detectors are all reusable, and its sets kept for reuse
        self._reusable = [all(is_reusable(cls) for cls, _ in d) for d in (self.detectors, *(d for _, d in self.agents))]
        self._spare: list[list[TraceFindings]] = [[] for _ in self._reusable]
        self._not_assessed_per_agent = [self._not_assessed(detectors) for _, detectors in self.agents]

    def _enabled(self, settings: dict[str, Any]) -> list[tuple[type[Detector], DetectorSettings]]:
        unknown = set(settings) - set(self.available)
        if unknown:
            raise ValueError(f"no detector for {sorted(unknown)}; detectors: {sorted(self.available)}")
        enabled = []
        for code, cls in self.available.items():
            value = settings.get(code) or {}
            parsed = value if isinstance(value, cls.Settings) else cls.Settings.model_validate(value)
            if parsed.enabled:
                enabled.append((cls, parsed))
        return enabled

    @staticmethod
    def _not_assessed(detectors: list[tuple[type[Detector], DetectorSettings]]) -> list[str]:
        assessed = {cls.code for cls, _ in detectors}
        return [code for code in MODES if code not in assessed]

    def not_assessed_for(self, trace: Trace) -> list[str]:
        """The modes no detector looked for in this trace (its agent's settings may enable more)."""
        state = _state(trace)
        if state is None or state.profile < 0:
            return self.not_assessed
        return self._not_assessed_per_agent[state.profile]

    def _profile(self, trace: Trace, step: Step | None) -> tuple[int, bool]:
        """The agent settings a trace gets (-1: the defaults), and whether the root span settled it."""
        if not self.agents:
            return -1, True
        agent = trace.agent() or (step.service if step is not None else trace.steps[0].service)
        for i, (patterns, _) in enumerate(self.agents):
            if any(fnmatch.fnmatchcase(agent, p) for p in patterns):
                return i, trace.root is not None
        return -1, trace.root is not None

    def _start(self, trace: Trace, step: Step | None) -> TraceFindings:
        profile, settled = self._profile(trace, step)
        return self._new(trace, profile, settled)

    def _enabled_for(self, profile: int) -> tuple[list[tuple[type[Detector], DetectorSettings]], Routes]:
        """The detectors (classes and settings) and routes of a profile (-1: the defaults)."""
        if profile < 0:
            return self.detectors, self.routes
        return self.agents[profile][1], self.agents_routes[profile]

    def _new(self, trace: Trace, profile: int, settled: bool) -> TraceFindings:
        self._equip(profile, [(trace, settled)])
        state = _state(trace)
        assert state is not None  # (just equipped)
        return state

    def _equip(self, profile: int, started: list[tuple[Trace, bool]]) -> None:
        """Give each trace (with whether its root settled the profile) a set of the profile's detectors: a released
        one while any is kept, else one made. Sets are made one detector class at a time over the traces: its code
        stays in the instruction cache. (A trace's detectors are still made in order, so state they share is made
        by the same one as when made one trace at a time.)"""
        spare = self._spare[profile + 1]
        making: list[tuple[Trace, bool]] = []
        for trace, settled in started:
            if spare:
                trace.classifier = _reuse(spare.pop(), trace, settled)
            else:
                trace.shared = None  # (classified again: the state the trace's earlier detectors share is theirs)
                making.append((trace, settled))
        if not making:
            return
        enabled, routes = self._enabled_for(profile)
        tools = self.tools
        made: list[list[Detector]] = [[] for _ in making]
        for cls, settings in enabled:
            for j, (trace, _) in enumerate(making):
                made[j].append(cls(settings, trace, tools))
        reusable = self._reusable[profile + 1]
        for j, (trace, settled) in enumerate(making):
            trace.classifier = TraceFindings(made[j], routes, profile, settled, _shared(trace), reusable)

    def _again(self, trace: Trace, profile: int, settled: bool) -> TraceFindings:
        """Classify the trace's steps so far again, from the first, with the detectors of `profile`."""
        old = _state(trace)
        if old is not None:
            self._keep(old)  # reset: mostly given right back
        state = trace.classifier = self._new(trace, profile, settled)
        for step in trace.ordered_steps():
            if step.kind in self.kinds:
                self._feed(state, step)
        trace.observed = len(trace.steps)
        return state

    @staticmethod
    def _skipped(detector: Detector) -> bool:
        """Whether the run's agent is one the detector is told to leave alone (checked only on findings)."""
        patterns = detector.settings.skip_agents
        if not patterns:
            return False
        agent = detector.trace.agent()
        return agent is not None and any(fnmatch.fnmatchcase(agent, p) for p in patterns)

    def _switch_off(self, state: TraceFindings, failed: list[Detector]) -> None:
        """Each failed detector is replaced, for this trace, by an inert one (the base class: sees and finds
        nothing)."""
        detectors = state.detectors
        state.reusable = False
        for detector in failed:
            detectors[detectors.index(detector)] = Detector(detector.settings, detector.trace, detector.tools)
            self.on_detector_error(detector.code)

    def _feed(self, state: TraceFindings, step: Step) -> list[Finding] | tuple[()]:
        changed: list[Finding] | None = None
        failed: list[Detector] | None = None
        detectors = state.detectors
        kind: int = step.kind  # an int index for the compiled list, not an enum object for Python's
        for i in state.routes[kind]:
            detector = detectors[i]
            try:
                finding = detector.observe(step)
            except Exception:
                log.exception("detector %s failed on trace %s; switched off for this trace",
                              detector.code, detector.trace.trace_id.hex())
                failed = [*(failed or ()), detector]
                continue
            if finding is not None and not self._skipped(detector):
                found = state.findings
                if found is None:
                    found = state.findings = {}
                found[finding.code] = finding
                changed = [*(changed or ()), finding]
        if failed:
            self._switch_off(state, failed)
        return changed or ()

    def prepare(self, traces: list[Trace]) -> None:
        """Equip with detectors the traces whose next steps to feed include the first they observe (the processor
        does it for a request's new traces before feeding any), all of a profile's at once (see `_equip`)."""
        new: dict[int, list[tuple[Trace, bool]]] = {}  # by profile: the traces and whether the root settled it
        for trace in traces:
            if trace.classifier is not None:
                continue
            steps = trace.steps
            for i in range(trace.observed, len(steps)):
                step = steps[i]
                if step.kind in self.kinds:
                    profile, settled = self._profile(trace, step)
                    started = new.get(profile)
                    if started is None:
                        started = new[profile] = []
                    started.append((trace, settled))
                    break
        for profile, started in new.items():
            self._equip(profile, started)

    def catch_up(self, trace: Trace) -> bool:
        """Feed the trace's steps assembled since it was last fed, in arrival order; whether a finding is new or
        changed."""
        steps = trace.steps
        changed = False
        while trace.observed < len(steps):  # classifying the trace again (`_again`) feeds them all at once
            step = steps[trace.observed]
            trace.observed += 1
            if self.observe(trace, step):
                changed = True
        return changed

    def observe(self, trace: Trace, step: Step) -> list[Finding] | tuple[()]:
        """Feed one step; returns the findings that are new or changed."""
        state = _state(trace)
        if state is not None and not state.settled and (step.agent or step.is_root):
            profile, settled = self._profile(trace, step)
            if profile != state.profile:  # the run's agent has settings of its own
                return list((self._again(trace, profile, settled).findings or NO_FINDINGS).values())
            state.settled = settled
        if step.kind not in self.kinds:
            return ()
        if state is None:
            state = trace.classifier = self._start(trace, step)
        return self._feed(state, step)

    def finish(self, trace: Trace) -> dict[str, Finding]:
        """Final findings. Steps that arrived out of start order are classified again, in order."""
        state = _state(trace) or self._start(trace, None)
        profile, _ = self._profile(trace, None)
        if not trace.in_order or profile != state.profile:
            state = self._again(trace, profile, True)
        findings: dict[str, Finding] = {}
        failed: list[Detector] | None = None
        for detector in state.detectors:
            try:
                finding = detector.finish()
            except Exception:
                log.exception("detector %s failed finishing trace %s", detector.code, trace.trace_id.hex())
                failed = [*(failed or ()), detector]
                continue
            if finding is not None and not self._skipped(detector):
                findings[finding.code] = finding
        if failed:
            self._switch_off(state, failed)
        trace.classifier = state
        return findings

    def release(self, trace: Trace) -> None:
        """The trace is done with (its verdict is out). Its detectors are reset and kept for a new trace, if they are
        all reusable and fewer than `SPARE_SETS` of the profile are kept; else they are left to be freed."""
        state = _state(trace)
        trace.classifier = None  # detectors point back at the trace: it is freed without the garbage collector
        if state is not None:
            self._keep(state)

    def _keep(self, state: TraceFindings) -> None:
        """Reset a set of detectors that is done with its trace and keep it for the next new one (if it may be)."""
        spare = self._spare[state.profile + 1]
        if not state.reusable or len(spare) >= SPARE_SETS:
            return
        try:
            for shared in state.shared:
                shared.begin()
            for detector in state.detectors:
                detector.trace = RELEASED
                detector.begin()
        except Exception:  # a detector's own fault: its set is left to be freed, new traces get new ones
            log.exception("resetting the detectors of a finished trace failed; they are not reused")
            return
        state.findings = None
        spare.append(state)


def _state(trace: Trace) -> TraceFindings | None:
    """The engine's state for the trace (it is the only one that sets `Trace.classifier`)."""
    return cast(TraceFindings | None, trace.classifier)


def _shared(trace: Trace) -> list[SharedState]:
    """The state the detectors just made for the trace share."""
    return [] if trace.shared is None else list(trace.shared.values())


def _reuse(state: TraceFindings, trace: Trace, settled: bool) -> TraceFindings:
    """A released set of detectors, for `trace`."""
    for detector in state.detectors:
        detector.trace = trace
    state.settled = settled
    return state


def detector_routes(detectors: list[tuple[type[Detector], DetectorSettings]]) -> Routes:
    """For each kind of step (by its value), the positions in `detectors` of those that observe it."""
    routes: Routes = [[] for _ in range(max(StepKind) + 1)]
    for kind in StepKind:
        routes[kind] = [i for i, (cls, _) in enumerate(detectors) if kind in cls.kinds]
    return routes


def _plain(settings: Any) -> dict[str, Any]:
    """Detector settings as a mapping (they may be given as their model)."""
    if settings is None:
        return {}
    return settings.model_dump(exclude_unset=True) if isinstance(settings, BaseModel) else dict(settings)
