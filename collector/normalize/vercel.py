"""Vercel AI SDK telemetry (ai.* attributes): ai.generateText/streamText and their doGenerate/doStream
model calls, ai.toolCall tool executions."""

from __future__ import annotations

from typing import Any, Final

from ..model.steps import AGENT, LLM, OTHER, TOOL
from . import draft as field
from .draft import Draft

LLM_OPERATIONS: Final = frozenset({"ai.generateText.doGenerate", "ai.streamText.doStream",
                                   "ai.generateObject.doGenerate", "ai.streamObject.doStream"})
AGENT_OPERATIONS: Final = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})


MARKERS: Final = frozenset({"ai.operationId"})  # a span with any of these is read by this module


def read(attrs: dict[str, Any], name: str, draft: Draft) -> None:
    op = attrs.get("ai.operationId")
    if op in LLM_OPERATIONS:
        draft.offer(field.KIND, LLM)
    elif op == "ai.toolCall":
        draft.offer(field.KIND, TOOL)
    elif op in AGENT_OPERATIONS:
        draft.offer(field.KIND, AGENT)
    else:
        draft.offer(field.KIND, OTHER)
    if (agent := attrs.get("ai.telemetry.functionId")) is not None:
        draft.offer(field.AGENT_NAME, str(agent))
    if (model := attrs.get("ai.response.model") or attrs.get("ai.model.id")) is not None:
        draft.offer(field.MODEL, str(model))
    if (provider := attrs.get("ai.model.provider")) is not None:
        draft.offer(field.PROVIDER, str(provider).split(".")[0])
    if op == "ai.toolCall":
        draft.offer(field.TOOL_NAME, str(attrs.get("ai.toolCall.name", name)))
        if (call_id := attrs.get("ai.toolCall.id")) is not None:
            draft.offer(field.TOOL_CALL_ID, str(call_id))
        if (args := attrs.get("ai.toolCall.args")) is not None:
            draft.offer(field.ARGS, args)
        if (result := attrs.get("ai.toolCall.result")) is not None:
            draft.offer(field.RESULT, result)
    if op in LLM_OPERATIONS:
        text = attrs.get("ai.response.text")
        calls = attrs.get("ai.response.toolCalls")
        if text is not None or calls is not None:
            draft.offer(field.OUTPUT, f"{text or ''}\n{calls or ''}".strip())
        if (finish := attrs.get("ai.response.finishReason")) is not None:
            draft.offer(field.FINISH_REASONS, [finish])
        for key, slot in (("ai.usage.promptTokens", field.INPUT_TOKENS), ("ai.usage.inputTokens", field.INPUT_TOKENS),
                          ("ai.usage.completionTokens", field.OUTPUT_TOKENS),
                          ("ai.usage.outputTokens", field.OUTPUT_TOKENS),
                          ("ai.usage.cachedInputTokens", field.CACHE_READ_TOKENS)):
            if (value := attrs.get(key)) is not None:
                draft.offer(slot, value)
