"""OpenTelemetry GenAI semantic conventions: v1.41 names, the newer development names, and the
deprecated names older instrumentations still emit (gen_ai.system, usage.prompt_tokens, ...)."""

from __future__ import annotations

import json
from typing import Any, Final

from ..model.content import TEXT_CHARS, as_json
from ..model.steps import AGENT, LLM, OTHER, TOOL, StepKind
from . import draft as field
from .draft import Draft
from .instructions import read_instructions

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
INPUT_TOKEN_KEYS: Final = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
OUTPUT_TOKEN_KEYS: Final = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
CACHE_READ_KEYS: Final = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
CACHE_WRITE_KEYS: Final = ("gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.cache_creation.input_tokens",
                           "gen_ai.usage.cache_write_input_tokens")
_TOKENS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = (
    (field.INPUT_TOKENS, INPUT_TOKEN_KEYS), (field.OUTPUT_TOKENS, OUTPUT_TOKEN_KEYS))
_CACHE_TOKENS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = (
    (field.CACHE_READ_TOKENS, CACHE_READ_KEYS), (field.CACHE_WRITE_TOKENS, CACHE_WRITE_KEYS))
# The keys `read` looks up (and the C reader, see `SPEC`).
OPERATION_KEY: Final = "gen_ai.operation.name"
REQUEST_MODEL_KEY: Final = "gen_ai.request.model"
RESPONSE_MODEL_KEY: Final = "gen_ai.response.model"
AGENT_NAME_KEY: Final = "gen_ai.agent.name"
PROVIDER_KEY: Final = "gen_ai.provider.name"
SYSTEM_KEY: Final = "gen_ai.system"
TOOL_NAME_KEY: Final = "gen_ai.tool.name"
TOOL_CALL_ID_KEY: Final = "gen_ai.tool.call.id"
FINISH_KEY: Final = "gen_ai.response.finish_reasons"
ERROR_TYPE_KEY: Final = "error.type"
CONVERSATION_KEY: Final = "gen_ai.conversation.id"
INPUT_MESSAGES_KEY: Final = "gen_ai.input.messages"
INSTRUCTIONS_KEY: Final = "gen_ai.system_instructions"
TOOL_PREFIX: Final = "execute_tool "  # of a tool span's name: `execute_tool {name}`
_OUTPUT: Final = "gen_ai.output"  # any-agent: a tool's result, or a model's output text
_LEGACY_COMPLETION: Final = ("gen_ai.completion.0.content", "gen_ai.completion.0.tool_calls.0.name")
_LEGACY_FINISH: Final = "gen_ai.completion.0.finish_reason"

# Keys most spans lack, in groups, each group a bit: `read` looks them up only when normalize.span's pass over the
# span's keys found one of its group (`Draft.present`). A lookup that misses costs as much as one that finds.
RESPONSE_MODEL: Final = 1
RESULT: Final = 2
IO: Final = 4  # OpenInference's input/output names and any-agent's gen_ai.output, next to the GenAI names
OUTPUT_MESSAGES: Final = 8
LEGACY_COMPLETION: Final = 16
CACHE_TOKENS: Final = 32
FINISH: Final = 64
ERROR: Final = 128
CONVERSATION: Final = 256
AGENT_NAME: Final = 512
REQUEST_MODEL: Final = 1024  # absent from tool and agent spans
ARGUMENTS: Final = 2048
INPUT_MESSAGES: Final = 4096
INSTRUCTIONS: Final = 8192
OPTIONAL: Final[dict[str, int]] = {
    RESPONSE_MODEL_KEY: RESPONSE_MODEL, AGENT_NAME_KEY: AGENT_NAME, REQUEST_MODEL_KEY: REQUEST_MODEL,
    **dict.fromkeys(TOOL_ARGUMENTS, ARGUMENTS), **dict.fromkeys(TOOL_RESULTS, RESULT),
    **dict.fromkeys(("input.value", "output.value", _OUTPUT), IO), "gen_ai.output.messages": OUTPUT_MESSAGES,
    **dict.fromkeys(_LEGACY_COMPLETION, LEGACY_COMPLETION),
    **dict.fromkeys((k for _, keys in _CACHE_TOKENS for k in keys), CACHE_TOKENS),
    **dict.fromkeys((FINISH_KEY, _LEGACY_FINISH), FINISH), ERROR_TYPE_KEY: ERROR,
    CONVERSATION_KEY: CONVERSATION, INPUT_MESSAGES_KEY: INPUT_MESSAGES, INSTRUCTIONS_KEY: INSTRUCTIONS}

MARKERS: Final = frozenset({OPERATION_KEY, SYSTEM_KEY, PROVIDER_KEY, TOOL_NAME_KEY,
                            INPUT_TOKEN_KEYS[0]})  # a span with any of these is read by this module


_KINDS: Final = {**dict.fromkeys(LLM_OPERATIONS, LLM), **dict.fromkeys(TOOL_OPERATIONS, TOOL),
                 **dict.fromkeys(AGENT_OPERATIONS, AGENT)}


# What the C reader (normalize/_genai.c) needs to fill the Draft's slots as `read` does, for the spans only this module
# reads and that have none of the OPTIONAL keys whose values `read` parses (bits_out_of_scope).
SPEC: Final[dict[str, object]] = {
    "operation": OPERATION_KEY, "request_model": REQUEST_MODEL_KEY, "response_model": RESPONSE_MODEL_KEY,
    "agent_name": AGENT_NAME_KEY, "provider": PROVIDER_KEY, "system": SYSTEM_KEY, "tool_name": TOOL_NAME_KEY,
    "tool_call_id": TOOL_CALL_ID_KEY, "finish_reasons": FINISH_KEY, "legacy_finish_reason": _LEGACY_FINISH,
    "error_type": ERROR_TYPE_KEY, "conversation_id": CONVERSATION_KEY, "tool_arguments": TOOL_ARGUMENTS,
    "input_tokens": INPUT_TOKEN_KEYS, "output_tokens": OUTPUT_TOKEN_KEYS, "cache_read_tokens": CACHE_READ_KEYS,
    "cache_write_tokens": CACHE_WRITE_KEYS, "kinds": _KINDS, "agent_operations": AGENT_OPERATIONS,
    "tool_operations": TOOL_OPERATIONS, "llm": LLM, "tool": TOOL, "agent": AGENT, "other": OTHER,
    "tool_prefix": TOOL_PREFIX, "fields": field.FIELDS, "slot_kind": field.KIND, "slot_agent": field.AGENT_NAME,
    "slot_model": field.MODEL, "slot_provider": field.PROVIDER, "slot_tool": field.TOOL_NAME,
    "slot_tool_call_id": field.TOOL_CALL_ID, "slot_conversation_id": field.CONVERSATION_ID, "slot_args": field.ARGS,
    "slot_input_tokens": field.INPUT_TOKENS, "slot_output_tokens": field.OUTPUT_TOKENS,
    "slot_cache_read_tokens": field.CACHE_READ_TOKENS, "slot_cache_write_tokens": field.CACHE_WRITE_TOKENS,
    "slot_finish_reasons": field.FINISH_REASONS, "slot_error_type": field.ERROR_TYPE,
    "bit_response_model": RESPONSE_MODEL, "bit_agent_name": AGENT_NAME, "bit_request_model": REQUEST_MODEL,
    "bit_arguments": ARGUMENTS, "bit_cache_tokens": CACHE_TOKENS, "bit_finish": FINISH, "bit_error": ERROR,
    "bit_conversation": CONVERSATION,
    "bits_out_of_scope": RESULT | IO | OUTPUT_MESSAGES | LEGACY_COMPLETION | INPUT_MESSAGES | INSTRUCTIONS}


def _kind(op: str | None, attrs: dict[str, Any]) -> StepKind | None:
    if op is not None:
        return _KINDS.get(op, OTHER)
    if REQUEST_MODEL_KEY in attrs:
        return LLM
    return TOOL if TOOL_NAME_KEY in attrs else None


def _output(messages: Any, draft: Draft) -> str | None:
    """Model output as one comparable text (text parts and tool calls, in order, returned), and apart its text
    and the number of tool calls it asks for (offered)."""
    messages = as_json(messages)
    if not isinstance(messages, list):
        if isinstance(messages, str):
            draft.offer(field.SAID, messages[:TEXT_CHARS])
            return messages
        return None
    pieces: list[str] = []
    said: list[str] = []
    calls = 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        for part in message.get("parts") or ():
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                text = str(part.get("content", ""))
                pieces.append(text)
                said.append(text)
            elif part.get("type") == "tool_call":
                arguments = part.get("arguments")
                if not isinstance(arguments, str):  # shown as the instrumentation wrote it: JSON
                    arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str)
                pieces.append(f"tool_call {part.get('name')} {arguments}")
                calls += 1
        if "content" in message and "parts" not in message:  # older flat form
            pieces.append(str(message["content"]))
            said.append(str(message["content"]))
        calls += len(message.get("tool_calls") or ())
    if said:
        draft.offer(field.SAID, "\n".join(said)[:TEXT_CHARS])
    draft.offer(field.TOOL_CALLS, calls)
    return "\n".join(pieces) if pieces else None


def _user_turn(messages: Any) -> str | None:
    """The user's text after the last assistant message of a model call's input (the turn it answers), or None.
    Only the history's tail is read: a long history is cut at its last assistant message before parsing."""
    if isinstance(messages, str) and len(messages) > TEXT_CHARS:
        cut = messages.rfind('"assistant"')
        start = messages.rfind("{", 0, cut) if cut > 0 else -1
        if start > 0:
            tail = as_json("[" + messages[start:])
            if isinstance(tail, list):
                messages = tail
    messages = as_json(messages)
    if not isinstance(messages, list):
        return None
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            texts.clear()
        elif role == "user":
            parts = message.get("parts")
            if parts is None:  # the older flat form: a string, or OpenAI-style content parts
                content = message.get("content")
                parts = [{"type": "text", "content": content}] if isinstance(content, str) else content
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, dict) and part.get("type") in ("text", "input_text"):
                    texts.append(str(part.get("content", part.get("text", ""))))
    return "\n".join(texts)[:TEXT_CHARS] if texts else None


def _legacy_completion(attrs: dict[str, Any]) -> str | None:
    """OpenLLMetry's indexed gen_ai.completion.N.* attributes (removed from the conventions, still emitted)."""
    pieces = [str(attrs[k]) for k in sorted(attrs) if k.startswith("gen_ai.completion.") and
              (k.endswith(".content") or (".tool_calls." in k and (k.endswith(".name") or k.endswith(".arguments"))))]
    return "\n".join(pieces) if pieces else None


def _tokens(attrs: dict[str, Any], draft: Draft, counts: tuple[tuple[int, tuple[str, ...]], ...]) -> None:
    for slot, keys in counts:
        for key in keys:
            if (value := attrs.get(key)) is not None:
                draft.offer(slot, value)
                break


def read(attrs: dict[str, Any], name: str, draft: Draft) -> None:
    present = draft.present
    op = attrs.get(OPERATION_KEY)
    if type(op) is not str:  # an array or kvlist where a string belongs: as if absent
        op = None
    kind = _kind(op, attrs)
    if kind is not None:
        draft.offer(field.KIND, kind)
    if present & AGENT_NAME and (agent := attrs.get(AGENT_NAME_KEY)) is not None:
        draft.offer(field.AGENT_NAME, str(agent))
    elif op in AGENT_OPERATIONS and name.startswith(op + " "):
        draft.offer(field.AGENT_NAME, name[len(op) + 1:])
    model = attrs.get(RESPONSE_MODEL_KEY) if present & RESPONSE_MODEL else None
    if (model := model or (attrs.get(REQUEST_MODEL_KEY) if present & REQUEST_MODEL else None)) is not None:
        draft.offer(field.MODEL, str(model))
    if (provider := attrs.get(PROVIDER_KEY) or attrs.get(SYSTEM_KEY)) is not None:
        draft.offer(field.PROVIDER, str(provider))
    if kind is not LLM and kind is not AGENT:  # a tool call, or not known yet
        if (tool := attrs.get(TOOL_NAME_KEY)) is not None:
            draft.offer(field.TOOL_NAME, str(tool))
        elif op in TOOL_OPERATIONS:  # the span name is `execute_tool {name}`, or just the tool's name (langsmith)
            draft.offer(field.TOOL_NAME, name.removeprefix(TOOL_PREFIX) or name)
        if (call_id := attrs.get(TOOL_CALL_ID_KEY)) is not None:
            draft.offer(field.TOOL_CALL_ID, str(call_id))
        if present & ARGUMENTS:
            for key in TOOL_ARGUMENTS:
                if (args := attrs.get(key)) is not None:
                    draft.offer(field.ARGS, args)
                    break
        if present & RESULT:
            for key in TOOL_RESULTS:
                if (result := attrs.get(key)) is not None:
                    draft.offer(field.RESULT, result)
                    break
        # koog: OpenInference I/O names only; gen_ai.output: any-agent
        if present & IO and kind is TOOL and "openinference.span.kind" not in attrs:
            if (args := attrs.get("input.value")) is not None:
                draft.offer(field.ARGS, args)
            if (result := attrs.get("output.value", attrs.get(_OUTPUT))) is not None:
                draft.offer(field.RESULT, result)
    if kind is not TOOL and kind is not AGENT:  # a model call, or not known yet
        output = None
        if present & OUTPUT_MESSAGES and (messages := attrs.get("gen_ai.output.messages")) is not None:
            output = _output(messages, draft)
        if present & INPUT_MESSAGES and (messages := attrs.get(INPUT_MESSAGES_KEY)) is not None:
            draft.offer(field.USER_TEXT, _user_turn(messages))
        if output is None and present & LEGACY_COMPLETION:
            output = _legacy_completion(attrs)
        if output is None and present & IO and kind is LLM and isinstance(attrs.get(_OUTPUT), str):  # any-agent
            output = attrs.get(_OUTPUT)
        if output is not None:
            draft.offer(field.OUTPUT, output)
        _tokens(attrs, draft, _TOKENS)
        if present & CACHE_TOKENS:
            _tokens(attrs, draft, _CACHE_TOKENS)
    if present & INSTRUCTIONS and kind is not TOOL and (instructions := attrs.get(INSTRUCTIONS_KEY)) is not None:
        rules, text = read_instructions(instructions)
        draft.offer(field.RULES, rules)
        draft.offer(field.INSTRUCTIONS, text or None)
    if present & FINISH:
        finish = attrs.get(FINISH_KEY)
        if type(finish) is str:  # a JSON string where arrays are flattened
            finish = as_json(finish)
        if finish is None and _LEGACY_FINISH in attrs:  # OpenLLMetry's indexed completions
            finish = [attrs[_LEGACY_FINISH]]
        if finish is not None:
            draft.offer(field.FINISH_REASONS, finish)
    if present & ERROR and (error_type := attrs.get(ERROR_TYPE_KEY)) is not None:
        draft.offer(field.ERROR_TYPE, str(error_type))
    if present & CONVERSATION and (conversation := attrs.get(CONVERSATION_KEY)) is not None:
        draft.offer(field.CONVERSATION_ID, str(conversation))
