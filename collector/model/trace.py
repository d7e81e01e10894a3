"""One trace's steps as assembled so far: what the classifier, the processor and the judge read of a run. The
stages that keep state of their own for a trace keep it here, in fields typed by the bases below (the engine's
`ClassifierState`, the detectors' `SharedState`, the processor's `Published`), so that the model imports no stage."""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from .published import Published
from .steps import AGENT, LLM, TOOL, Finding, Step, ended_by


class ClassifierState:
    """Base of what the classifier engine keeps for one trace: its findings so far (the rest is the engine's)."""

    def __init__(self) -> None:
        self.findings: dict[str, Finding] | None = None  # made at the first: most traces have none


@mypyc_attr(allow_interpreted_subclasses=True)  # a detector added as a plain module may share state too
class SharedState:
    """Base of the state the detectors of one trace share (see `classify.detector.shared`). A class, not a protocol:
    compiled code reads `users` as a field instead of looking it up by name."""

    def __init__(self) -> None:
        self.users: set[str] = set()  # the codes of the detectors feeding it

    def begin(self) -> None:
        """Forget the trace (as `Detector.begin`: the engine calls it when it reuses the detectors sharing it)."""


class Trace:
    """The steps of one trace seen so far, plus what the classifier keeps for it."""

    def __init__(self, trace_id: bytes, first_seen: float, last_seen: float) -> None:
        self.trace_id = trace_id
        self.first_seen = first_seen
        self.last_seen = last_seen
        self.steps: list[Step] = []
        self.span_ids: set[bytes] = set()  # a span sent again (a retried request) is kept once
        self.llm_steps: list[Step] = []  # in end order
        self.root: Step | None = None
        self.in_order = True  # model, tool and agent steps arrived in `order_key` order
        self._last_first, self._last_end, self._last_id = 0, 0, b""  # `order_key` of the last of them
        self._ordered_any = False  # a model, tool or agent step arrived
        self.tool_calls = 0
        self.started_ns = 0  # earliest start and latest end of any step
        self.ended_ns = 0
        self.classifier: ClassifierState | None = None  # owned by the engine
        self.shared: dict[str, SharedState] | None = None  # state its detectors share, by name (made by the first)
        self.emitted: Published | None = None  # what the exporters were already told, owned by the processor
        self.observed = 0  # how many of `steps` the classifier was fed (they are fed in arrival order)
        self.completed = False  # handed on for its verdict

    def add(self, step: Step, now: float) -> None:
        steps = self.steps
        if not steps or step.start_ns < self.started_ns:
            self.started_ns = step.start_ns
        if step.end_ns > self.ended_ns:
            self.ended_ns = step.end_ns
        steps.append(step)
        kind = step.kind
        if kind is LLM or kind is TOOL or kind is AGENT:
            # `order_key` compared field by field: a key tuple per step costs more than the rest of `add`
            first = step.end_ns if kind is AGENT else step.start_ns
            end, span_id = step.end_ns, step.span_id
            if self._ordered_any and _before(first, end, span_id, self._last_first, self._last_end, self._last_id):
                self.in_order = False
            self._last_first, self._last_end, self._last_id = first, end, span_id
            self._ordered_any = True
            if kind is TOOL:
                self.tool_calls += 1
        if kind is LLM:
            llm_steps = self.llm_steps
            if llm_steps and _ends_before(step, llm_steps[-1]):
                i = ended_by(llm_steps, step.end_ns - 1)  # the first that ended at or after it
                while i < len(llm_steps) and _ends_before(llm_steps[i], step):
                    i += 1
                llm_steps.insert(i, step)
            else:
                llm_steps.append(step)
        if step.is_root:
            self.root = step
        self.last_seen = now

    def agent(self) -> str | None:
        """The run's agent as far as known: the root span's, else that of the first step (in `order_key` order)
        naming one, whatever order they came in."""
        root = self.root
        if root is not None and root.agent:
            return root.agent
        named = [s for s in self.steps if s.agent]
        return min(named, key=order_key).agent if named else None

    def first(self) -> Step:
        """The root, else the first step in `order_key` order."""
        return self.root if self.root is not None else min(self.steps, key=order_key)

    def ordered_steps(self) -> list[Step]:
        return self.steps if self.in_order else sorted(self.steps, key=order_key)


def order_key(step: Step) -> tuple[int, int, bytes]:
    """The order detectors see a trace's steps in, whatever order they arrived in: model and tool calls by start
    (they arrive as they end, which for one agent's calls is the same), an agent span by its end (it ends after
    the calls it made, and arrives after them); ties by end, then span id."""
    return (step.end_ns if step.kind is AGENT else step.start_ns, step.end_ns, step.span_id)


def _before(first: int, end: int, span_id: bytes, other_first: int, other_end: int, other_id: bytes) -> bool:
    """(first, end, span_id) < (other_first, other_end, other_id)."""
    if first != other_first:
        return first < other_first
    if end != other_end:
        return end < other_end
    return span_id < other_id


def _ends_before(step: Step, other: Step) -> bool:
    """The order of `Trace.llm_steps`: by end, ties by start, then span id (never by arrival)."""
    return _before(step.end_ns, step.start_ns, step.span_id, other.end_ns, other.start_ns, other.span_id)
