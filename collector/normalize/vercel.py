"""Vercel AI SDK telemetry (ai.* attributes): ai.generateText/streamText and their doGenerate/doStream
model calls, ai.toolCall tool executions."""

from __future__ import annotations

from typing import Any, Final

from ..steps import AGENT, LLM, OTHER, TOOL
from .draft import (
    AGENT_NAME,
    ARGS,
    CACHE_READ_TOKENS,
    FINISH_REASONS,
    INPUT_TOKENS,
    KIND,
    MODEL,
    OUTPUT,
    OUTPUT_TOKENS,
    PROVIDER,
    RESULT,
    TOOL_CALL_ID,
    TOOL_NAME,
    Draft,
)

LLM_OPERATIONS: Final = frozenset({"ai.generateText.doGenerate", "ai.streamText.doStream",
                                   "ai.generateObject.doGenerate", "ai.streamObject.doStream"})
AGENT_OPERATIONS: Final = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})


MARKERS: Final = frozenset({"ai.operationId"})  # a span with any of these is read by this module


def read(attrs: dict[str, Any], name: str, draft: Draft) -> None:
    op = attrs.get("ai.operationId")
    if op in LLM_OPERATIONS:
        draft.offer(KIND, LLM)
    elif op == "ai.toolCall":
        draft.offer(KIND, TOOL)
    elif op in AGENT_OPERATIONS:
        draft.offer(KIND, AGENT)
    else:
        draft.offer(KIND, OTHER)
    if (agent := attrs.get("ai.telemetry.functionId")) is not None:
        draft.offer(AGENT_NAME, str(agent))
    if (model := attrs.get("ai.response.model") or attrs.get("ai.model.id")) is not None:
        draft.offer(MODEL, str(model))
    if (provider := attrs.get("ai.model.provider")) is not None:
        draft.offer(PROVIDER, str(provider).split(".")[0])
    if op == "ai.toolCall":
        draft.offer(TOOL_NAME, str(attrs.get("ai.toolCall.name", name)))
        if (call_id := attrs.get("ai.toolCall.id")) is not None:
            draft.offer(TOOL_CALL_ID, str(call_id))
        if (args := attrs.get("ai.toolCall.args")) is not None:
            draft.offer(ARGS, args)
        if (result := attrs.get("ai.toolCall.result")) is not None:
            draft.offer(RESULT, result)
    if op in LLM_OPERATIONS:
        text = attrs.get("ai.response.text")
        calls = attrs.get("ai.response.toolCalls")
        if text is not None or calls is not None:
            draft.offer(OUTPUT, f"{text or ''}\n{calls or ''}".strip())
        if (finish := attrs.get("ai.response.finishReason")) is not None:
            draft.offer(FINISH_REASONS, [finish])
        for key, field in (("ai.usage.promptTokens", INPUT_TOKENS), ("ai.usage.inputTokens", INPUT_TOKENS),
                           ("ai.usage.completionTokens", OUTPUT_TOKENS),
                           ("ai.usage.outputTokens", OUTPUT_TOKENS),
                           ("ai.usage.cachedInputTokens", CACHE_READ_TOKENS)):
            if (value := attrs.get(key)) is not None:
                draft.offer(field, value)
