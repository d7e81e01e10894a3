"""OTLP attribute values to Python values, and content fingerprints."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

PREVIEW_CHARS = 160  # what of a piece of content is kept for evidence; the rest is only hashed


def any_value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "string_value":
        return v.string_value
    if which == "int_value":
        return v.int_value
    if which == "double_value":
        return v.double_value
    if which == "bool_value":
        return v.bool_value
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return None


def attributes(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


def as_json(value: Any) -> Any:
    """Parse a JSON string into its value; anything else (or invalid JSON) is returned as is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        inner = as_json(value.strip())
        return _canonical(inner) if inner is not value.strip() and not isinstance(inner, str) else " ".join(
            value.split())
    return value


def canonical_json(value: Any) -> str:
    """Equivalent arguments give the same text: keys sorted, whitespace and JSON-in-strings normalised."""
    return json.dumps(_canonical(as_json(value)), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
