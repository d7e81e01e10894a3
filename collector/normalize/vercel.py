"""Vercel AI SDK telemetry (ai.* attributes): ai.generateText/streamText and their doGenerate/doStream
model calls, ai.toolCall tool executions."""

from __future__ import annotations

from typing import Any

from ..steps import AGENT, LLM, OTHER, TOOL

LLM_OPERATIONS = frozenset({"ai.generateText.doGenerate", "ai.streamText.doStream",
                            "ai.generateObject.doGenerate", "ai.streamObject.doStream"})
AGENT_OPERATIONS = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})


MARKERS = frozenset({"ai.operationId"})  # a span with any of these is read by this module


def read(attrs: dict[str, Any], name: str, draft: dict[str, Any]) -> None:
    op = attrs.get("ai.operationId")
    if op in LLM_OPERATIONS:
        draft.setdefault("kind", LLM)
    elif op == "ai.toolCall":
        draft.setdefault("kind", TOOL)
    elif op in AGENT_OPERATIONS:
        draft.setdefault("kind", AGENT)
    else:
        draft.setdefault("kind", OTHER)
    if (agent := attrs.get("ai.telemetry.functionId")) is not None:
        draft.setdefault("agent", str(agent))
    if (model := attrs.get("ai.response.model") or attrs.get("ai.model.id")) is not None:
        draft.setdefault("model", str(model))
    if (provider := attrs.get("ai.model.provider")) is not None:
        draft.setdefault("provider", str(provider).split(".")[0])
    if op == "ai.toolCall":
        draft.setdefault("tool", str(attrs.get("ai.toolCall.name", name)))
        if (call_id := attrs.get("ai.toolCall.id")) is not None:
            draft.setdefault("tool_call_id", str(call_id))
        if (args := attrs.get("ai.toolCall.args")) is not None:
            draft.setdefault("args", args)
        if (result := attrs.get("ai.toolCall.result")) is not None:
            draft.setdefault("result", result)
    if op in LLM_OPERATIONS:
        text = attrs.get("ai.response.text")
        calls = attrs.get("ai.response.toolCalls")
        if text is not None or calls is not None:
            draft.setdefault("output", f"{text or ''}\n{calls or ''}".strip())
        if (finish := attrs.get("ai.response.finishReason")) is not None:
            draft.setdefault("finish_reasons", [finish])
        for key, field in (("ai.usage.promptTokens", "input_tokens"), ("ai.usage.inputTokens", "input_tokens"),
                           ("ai.usage.completionTokens", "output_tokens"),
                           ("ai.usage.outputTokens", "output_tokens"),
                           ("ai.usage.cachedInputTokens", "cache_read_tokens")):
            if (value := attrs.get(key)) is not None:
                draft.setdefault(field, value)
