"""OTLP attribute values to Python values, and the attributes the decoder adds from a span's status and events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

# Added to a span's attributes by the decoder (collector/receiver/decode.py), where the span has none of that name:
STATUS_DESCRIPTION: Final = "otel.status_description"  # Status.message, as the non-OTLP exporters name it
EXCEPTION_EVENT: Final = "exception"  # the span event an exception is recorded as (OpenTelemetry exception conventions)
EXCEPTION_TYPE: Final = "exception.type"  # these three from the span's last exception event
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_ESCAPED: Final = "exception.escaped"
EXCEPTION_KEYS: Final = (EXCEPTION_TYPE, EXCEPTION_MESSAGE, EXCEPTION_ESCAPED)


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
