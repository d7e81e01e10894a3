"""The C reader of GenAI spans (`_genai.c`) in Python, for a build without a C compiler: which spans it takes is
decided as there, and their slots are genai.read's, the reference the C reader follows, rather than a second
reading of them (tests/test_normalize.py compares the two where the C extension is built). `configure` checks a
spec as the C reader does and keeps what decides which spans are taken; the slots are those genai.SPEC describes."""

from __future__ import annotations

from typing import Any

from . import genai
from .draft import Draft

_C_LONG: range = range(-(2**63), 2**63)  # the ints the C reader takes (a C long)
# What `configure` took from the spec: the keys and bits that decide whether a span is taken.
_operation = _finish = _legacy_finish = ""
_bit_finish = _bits_out_of_scope = 0
_configured = False

# The spec's entries and their types, as configure checks them (None: any type).
_ITEMS: tuple[tuple[str, type | None], ...] = (
    *((name, str) for name in ("operation", "request_model", "response_model", "agent_name", "provider", "system",
                               "tool_name", "tool_call_id", "finish_reasons", "legacy_finish_reason", "error_type",
                               "conversation_id")),
    *((name, tuple) for name in ("tool_arguments", "input_tokens", "output_tokens", "cache_read_tokens",
                                 "cache_write_tokens")),
    ("kinds", dict), ("agent_operations", frozenset), ("tool_operations", frozenset), ("llm", None), ("tool", None),
    ("agent", None), ("other", None), ("tool_prefix", str))
_SLOTS: tuple[str, ...] = ("slot_kind", "slot_agent", "slot_model", "slot_provider", "slot_tool", "slot_tool_call_id",
                           "slot_conversation_id", "slot_args", "slot_input_tokens", "slot_output_tokens",
                           "slot_cache_read_tokens", "slot_cache_write_tokens", "slot_finish_reasons",
                           "slot_error_type")
_BITS: tuple[str, ...] = ("bit_response_model", "bit_agent_name", "bit_request_model", "bit_arguments",
                          "bit_cache_tokens", "bit_finish", "bit_error", "bit_conversation", "bits_out_of_scope")


def _item(spec: dict[str, object], name: str, kind: type | None) -> Any:
    if name not in spec:
        raise KeyError(f"genai spec has no {name}")
    value = spec[name]
    if kind is not None and not isinstance(value, kind):
        raise TypeError(f"genai spec: {name} must be {kind.__name__}")
    return value


def _int(spec: dict[str, object], name: str) -> int:
    value: int = _item(spec, name, int)
    if value not in _C_LONG:
        raise OverflowError("Python int too large to convert to C long")
    return value


def configure(spec: dict[str, object], /) -> None:
    """The keys, operation names, kinds, Draft slots and OPTIONAL bits of genai.SPEC."""
    global _configured, _operation, _finish, _legacy_finish, _bit_finish, _bits_out_of_scope
    if not isinstance(spec, dict):
        raise TypeError("configure() takes a dict")
    _configured = False
    for name, kind in _ITEMS:
        _item(spec, name, kind)
    fields = _int(spec, "fields")
    if not 0 < fields <= 64:
        raise ValueError("genai spec: fields out of range")
    for name in _SLOTS:
        if not 0 <= _int(spec, name) < fields:
            raise ValueError(f"genai spec: slot {name} out of range")
    for name in _BITS:
        _int(spec, name)
    _operation, _finish = _item(spec, "operation", str), _item(spec, "finish_reasons", str)
    _legacy_finish = _item(spec, "legacy_finish_reason", str)
    _bit_finish, _bits_out_of_scope = _int(spec, "bit_finish"), _int(spec, "bits_out_of_scope")
    _configured = True


def values(attrs: dict[str, Any], name: str, present: int, /) -> list[Any] | None:
    """The Draft's slots as genai.read fills them, for a span only the GenAI conventions read (`present`: its bits
    of genai.OPTIONAL); None when the span needs genai.read itself."""
    if not (isinstance(attrs, dict) and isinstance(name, str) and isinstance(present, int)):
        raise TypeError("values() takes a dict, a str and an int")
    if not _configured:
        raise RuntimeError("_genai is not configured")
    if present not in _C_LONG:
        raise OverflowError("Python int too large to convert to C long")
    if present & _bits_out_of_scope:
        return None
    op = attrs.get(_operation)
    if op is not None and type(op) is not str:
        return None  # an odd operation name: genai.read knows what to make of it
    if present & _bit_finish:
        finish = attrs.get(_finish)
        if type(finish) is str:
            return None  # a JSON text to parse
        if finish is None and _legacy_finish in attrs:
            return None  # OpenLLMetry's indexed completions
    draft = Draft(present)
    genai.read(attrs, name, draft)
    return draft.values
