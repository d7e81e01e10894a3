"""OpenInference (Arize Phoenix) span conventions: openinference.span.kind, llm.*, tool.*, input/output.value."""

from __future__ import annotations

import re
from typing import Any, Final

from ..steps import AGENT, LLM, OTHER, TOOL
from .draft import (
    AGENT_NAME,
    ARGS,
    CACHE_READ_TOKENS,
    CACHE_WRITE_TOKENS,
    CONVERSATION_ID,
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

KINDS: Final = {"LLM": LLM, "TOOL": TOOL, "AGENT": AGENT, "CHAIN": AGENT}


MARKERS: Final = frozenset({"openinference.span.kind"})  # a span with any of these is read by this module


def _output_messages(attrs: dict[str, Any]) -> str | None:
    pieces = [str(attrs[k]) for k in sorted(attrs) if k.startswith("llm.output_messages.") and (
        k.endswith(".message.content") or k.endswith(".message_content.text")
        or k.endswith(".tool_call.function.name") or k.endswith(".tool_call.function.arguments"))]
    return "\n".join(pieces) if pieces else None


_BEEAI_SPAN: Final = re.compile(r"^((?:backend|tool|agent)\.[\w.]+)\.([a-z_]+)-\d+$")


def _beeai_event(attrs: dict[str, Any], name: str) -> tuple[str, str] | None:
    """BeeAI emits one span per event of a call, named `{target}-{n}` (backend.openai.chat.start / .finish /
    .success, tool.search.wikipedia.start ...): (emitter, event), or None for other spans. The name is
    read too: a span with many attributes can lose `target` to the attribute count limit."""
    target = attrs.get("target")
    if isinstance(target, str) and "traceId" in attrs and "." in target:
        emitter, _, event = target.rpartition(".")
        return emitter, event
    match = _BEEAI_SPAN.match(name)
    return (match.group(1), match.group(2)) if match else None


def read(attrs: dict[str, Any], name: str, draft: Draft) -> None:
    kind = KINDS.get(str(attrs.get("openinference.span.kind", "")).upper(), OTHER)
    event = _beeai_event(attrs, name)
    if event is not None and (kind is AGENT or event[1] != "start"):
        kind = OTHER  # a call is its start event; agent.react.* events are iterations, not invocations
    draft.offer(KIND, kind)
    if (agent := attrs.get("agent.name")) is not None:
        draft.offer(AGENT_NAME, str(agent))
    elif kind is AGENT and attrs.get("openinference.span.kind") == "AGENT":
        draft.offer(AGENT_NAME, attrs.get("graph.node.name") or name)
    model = attrs.get("llm.response.model_name") or attrs.get("llm.model_name") or attrs.get("llm.request.model_name")
    if model is not None:
        draft.offer(MODEL, str(model))
    if (provider := attrs.get("llm.provider") or attrs.get("llm.system")) is not None:
        draft.offer(PROVIDER, str(provider))
    if kind is TOOL:
        if (tool := attrs.get("tool.name")) is not None:
            draft.offer(TOOL_NAME, str(tool))
        elif event is not None:  # tool.search.wikipedia.start -> search.wikipedia
            draft.offer(TOOL_NAME, event[0].removeprefix("tool."))
        else:
            draft.offer(TOOL_NAME, name)
        if (call_id := attrs.get("tool.id") or attrs.get("tool_call.id")) is not None:
            draft.offer(TOOL_CALL_ID, str(call_id))
        args = attrs.get("tool_call.function.arguments", attrs.get("input.value"))
        if args is None and event is not None:  # BeeAI puts the call's arguments in tool.parameters
            args = attrs.get("tool.parameters")
        if args is not None:
            draft.offer(ARGS, args)
        if (result := attrs.get("output.value")) is not None:
            draft.offer(RESULT, result)
    if kind is LLM:
        output = _output_messages(attrs) or attrs.get("output.value")
        if output is not None:
            draft.offer(OUTPUT, str(output))
        if (finish := attrs.get("llm.finish_reason")) is not None:
            draft.offer(FINISH_REASONS, [finish])
        elif output is not None and "llm.output_messages.0.message.tool_calls.0.tool_call.function.name" in attrs:
            draft.offer(FINISH_REASONS, ["tool_calls"])  # no finish reason given: the output asked for tools
    for key, field in (("llm.token_count.prompt", INPUT_TOKENS), ("llm.token_count.completion", OUTPUT_TOKENS),
                       ("llm.token_count.prompt_details.cache_read", CACHE_READ_TOKENS),
                       ("llm.token_count.prompt_details.cache_write", CACHE_WRITE_TOKENS)):
        if (value := attrs.get(key)) is not None:
            draft.offer(field, value)
    if (session := attrs.get("session.id")) is not None:
        draft.offer(CONVERSATION_ID, str(session))
