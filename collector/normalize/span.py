"""A span to a step. Each convention module (its MARKERS say which spans are its) reads what it knows; earlier
modules win on conflicts.

Failures, whatever the convention: a step failed when its status is ERROR or its convention gives an error type
(`error.type`, Langfuse's ERROR level). The exception the SDKs record as a span event (`exception.type` and
`exception.message`, which the decoder adds to the attributes, see collector/receiver/decode.py) gives the error
type where the convention gives none (or only `_OTHER`), and fails the step only with status ERROR or
`exception.escaped` true: an exception leaving a span is recorded together with status ERROR (the Python SDK's
`start_as_current_span` and `use_span` do both by default, with description "Type: message"), while one recorded
alone was handled (retried, fallen back from). The exception message, else the status description, is the
step's `error_message`; it names a limit hit (`limits.LIMIT_TEXT`, "Recursion limit of 25 reached") on any step
but a tool call, whose limits are its own, not the run's.

Only fingerprints and short previews of message content, tool arguments and results are kept."""

from __future__ import annotations

from typing import Any, Final

from ..bounded import remember
from ..model.content import PREVIEW_CHARS, TEXT_CHARS, Content, canonical_json, collapse, fingerprint, preview
from ..model.spans import SpanRecord
from ..model.steps import LLM, OTHER, TOOL, Step
from . import draft as field
from . import genai, langfuse, openinference, openllmetry, vercel
from .attributes import EXCEPTION_ESCAPED, EXCEPTION_MESSAGE, EXCEPTION_TYPE, STATUS_DESCRIPTION
from .draft import Draft
from .limits import LIMIT_TEXT, limit_hit

try:
    from . import _genai
except ImportError:  # built without a C compiler: the spans it would take read by genai.read
    from . import _genai_py as _genai  # type: ignore[no-redef]
try:
    from . import _strings
except ImportError:  # built without a C compiler
    from . import _strings_py as _strings  # type: ignore[no-redef]

CONVENTIONS: Final = (genai, openinference, openllmetry, vercel, langfuse)
STATUS_ERROR: Final = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR
OTHER_ERROR: Final = "_OTHER"  # the conventions' error type when none is known


def _int(value: Any) -> int:
    if value is None:
        return 0
    if type(value) is int:
        return value if value > 0 else 0
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


_CACHE_SIZE: Final = 10_000  # span-derived values: caches are bounded (collector.bounded)


# Called per span: Final, so that compiled code calls them from C statics, not through the module's dict.
_canonical: Final = _strings.canonical  # one str per text for what steps keep, bounded as the caches here
_genai_values: Final = _genai.values  # genai.read in C (see normalize_span)
_strings.bound(_CACHE_SIZE)


_MODEL_IDS: Final[dict[str, str]] = {}  # model name as given -> its id, canonical


def _model_id(model: str) -> str:
    """The model id, canonical. A Vertex AI resource name (projects/.../publishers/google/models/gemini-2.5-flash)
    or a Gemini API name (models/gemini-2.5-flash) becomes the model id it names. A name seen before costs one
    lookup."""
    known = _MODEL_IDS.get(model)
    if known is not None:
        return known
    text = model
    if model.startswith("models/") or "/models/" in model:
        text = model.rpartition("/")[2] or model
    return remember(_MODEL_IDS, model, _canonical(text), _CACHE_SIZE)


_REASONS: Final[dict[object, tuple[str, ...]]] = {}  # finish reasons as given -> canonical: one by its str (most
# spans give one: its hash is kept, no tuple is made and hashed per span), several by their tuple (a plain dict: an
# lru_cache would be a call through Python per span)


def _finish_reasons(finish: Any) -> tuple[str, ...]:
    if type(finish) is list and len(finish) == 1 and type(finish[0]) is str:
        reason: str = finish[0]
        one = _REASONS.get(reason)
        if one is None:
            made: tuple[str, ...] = (_canonical(reason),)  # (typed so: compiled, a tuple[str] is unboxed, a copy
            one = remember(_REASONS, reason, made, _CACHE_SIZE)  # made per return)
        return one
    key = tuple(finish) if isinstance(finish, list) else (finish,)
    try:
        known = _REASONS.get(key)
    except TypeError:  # unhashable values (a malformed attribute): not cached
        return tuple(_canonical(str(f)) for f in key)
    if known is None:
        known = remember(_REASONS, key, tuple(_canonical(str(f)) for f in key), _CACHE_SIZE)
    return known


# A span's key marks (the OR of its attribute keys' marks) tell which conventions read it and which of genai's
# optional keys it has. The conventions that read a span are those with a marker among its keys: each marker
# names its convention's bit (its place in CONVENTIONS). Above those bits, each optional key sets its bit of
# `genai.OPTIONAL`, which `genai.read` finds in `Draft.present`. The decoder ORs them as it reads the keys
# (SpanRecord.key_marks); a record made otherwise is scanned here.


def _key_marks() -> dict[str, int]:
    bits: dict[str, int] = {}
    for i, convention in enumerate(CONVENTIONS):
        for marker in convention.MARKERS:
            bits[marker] = bits.get(marker, 0) | 1 << i
    for key, bit in genai.OPTIONAL.items():
        bits[key] = bits.get(key, 0) | bit << len(CONVENTIONS)
    return bits


KEY_MARKS: Final = _key_marks()
# each convention's bit in a span's key marks
_GENAI: Final = 1 << CONVENTIONS.index(genai)
_OPENINFERENCE: Final = 1 << CONVENTIONS.index(openinference)
_OPENLLMETRY: Final = 1 << CONVENTIONS.index(openllmetry)
_VERCEL: Final = 1 << CONVENTIONS.index(vercel)
_LANGFUSE: Final = 1 << CONVENTIONS.index(langfuse)
_CONVENTIONS: Final = (1 << len(CONVENTIONS)) - 1
_genai.configure(genai.SPEC)


def key_marks(attrs: dict[str, Any]) -> int:
    """The OR of the marks of the keys of `attrs`."""
    bits = 0
    for key in attrs:
        bit = KEY_MARKS.get(key)
        if bit is not None:
            bits |= bit
    return bits


def _failure(step: Step, attrs: dict[str, Any], status_error: bool, error_type: str | None) -> None:
    """The step's error, error type, message and limit hit, from its status, its convention's error type and its
    exception (see the module docstring)."""
    exception = attrs.get(EXCEPTION_TYPE) or None  # an empty type is none
    failed = status_error or error_type is not None
    if exception is not None and (error_type is None or error_type == OTHER_ERROR):
        escaped = attrs.get(EXCEPTION_ESCAPED)
        failed = failed or escaped is True or (type(escaped) is str and escaped.lower() == "true")
        error_type = str(exception)
    elif error_type is None:
        if not failed:
            return
        error_type = OTHER_ERROR
    step.error = failed
    step.error_type = _canonical(error_type)
    step.limit = limit_hit(step.error_type)
    message = attrs.get(EXCEPTION_MESSAGE)
    if type(message) is not str or not message:
        message = attrs.get(STATUS_DESCRIPTION)
    if type(message) is str and message:
        step.error_message = message = message[:PREVIEW_CHARS]
        if step.limit is None and step.kind is not TOOL and LIMIT_TEXT.search(message):
            step.limit = message


def draft(attrs: dict[str, Any], name: str, bits: int) -> Draft:
    """What the conventions whose markers the span has (`bits`: its key marks) read from it, in CONVENTIONS order
    (earlier ones win), each a native call."""
    draft = Draft(bits >> len(CONVENTIONS))
    if bits & _GENAI:
        genai.read(attrs, name, draft)
    if bits & _OPENINFERENCE:
        openinference.read(attrs, name, draft)
    if bits & _OPENLLMETRY:
        openllmetry.read(attrs, name, draft)
    if bits & _VERCEL:
        vercel.read(attrs, name, draft)
    if bits & _LANGFUSE:
        langfuse.read(attrs, name, draft)
    return draft


def _text(value: Any) -> str:
    """What detectors read of a tool's arguments or result: its text, or its JSON when structured (as a record's
    ids are quoted in arguments), cut at TEXT_CHARS."""
    return (value if type(value) is str else canonical_json(value))[:TEXT_CHARS]


def normalize_span(span: SpanRecord) -> Step:
    service, trace_id, span_id, parent_span_id, name, start_ns, end_ns, status_code, attrs, bits, version, environment \
        = span
    if bits < 0:  # not marked by the decoder
        bits = key_marks(attrs)
    # a span only the GenAI conventions read, with nothing to parse: its slots from C (the bulk of the traffic)
    values = _genai_values(attrs, name, bits >> len(CONVENTIONS)) if bits & _CONVENTIONS == _GENAI else None
    if values is None:
        read = draft(attrs, name, bits)
        if read.empty:
            step = Step(trace_id, span_id, parent_span_id, OTHER, _canonical(name), start_ns, end_ns,
                        _canonical(service))
            step.version, step.environment = version, environment  # the resource's: one str per request already
            if status_code == STATUS_ERROR or EXCEPTION_TYPE in attrs:
                _failure(step, attrs, status_code == STATUS_ERROR, None)
            return step
        values = read.values
    kind = values[field.KIND] or OTHER
    step = Step(trace_id, span_id, parent_span_id, kind, _canonical(name), start_ns, end_ns, _canonical(service))
    step.version, step.environment = version, environment
    if (agent := values[field.AGENT_NAME]) is not None:
        step.agent = _canonical(agent)
    if (model := values[field.MODEL]) is not None:
        step.model = _model_id(model)
    if (provider := values[field.PROVIDER]) is not None:
        step.provider = _canonical(provider)
    if (tool := values[field.TOOL_NAME]) is not None:
        step.tool = _canonical(tool)
    step.tool_call_id = values[field.TOOL_CALL_ID]
    step.conversation_id = values[field.CONVERSATION_ID]
    if (args := values[field.ARGS]) is not None:
        step.args = Content(args)
        step.args_text = _text(args)
    if (result := values[field.RESULT]) is not None:
        step.result = Content(result, verbatim=True)
        step.result_text = _text(result)
    if (output := values[field.OUTPUT]) is not None:
        text = str(output)
        step.output_fingerprint = fingerprint(collapse(text))
        step.output_chars = len(text)
        step.output_preview = preview(text)
    step.said, step.user_text = values[field.SAID], values[field.USER_TEXT]
    step.tool_calls, step.rules = values[field.TOOL_CALLS] or 0, values[field.RULES] or 0
    step.instructions = values[field.INSTRUCTIONS]
    if kind is LLM:  # tokens from inference spans only: agent spans repeat their children's sums
        step.input_tokens = _int(values[field.INPUT_TOKENS])
        step.output_tokens = _int(values[field.OUTPUT_TOKENS])
        step.cache_read_tokens = _int(values[field.CACHE_READ_TOKENS])
        step.cache_write_tokens = _int(values[field.CACHE_WRITE_TOKENS])
    if finish := values[field.FINISH_REASONS]:
        step.finish_reasons = _finish_reasons(finish)
    error_type = values[field.ERROR_TYPE]
    if status_code == STATUS_ERROR or error_type is not None or EXCEPTION_TYPE in attrs:
        _failure(step, attrs, status_code == STATUS_ERROR, error_type)
    return step
