"""Traceloop OpenLLMetry conventions: traceloop.span.kind, traceloop.entity.*, llm.request.type.

Its model, token and indexed prompt/completion attributes use gen_ai.* names and are read by genai."""

from __future__ import annotations

from typing import Any, Final

from ..model.steps import AGENT, LLM, OTHER, TOOL
from . import draft as field
from .draft import Draft

KINDS: Final = {"tool": TOOL, "agent": AGENT, "workflow": AGENT, "task": OTHER}
LLM_REQUEST_TYPES: Final = frozenset({"chat", "completion"})


# A span with any of these is read by this module.
MARKERS: Final = frozenset({"traceloop.span.kind", "llm.request.type"})


def read(attrs: dict[str, Any], name: str, draft: Draft) -> None:
    span_kind = attrs.get("traceloop.span.kind")
    if attrs.get("llm.request.type") in LLM_REQUEST_TYPES:
        draft.offer(field.KIND, LLM)
    elif span_kind in KINDS:
        draft.offer(field.KIND, KINDS[span_kind])
    entity = attrs.get("traceloop.entity.name")
    if span_kind == "agent" and entity is not None:
        draft.offer(field.AGENT_NAME, str(entity))
    if span_kind == "tool":
        draft.offer(field.TOOL_NAME, str(entity or name.removesuffix(".tool")))
        if (args := attrs.get("traceloop.entity.input")) is not None:
            draft.offer(field.ARGS, args)
        if (result := attrs.get("traceloop.entity.output")) is not None:
            draft.offer(field.RESULT, result)
    if (finish := attrs.get("llm.response.finish_reason")) is not None:
        draft.offer(field.FINISH_REASONS, [finish])
    if (total := attrs.get("llm.usage.total_tokens")) is not None and not draft.has(field.INPUT_TOKENS):
        draft.offer(field.INPUT_TOKENS, total)  # only the total is known: counted as input
