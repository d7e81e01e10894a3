"""OpenTelemetry GenAI semantic conventions: v1.41 names, the newer development names, and the
deprecated names older instrumentations still emit (gen_ai.system, usage.prompt_tokens, ...)."""

from __future__ import annotations

from typing import Any, Final

from ..content import as_json
from ..steps import AGENT, LLM, OTHER, TOOL, StepKind
from . import draft as field
from .draft import Draft

LLM_OPERATIONS: Final = frozenset({"chat", "generate_content", "text_completion", "completion",
                                   "call_llm"})  # call_llm: any-agent
AGENT_OPERATIONS: Final = frozenset({"invoke_agent", "invoke_workflow", "handle_conversation_turn", "plan"})
TOOL_OPERATIONS: Final = frozenset({"execute_tool"})
# Tool arguments and results: the conventions' names, then framework names seen next to gen_ai.tool.name.
TOOL_ARGUMENTS: Final[tuple[str, ...]] = ("gen_ai.tool.call.arguments", "tool_arguments",  # pydantic-ai
                                          "gen_ai.tool.args",  # any-agent
                                          "gcp.vertex.agent.tool_call_args")  # Google ADK
TOOL_RESULTS: Final[tuple[str, ...]] = ("gen_ai.tool.call.result", "tool_response", "gcp.vertex.agent.tool_response")


# Token counts: the v1.41 name first, then the development and deprecated names.
_TOKENS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = (
    (field.INPUT_TOKENS, ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")),
    (field.OUTPUT_TOKENS, ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")),
    (field.CACHE_READ_TOKENS, ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")),
    (field.CACHE_WRITE_TOKENS, ("gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.cache_creation.input_tokens",
                          "gen_ai.usage.cache_write_input_tokens")))

MARKERS: Final = frozenset({"gen_ai.operation.name", "gen_ai.system", "gen_ai.provider.name", "gen_ai.tool.name",
                            "gen_ai.usage.input_tokens"})  # a span with any of these is read by this module


_KINDS: Final = {**dict.fromkeys(LLM_OPERATIONS, LLM), **dict.fromkeys(TOOL_OPERATIONS, TOOL),
                 **dict.fromkeys(AGENT_OPERATIONS, AGENT)}


def _kind(op: str | None, attrs: dict[str, Any]) -> StepKind | None:
    if op is not None:
        return _KINDS.get(op, OTHER)
    if "gen_ai.request.model" in attrs:
        return LLM
    return TOOL if "gen_ai.tool.name" in attrs else None


def _output_text(messages: Any) -> str | None:
    """Model output as one comparable text: text parts and tool calls, in order."""
    messages = as_json(messages)
    if not isinstance(messages, list):
        return messages if isinstance(messages, str) else None
    pieces: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        for part in message.get("parts") or ():
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                pieces.append(str(part.get("content", "")))
            elif part.get("type") == "tool_call":
                pieces.append(f"tool_call {part.get('name')} {part.get('arguments')}")
        if "content" in message and "parts" not in message:  # older flat form
            pieces.append(str(message["content"]))
    return "\n".join(pieces) if pieces else None


def _legacy_completion(attrs: dict[str, Any]) -> str | None:
    """OpenLLMetry's indexed gen_ai.completion.N.* attributes (removed from the conventions, still emitted)."""
    if "gen_ai.completion.0.content" not in attrs and "gen_ai.completion.0.tool_calls.0.name" not in attrs:
        return None
    pieces = [str(attrs[k]) for k in sorted(attrs) if k.startswith("gen_ai.completion.") and
              (k.endswith(".content") or (".tool_calls." in k and (k.endswith(".name") or k.endswith(".arguments"))))]
    return "\n".join(pieces) if pieces else None


def read(attrs: dict[str, Any], name: str, draft: Draft) -> None:
    op = attrs.get("gen_ai.operation.name")
    kind = _kind(op, attrs)
    if kind is not None:
        draft.offer(field.KIND, kind)
    if (agent := attrs.get("gen_ai.agent.name")) is not None:
        draft.offer(field.AGENT_NAME, str(agent))
    elif op in AGENT_OPERATIONS and name.startswith(op + " "):
        draft.offer(field.AGENT_NAME, name[len(op) + 1:])
    if (model := attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")) is not None:
        draft.offer(field.MODEL, str(model))
    if (provider := attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system")) is not None:
        draft.offer(field.PROVIDER, str(provider))
    if kind is not LLM and kind is not AGENT:  # a tool call, or not known yet
        if (tool := attrs.get("gen_ai.tool.name")) is not None:
            draft.offer(field.TOOL_NAME, str(tool))
        elif op in TOOL_OPERATIONS:  # the span name is `execute_tool {name}`, or just the tool's name (langsmith)
            draft.offer(field.TOOL_NAME, name.removeprefix("execute_tool ") or name)
        if (call_id := attrs.get("gen_ai.tool.call.id")) is not None:
            draft.offer(field.TOOL_CALL_ID, str(call_id))
        for key in TOOL_ARGUMENTS:
            if (args := attrs.get(key)) is not None:
                draft.offer(field.ARGS, args)
                break
        for key in TOOL_RESULTS:
            if (result := attrs.get(key)) is not None:
                draft.offer(field.RESULT, result)
                break
        if kind is TOOL and "openinference.span.kind" not in attrs:  # koog: OpenInference I/O names only
            if (args := attrs.get("input.value")) is not None:
                draft.offer(field.ARGS, args)
            # gen_ai.output: any-agent
            if (result := attrs.get("output.value", attrs.get("gen_ai.output"))) is not None:
                draft.offer(field.RESULT, result)
    if kind is not TOOL and kind is not AGENT:  # a model call, or not known yet
        messages = attrs.get("gen_ai.output.messages")
        output = _output_text(messages) if messages is not None else None
        if output is None:
            output = _legacy_completion(attrs)
        if output is None and kind is LLM and isinstance(attrs.get("gen_ai.output"), str):  # any-agent
            output = attrs.get("gen_ai.output")
        if output is not None:
            draft.offer(field.OUTPUT, output)
        for slot, keys in _TOKENS:
            for key in keys:
                if (value := attrs.get(key)) is not None:
                    draft.offer(slot, value)
                    break
    finish = attrs.get("gen_ai.response.finish_reasons")
    if type(finish) is str:  # a JSON string where arrays are flattened
        finish = as_json(finish)
    if finish is None and "gen_ai.completion.0.finish_reason" in attrs:  # OpenLLMetry's indexed completions
        finish = [attrs["gen_ai.completion.0.finish_reason"]]
    if finish is not None:
        draft.offer(field.FINISH_REASONS, finish)
    if (error_type := attrs.get("error.type")) is not None:
        draft.offer(field.ERROR_TYPE, str(error_type))
    if (conversation := attrs.get("gen_ai.conversation.id")) is not None:
        draft.offer(field.CONVERSATION_ID, str(conversation))
