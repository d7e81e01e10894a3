"""OpenInference (Arize Phoenix) span conventions: openinference.span.kind, llm.*, tool.*, input/output.value."""

from __future__ import annotations

import re
from typing import Any, Final

from ..model.steps import AGENT, LLM, OTHER, TOOL
from . import draft as field
from .draft import Draft

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
    draft.offer(field.KIND, kind)
    if (agent := attrs.get("agent.name")) is not None:
        draft.offer(field.AGENT_NAME, str(agent))
    elif kind is AGENT and attrs.get("openinference.span.kind") == "AGENT":
        draft.offer(field.AGENT_NAME, attrs.get("graph.node.name") or name)
    model = attrs.get("llm.response.model_name") or attrs.get("llm.model_name") or attrs.get("llm.request.model_name")
    if model is not None:
        draft.offer(field.MODEL, str(model))
    if (provider := attrs.get("llm.provider") or attrs.get("llm.system")) is not None:
        draft.offer(field.PROVIDER, str(provider))
    if kind is TOOL:
        if (tool := attrs.get("tool.name")) is not None:
            draft.offer(field.TOOL_NAME, str(tool))
        elif event is not None:  # tool.search.wikipedia.start -> search.wikipedia
            draft.offer(field.TOOL_NAME, event[0].removeprefix("tool."))
        else:
            draft.offer(field.TOOL_NAME, name)
        if (call_id := attrs.get("tool.id") or attrs.get("tool_call.id")) is not None:
            draft.offer(field.TOOL_CALL_ID, str(call_id))
        args = attrs.get("tool_call.function.arguments", attrs.get("input.value"))
        if args is None and event is not None:  # BeeAI puts the call's arguments in tool.parameters
            args = attrs.get("tool.parameters")
        if args is not None:
            draft.offer(field.ARGS, args)
        if (result := attrs.get("output.value")) is not None:
            draft.offer(field.RESULT, result)
    if kind is LLM:
        output = _output_messages(attrs) or attrs.get("output.value")
        if output is not None:
            draft.offer(field.OUTPUT, str(output))
        if (finish := attrs.get("llm.finish_reason")) is not None:
            draft.offer(field.FINISH_REASONS, [finish])
        elif output is not None and "llm.output_messages.0.message.tool_calls.0.tool_call.function.name" in attrs:
            draft.offer(field.FINISH_REASONS, ["tool_calls"])  # no finish reason given: the output asked for tools
    for key, slot in (("llm.token_count.prompt", field.INPUT_TOKENS),
                      ("llm.token_count.completion", field.OUTPUT_TOKENS),
                      ("llm.token_count.prompt_details.cache_read", field.CACHE_READ_TOKENS),
                      ("llm.token_count.prompt_details.cache_write", field.CACHE_WRITE_TOKENS)):
        if (value := attrs.get(key)) is not None:
            draft.offer(slot, value)
    if (session := attrs.get("session.id")) is not None:
        draft.offer(field.CONVERSATION_ID, str(session))
