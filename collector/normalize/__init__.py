"""Spans to steps. Each convention module (its MARKERS say which spans are its) reads what it knows; earlier
modules win on conflicts.

Only fingerprints and short previews of message content, tool arguments and results are kept."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ..content import Content, fingerprint, preview
from ..steps import Step, StepKind
from . import genai, langfuse, openinference, openllmetry, vercel

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


def _model_id(model: str) -> str:
    """A Vertex AI resource name (projects/.../publishers/google/models/gemini-2.5-flash) or a Gemini API
    name (models/gemini-2.5-flash) to the model id it names."""
    if model.startswith("models/") or "/models/" in model:
        return model.rpartition("/")[2] or model
    return model


def normalize_span(span: SpanRecord) -> Step:
    service, trace_id, span_id, parent_span_id, name, start_ns, end_ns, status_code, attrs = span
    draft: dict[str, Any] = {}
    for convention in CONVENTIONS:
        if not convention.MARKERS.isdisjoint(attrs):
            convention.read(attrs, name, draft)
    kind = draft.get("kind") or StepKind.OTHER
    step = Step(trace_id, span_id, parent_span_id, kind, _intern(name), start_ns, end_ns, _intern(service))
    if (agent := draft.get("agent")) is not None:
        step.agent = _intern(agent)
    if (model := draft.get("model")) is not None:
        step.model = _intern(_model_id(model))
    if (provider := draft.get("provider")) is not None:
        step.provider = _intern(provider)
    if (tool := draft.get("tool")) is not None:
        step.tool = _intern(tool)
    step.tool_call_id = draft.get("tool_call_id")
    step.conversation_id = draft.get("conversation_id")
    if (args := draft.get("args")) is not None:
        step.args = Content(args)
    if (result := draft.get("result")) is not None:
        step.result = Content(result)
    if (output := draft.get("output")) is not None:
        text = str(output)
        step.output_fingerprint = fingerprint(" ".join(text.split()))
        step.output_chars = len(text)
        step.output_preview = preview(text)
    if kind is StepKind.LLM:  # tokens from inference spans only: agent spans repeat their children's sums
        step.input_tokens = _int(draft.get("input_tokens"))
        step.output_tokens = _int(draft.get("output_tokens"))
        step.cache_read_tokens = _int(draft.get("cache_read_tokens"))
        step.cache_write_tokens = _int(draft.get("cache_write_tokens"))
    finish = draft.get("finish_reasons")
    if finish:
        step.finish_reasons = tuple(_intern(str(f)) for f in (finish if isinstance(finish, list) else [finish]))
    error_type = draft.get("error_type")
    step.error = status_code == STATUS_ERROR or error_type is not None
    if error_type is not None:
        step.error_type = _intern(error_type)
    elif step.error:
        step.error_type = "_OTHER"
    return step
