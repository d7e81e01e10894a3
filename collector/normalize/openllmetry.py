"""Traceloop OpenLLMetry conventions: traceloop.span.kind, traceloop.entity.*, llm.request.type.

Its model, token and indexed prompt/completion attributes use gen_ai.* names and are read by genai."""

from __future__ import annotations

from typing import Any

from ..steps import AGENT, LLM, OTHER, TOOL

KINDS = {"tool": TOOL, "agent": AGENT, "workflow": AGENT, "task": OTHER}
LLM_REQUEST_TYPES = frozenset({"chat", "completion"})


MARKERS = frozenset({"traceloop.span.kind", "llm.request.type"})  # a span with any of these is read by this module


def read(attrs: dict[str, Any], name: str, draft: dict[str, Any]) -> None:
    span_kind = attrs.get("traceloop.span.kind")
    if attrs.get("llm.request.type") in LLM_REQUEST_TYPES:
        draft.setdefault("kind", LLM)
    elif span_kind in KINDS:
        draft.setdefault("kind", KINDS[span_kind])
    entity = attrs.get("traceloop.entity.name")
    if span_kind == "agent" and entity is not None:
        draft.setdefault("agent", str(entity))
    if span_kind == "tool":
        draft.setdefault("tool", str(entity or name.removesuffix(".tool")))
        if (args := attrs.get("traceloop.entity.input")) is not None:
            draft.setdefault("args", args)
        if (result := attrs.get("traceloop.entity.output")) is not None:
            draft.setdefault("result", result)
    if (finish := attrs.get("llm.response.finish_reason")) is not None:
        draft.setdefault("finish_reasons", [finish])
    if (total := attrs.get("llm.usage.total_tokens")) is not None and "input_tokens" not in draft:
        draft.setdefault("input_tokens", total)  # only the total is known: counted as input
