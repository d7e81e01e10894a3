"""OTLP/JSON: protobuf JSON mapping, except that trace and span ids are hex strings, not base64."""

from __future__ import annotations

import base64
import json
import string
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


def _ids(node: Any, convert) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = convert(value)
            else:
                _ids(value, convert)
    elif isinstance(node, list):
        for item in node:
            _ids(item, convert)


def _hex_to_b64(value: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError as e:
        if len(value) % 2 and all(c in string.hexdigits for c in value):
            raise ValueError(f"id {value[:40]!r} has an odd number of hex digits (a byte is two)") from e
        raise ValueError(f"id {value[:40]!r} is not hex") from e


def parse_request(data: bytes | str | dict) -> ExportTraceServiceRequest:
    """Parse an OTLP/JSON ExportTraceServiceRequest; raises ValueError with the reason."""
    try:
        doc = json.loads(data) if not isinstance(data, dict) else data
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"not JSON: {e}") from e
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(doc, dict):
        raise ValueError("an OTLP/JSON request is a JSON object")
    try:
        _ids(doc, _hex_to_b64)
        return json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except json_format.ParseError as e:
        raise ValueError(str(e)) from e
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except OverflowError as e:
        raise ValueError(f"a number out of range: {e}") from None


def to_json(message) -> str:
    """Any OTLP message as OTLP/JSON (hex ids, enums as integers), on one line."""
    doc = json_format.MessageToDict(message, use_integers_for_enums=True)
    _ids(doc, lambda v: base64.b64decode(v).hex())
    return json.dumps(doc, separators=(",", ":"))
