"""Langfuse SDK (v3+, OpenTelemetry based) span attributes: langfuse.observation.*.

The SDK and its integrations (LangChain / LangGraph callback handler, OpenAI wrapper, @observe) set
`langfuse.observation.type` (span, generation, embedding, agent, tool, chain, retriever, evaluator,
guardrail, event), the model, `usage_details` (JSON, where "input"/"output" exclude the
input_*/output_* breakdowns listed next to them) and input/output (captured by default).
LangChain tool runs reach older SDKs as plain spans; their output is the LangChain ToolMessage."""

from __future__ import annotations

from typing import Any, Final

from ..model.content import as_json
from ..model.steps import AGENT, LLM, OTHER, TOOL
from . import draft as field
from .draft import Draft

KINDS: Final = {"generation": LLM, "tool": TOOL, "agent": AGENT, "chain": AGENT}
_OBS: Final = "langfuse.observation."


MARKERS: Final = frozenset({_OBS + "type"})  # a span with any of these is read by this module


def _tool_message(output: Any) -> dict[str, Any] | None:
    """A LangChain ToolMessage, as the Python ({"type": "tool", ...}) or JS (lc constructor) handler dumps it."""
    if not isinstance(output, str) or ("tool_call_id" not in output and "ToolMessage" not in output):
        return None  # cheap test first: span outputs can be whole graph states
    message = as_json(output)
    if not isinstance(message, dict):
        return None
    if message.get("type") == "tool" and "tool_call_id" in message:
        return message
    ids = message.get("id")
    if message.get("lc") and isinstance(ids, list) and ids[-1:] == ["ToolMessage"]:
        kwargs = message.get("kwargs")
        return kwargs if isinstance(kwargs, dict) else {}
    return None


def _usage(details: Any) -> dict[int, int]:
    details = as_json(details)
    if not isinstance(details, dict):
        return {}
    counts = {str(k): v for k, v in details.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    if not counts:
        return {}

    def total(prefix: str) -> int:
        return int(sum(v for k, v in counts.items() if k == prefix or k.startswith(prefix + "_")))

    usage = {field.INPUT_TOKENS: total("input") + int(counts.get("cache_read_input_tokens", 0))
             + int(counts.get("cache_creation_input_tokens", 0)), field.OUTPUT_TOKENS: total("output")}
    usage[field.CACHE_READ_TOKENS] = int(counts.get("input_cache_read", 0) + counts.get("cache_read_input_tokens", 0))
    usage[field.CACHE_WRITE_TOKENS] = int(counts.get("input_cache_creation", 0) + counts.get("input_cache_write", 0)
                                      + counts.get("cache_creation_input_tokens", 0))
    return usage


def _message_text(output: Any) -> tuple[str | None, bool]:
    """Model output text, and whether the output asks for tool calls."""
    message = as_json(output)
    if isinstance(message, dict):
        extra = message.get("additional_kwargs")
        calls = message.get("tool_calls") or (extra.get("tool_calls") if isinstance(extra, dict) else None)
        content = message.get("content")
        return (content if isinstance(content, str) and content else None), bool(calls)
    return (output if isinstance(output, str) and output else None), False


def read(attrs: dict[str, Any], name: str, draft: Draft) -> None:
    obs_type = str(attrs.get(_OBS + "type", "")).lower()
    kind = KINDS.get(obs_type, OTHER)
    output = attrs.get(_OBS + "output")
    message = _tool_message(output) if kind is OTHER and obs_type == "span" else None
    if message is not None:
        kind = TOOL
    draft.offer(field.KIND, kind)
    if (model := attrs.get(_OBS + "model.name")) is not None:
        draft.offer(field.MODEL, str(model))
    if (provider := attrs.get(_OBS + "metadata.ls_provider")) is not None:
        draft.offer(field.PROVIDER, str(provider))
    if kind is TOOL:
        draft.offer(field.TOOL_NAME, str(message.get("name") or name) if message else name)
        if message and message.get("tool_call_id") is not None:
            draft.offer(field.TOOL_CALL_ID, str(message["tool_call_id"]))
        if (args := attrs.get(_OBS + "input")) is not None:
            draft.offer(field.ARGS, args)
        result = message.get("content") if message else output
        if result is not None:
            draft.offer(field.RESULT, result)
    elif kind is LLM:
        for slot, value in _usage(attrs.get(_OBS + "usage_details")).items():
            draft.offer(slot, value)
        text, calls_tools = _message_text(output)
        if text is not None:
            draft.offer(field.OUTPUT, text)
        if calls_tools:
            draft.offer(field.FINISH_REASONS, ["tool_calls"])
    elif kind is AGENT and obs_type == "agent":
        draft.offer(field.AGENT_NAME, name)
    if str(attrs.get(_OBS + "level", "")).upper() == "ERROR":
        draft.offer(field.ERROR_TYPE, "_OTHER")
