"""Spans to steps. Each convention module (its MARKERS say which spans are its) reads what it knows; earlier
modules win on conflicts.

Only fingerprints and short previews of message content, tool arguments and results are kept."""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

from ..content import Content, fingerprint, preview
from ..steps import LLM, OTHER, Step
from . import genai, langfuse, openinference, openllmetry, vercel
from .limits import limit_hit

if TYPE_CHECKING:
    from ..receiver.decode import SpanRecord

CONVENTIONS = (genai, openinference, openllmetry, vercel, langfuse)
_intern = sys.intern
STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR


def _int(value: Any) -> int:
    if value is None:
        return 0
    if type(value) is int:
        return value if value > 0 else 0
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


_CACHE_SIZE = 10_000  # span-derived values: caches are bounded (least recently used dropped)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _model_id(model: str) -> str:
    """The model id, interned. A Vertex AI resource name (projects/.../publishers/google/models/gemini-2.5-flash)
    or a Gemini API name (models/gemini-2.5-flash) becomes the model id it names."""
    known = model.rpartition("/")[2] or model if model.startswith("models/") or "/models/" in model else model
    return _intern(str(known))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _interned(key: tuple) -> tuple[str, ...]:
    return tuple(_intern(str(f)) for f in key)


def _finish_reasons(finish: Any) -> tuple[str, ...]:
    key = tuple(finish) if isinstance(finish, list) else (finish,)
    try:
        return _interned(key)
    except TypeError:  # unhashable values (a malformed attribute): not cached
        return tuple(_intern(str(f)) for f in key)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _readers(keys: tuple[str, ...]) -> tuple[Any, ...]:
    """The conventions that read spans with these attribute keys. One instrumentation emits a few key sets
    over and over, so the choice is made once per key set."""
    return tuple(c.read for c in CONVENTIONS if not c.MARKERS.isdisjoint(keys))


def normalize_span(span: SpanRecord) -> Step:
    service, trace_id, span_id, parent_span_id, name, start_ns, end_ns, status_code, attrs = span
    draft: dict[str, Any] = {}
    for read in _readers(tuple(attrs)):
        read(attrs, name, draft)
    get = draft.get
    kind = get("kind") or OTHER
    step = Step(trace_id, span_id, parent_span_id, kind, _intern(name), start_ns, end_ns, _intern(service))
    if not draft:
        step.error = status_code == STATUS_ERROR
        if step.error:
            step.error_type = "_OTHER"
        return step
    if (agent := get("agent")) is not None:
        step.agent = _intern(agent)
    if (model := get("model")) is not None:
        step.model = _model_id(model)
    if (provider := get("provider")) is not None:
        step.provider = _intern(provider)
    if (tool := get("tool")) is not None:
        step.tool = _intern(tool)
    step.tool_call_id = get("tool_call_id")
    step.conversation_id = get("conversation_id")
    if (args := get("args")) is not None:
        step.args = Content(args)
    if (result := get("result")) is not None:
        step.result = Content(result)
    if (output := get("output")) is not None:
        text = str(output)
        step.output_fingerprint = fingerprint(" ".join(text.split()))
        step.output_chars = len(text)
        step.output_preview = preview(text)
    if kind is LLM:  # tokens from inference spans only: agent spans repeat their children's sums
        step.input_tokens = _int(get("input_tokens"))
        step.output_tokens = _int(get("output_tokens"))
        step.cache_read_tokens = _int(get("cache_read_tokens"))
        step.cache_write_tokens = _int(get("cache_write_tokens"))
    if finish := get("finish_reasons"):
        step.finish_reasons = _finish_reasons(finish)
    error_type = get("error_type")
    step.error = status_code == STATUS_ERROR or error_type is not None
    if error_type is not None:
        step.error_type = _intern(error_type)
        step.limit = limit_hit(step.error_type)
    elif step.error:
        step.error_type = "_OTHER"
    return step
