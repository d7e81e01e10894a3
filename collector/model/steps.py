"""The unit everything downstream of normalisation works on: one agent step per span."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from .content import Content


class StepKind(enum.IntEnum):
    LLM = 1  # one model inference call
    TOOL = 2  # one tool execution
    AGENT = 3  # an agent / workflow invocation wrapping other steps
    OTHER = 4


# The kinds as plain names for code that compares them on every step: on Python 3.11 a member looked up on its
# enum class goes through EnumType.__getattr__, several times slower than a global.
LLM: Final = StepKind.LLM
TOOL: Final = StepKind.TOOL
AGENT: Final = StepKind.AGENT
OTHER: Final = StepKind.OTHER


@dataclass(slots=True, init=False)  # __init__ written out: it is compiled, a generated one is not
class Step:
    """A normalised span. Content is only ever kept as a fingerprint or a short preview."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    kind: StepKind
    name: str
    start_ns: int
    end_ns: int
    service: str
    agent: str | None  # explicit agent name on this span, if any
    model: str | None
    provider: str | None
    tool: str | None
    tool_call_id: str | None
    args: Content | None  # tool arguments
    result: Content | None  # tool result
    output_fingerprint: int | None  # model output (text and tool calls), hashed
    output_chars: int
    output_preview: str | None
    error: bool
    error_type: str | None
    error_message: str | None  # the failure's text: its exception message, else its status description
    limit: str | None  # a framework's iteration / recursion / turn limit this step hit (its error type or the
    # message naming the limit)
    finish_reasons: tuple[str, ...]
    input_tokens: int  # all input tokens, cache reads and writes included
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    conversation_id: str | None
    # Content read by detectors (content capture on), each at most TEXT_CHARS long
    said: str | None  # the model's text output, without its tool calls
    user_text: str | None  # what the user said since the model's last turn (in the model call's input)
    result_text: str | None  # the tool's result as text
    args_text: str | None  # the tool's arguments as text
    tool_calls: int  # tool calls the model's output asks for (0 when not captured)
    rules: int  # the rules the agent's instructions state (normalize.instructions bits; 0: none known)
    instructions: str | None  # the agent's instructions in lower case, whole: one string shared by the model calls
    # that carry the same text (content capture on)
    version: str  # the span's resource's service.version ("" when it has none)
    environment: str  # the span's resource's deployment environment ("" when it names none)

    def __init__(self, trace_id: bytes, span_id: bytes, parent_span_id: bytes, kind: StepKind, name: str,
                 start_ns: int, end_ns: int, service: str, *, agent: str | None = None, model: str | None = None,
                 provider: str | None = None, tool: str | None = None, tool_call_id: str | None = None,
                 args: Content | None = None, result: Content | None = None, output_fingerprint: int | None = None,
                 output_chars: int = 0, output_preview: str | None = None, error: bool = False,
                 error_type: str | None = None, error_message: str | None = None, limit: str | None = None,
                 finish_reasons: tuple[str, ...] = (), input_tokens: int = 0, output_tokens: int = 0,
                 cache_read_tokens: int = 0, cache_write_tokens: int = 0, conversation_id: str | None = None) -> None:
        self.trace_id, self.span_id, self.parent_span_id, self.kind = trace_id, span_id, parent_span_id, kind
        self.name, self.start_ns, self.end_ns, self.service = name, start_ns, end_ns, service
        self.agent, self.model, self.provider, self.tool, self.tool_call_id = agent, model, provider, tool, tool_call_id
        self.args, self.result = args, result
        self.output_fingerprint, self.output_chars = output_fingerprint, output_chars
        self.output_preview = output_preview
        self.error, self.error_type, self.error_message, self.limit = error, error_type, error_message, limit
        self.finish_reasons, self.input_tokens, self.output_tokens = finish_reasons, input_tokens, output_tokens
        self.cache_read_tokens, self.cache_write_tokens = cache_read_tokens, cache_write_tokens
        self.conversation_id = conversation_id
        self.said = self.user_text = self.result_text = self.args_text = None
        self.tool_calls = self.rules = 0
        self.instructions = None
        self.version = self.environment = ""

    @property
    def seconds(self) -> float:
        """The span's duration (0 for one that ends before it starts)."""
        return max(self.end_ns - self.start_ns, 0) / 1e9

    @property
    def span_hex(self) -> str:
        return self.span_id.hex()

    @property
    def args_fingerprint(self) -> int | None:
        return None if self.args is None else self.args.fingerprint

    @property
    def args_key(self) -> str | int | None:
        """What equivalent arguments share (see `Content.key`)."""
        return None if self.args is None else self.args.key

    @property
    def args_preview(self) -> str | None:
        return None if self.args is None else self.args.preview

    @property
    def result_key(self) -> str | int | None:
        return None if self.result is None else self.result.key

    @property
    def is_root(self) -> bool:
        return not self.parent_span_id

    def tokens_by_type(self) -> tuple[tuple[str, int], ...]:
        """Tokens kept apart by type; "input" is the uncached part, so the four add up to all tokens."""
        cached = self.cache_read_tokens + self.cache_write_tokens
        return (("input", max(self.input_tokens - cached, 0)), ("output", self.output_tokens),
                ("cache_read", self.cache_read_tokens), ("cache_write", self.cache_write_tokens))


def ended_by(steps: list[Step], ns: int) -> int:
    """How many of `steps` (in end order) ended at or before `ns`: bisect_right by end time, natively (bisect's
    `key` is a call through Python per probe)."""
    lo, hi = 0, len(steps)
    while lo < hi:
        mid = (lo + hi) // 2
        if ns < steps[mid].end_ns:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(slots=True, init=False)  # __init__ written out: it is compiled, a generated one is not
class Finding:
    """One failure mode shown by one trace, with the span ids that show it. `reason` says why in words of the
    trace's structure only (tool names, counts); the captured content that shows it (a phrase the model said, a
    record's id, a figure) is in `quote`, which is stored only where content storage is opted in."""

    code: str
    confidence: float
    evidence: list[bytes]
    reason: str
    basis: str  # structure | content | judge
    repeated: list[Step]  # the redundant steps (FM-1.3 spend)
    quote: str | None

    def __init__(self, code: str, confidence: float, evidence: list[bytes], reason: str, basis: str = "structure",
                 repeated: list[Step] | None = None, quote: str | None = None) -> None:
        self.code, self.confidence, self.evidence, self.reason, self.basis = code, confidence, evidence, reason, basis
        self.repeated = [] if repeated is None else repeated
        self.quote = quote
