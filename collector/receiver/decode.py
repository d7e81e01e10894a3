"""OTLP trace requests to plain Python span records, ready for normalisation.

The receiver decodes each request once into `SpanRecord`s: ids, name, times, status, an attribute dict and
its key marks (what normalisation looks for among the keys, told as the keys are read), with spans whose ids are
invalid left out and counted. A C decoder (`_otlpdecode`, built with the
package) does this straight from the wire bytes; where it is not built, the same records come from the
protobuf runtime (slower: every attribute is a Python wrapper object). Both give identical results.

A span's failure, as the OpenTelemetry SDKs record it, is added to its attribute dict by both, each under a key
the span does not already have (an attribute the span sets itself wins):
- `otel.status_description`: Status.message, when not empty (the name the non-OTLP exporters and the OTel
  Collector's translators give it);
- `exception.type`, `exception.message`, `exception.escaped`: from the span's last event named `exception`
  (`span.record_exception`, the OpenTelemetry exception conventions), those of them it has.
Only string and boolean values are added, a string cut to its first `PREVIEW_CHARS` characters; a stack trace
never is, nor any other event attribute (the C decoder only checks those, as it checks unread attributes).

Span attributes no normaliser reads (`UNREAD_KEYS`, `UNREAD_PREFIXES`) are left out of the attribute dicts
by both: with content capture on they are most of a GenAI span's bytes (the whole prompt history on every
model call). The C decoder matches their keys on the wire bytes and only checks their values (as upb does:
framing, UTF-8, nesting), so nothing is made of them and the same requests are refused.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ..model.content import PREVIEW_CHARS
from ..model.spans import SpanRecord
from ..normalize.attributes import EXCEPTION_EVENT, EXCEPTION_KEYS, STATUS_DESCRIPTION, any_value
from ..normalize.span import KEY_MARKS, key_marks

UNKNOWN_SERVICE = "unknown_service"
# what a span record takes from its resource (the last value of each wins; the older environment key when the
# newer one is empty or missing)
RESOURCE_KEYS = frozenset({"service.name", "service.version", "deployment.environment.name", "deployment.environment"})

# Span attributes left out of SpanRecord.attributes: model inputs and definitions that collector/normalize
# never reads (tests/test_decode.py fails if a normaliser names one). Model outputs, tool arguments and
# results, input.value / output.value and langfuse.observation.* are read and must never be listed here.
UNREAD_KEYS: frozenset[str] = frozenset({
    # OpenTelemetry GenAI conventions (opt-in content; gen_ai.input.messages and gen_ai.system_instructions are read:
    # the user's last turn and the agent's rules)
    "gen_ai.tool.definitions",
    "gen_ai.prompt",  # deprecated, a JSON string
    # OpenInference
    "llm.invocation_parameters",
    "llm.tools",  # JSON form of llm.tools.<i>.*
    "llm.prompts",  # JSON form of llm.prompts.<i>.*
    # Vercel AI SDK
    "ai.prompt",
    "ai.embedding", "ai.embeddings",  # embed / embedMany vectors
    "ai.value", "ai.values",  # embed / embedMany inputs
    # pydantic-ai, Logfire
    "pydantic_ai.all_messages",
    "all_messages_events",
    "logfire.json_schema",
    "model_request_parameters",  # request settings and every tool's JSON schema
})
UNREAD_PREFIXES: tuple[str, ...] = (
    "gen_ai.prompt.",  # OpenLLMetry's deprecated indexed gen_ai.prompt.<i>.role / .content
    "llm.input_messages.",  # OpenInference, flattened: llm.input_messages.<i>.message.content ...
    "llm.tools.",  # llm.tools.<i>.tool.json_schema
    "llm.prompt_template.",  # .template / .variables / .version
    "llm.prompts.",  # llm.prompts.<i>.prompt.text
    "ai.prompt.",  # Vercel AI SDK: ai.prompt.messages, ai.prompt.tools, ai.prompt.toolChoice
)


def unread(key: str) -> bool:
    """Whether a span attribute is left out of SpanRecord.attributes."""
    return key in UNREAD_KEYS or key.startswith(UNREAD_PREFIXES)


class Decoded(NamedTuple):
    spans: list[SpanRecord]
    rejected: int  # spans left out: trace id not 16 bytes or all zero, span or parent id not 8 bytes


def _valid(trace_id: bytes, span_id: bytes, parent: bytes) -> bool:
    return len(trace_id) == 16 and len(span_id) == 8 and (not parent or len(parent) == 8) and any(trace_id)


def _promoted(value: Any) -> Any:
    """A value added from the status or an event: a string's start, a bool; None (not added) for the rest."""
    if type(value) is str:
        return value[:PREVIEW_CHARS]
    return value if type(value) is bool else None


def _promote(span: Span, attrs: dict[str, Any]) -> None:
    """Add the span's status message and last exception event to its attributes, none overriding the span's."""
    exception = None
    for event in span.events:
        if event.name == EXCEPTION_EVENT:
            exception = event
    if exception is not None:
        values = {kv.key: kv.value for kv in exception.attributes if kv.key in EXCEPTION_KEYS}  # the last wins
        for key in EXCEPTION_KEYS:
            if key in values and (value := _promoted(any_value(values[key]))) is not None:
                attrs.setdefault(key, value)
    if message := span.status.message:
        attrs.setdefault(STATUS_DESCRIPTION, message[:PREVIEW_CHARS])


def records(request: ExportTraceServiceRequest) -> Decoded:
    """Records of a parsed request (the protobuf runtime's path)."""
    spans: list[SpanRecord] = []
    rejected = 0
    for resource_spans in request.resource_spans:
        found: dict[str, str] = {}
        for kv in resource_spans.resource.attributes:
            if kv.key in RESOURCE_KEYS:
                found[kv.key] = str(any_value(kv.value))
        service = found.get("service.name", UNKNOWN_SERVICE)
        version = found.get("service.version", "")
        environment = found.get("deployment.environment.name") or found.get("deployment.environment", "")
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                trace_id, span_id, parent = s.trace_id, s.span_id, s.parent_span_id
                if not _valid(trace_id, span_id, parent):
                    rejected += 1
                    continue
                attrs = {key: any_value(kv.value) for kv in s.attributes
                         if (key := kv.key) not in UNREAD_KEYS and not key.startswith(UNREAD_PREFIXES)}  # not unread
                _promote(s, attrs)
                spans.append(SpanRecord(service, trace_id, span_id, parent, s.name, s.start_time_unix_nano,
                                        s.end_time_unix_nano, s.status.code, attrs, key_marks(attrs), version,
                                        environment))
    return Decoded(spans, rejected)


def _parsed(data: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except DecodeError as e:
        raise ValueError(str(e)) from None
    return request


def decode_python(data: bytes) -> Decoded:
    return records(_parsed(data))


def count_spans_python(data: bytes) -> int:
    return sum(len(scope_spans.spans) for resource_spans in _parsed(data).resource_spans
               for scope_spans in resource_spans.scope_spans)


DECODER_VARIABLE = "MASTWATCH_DECODER"  # `protobuf`: decode with the protobuf runtime even where the C decoder is built

try:
    if os.environ.get(DECODER_VARIABLE, "").strip().lower() == "protobuf":
        raise ImportError(f"{DECODER_VARIABLE}=protobuf")
    from ._otlpdecode import configure as _configure_c
    from ._otlpdecode import count_spans as _count_c
    from ._otlpdecode import decode_request as _decode_c
except ImportError:  # not built, or not wanted: the protobuf runtime's path
    _decode_c = _count_c = None
else:
    _configure_c(UNREAD_KEYS, UNREAD_PREFIXES, PREVIEW_CHARS, KEY_MARKS)  # once: matched and marked on the wire


def count_spans(data: bytes) -> int:
    """The spans of a serialized ExportTraceServiceRequest, valid or not, without decoding them (the C decoder
    reads only the framing around them: a small share of decoding's cost, which benchmarks/processor.py prints);
    ValueError when that is broken. Every request it refuses, `decode` refuses too."""
    return count_spans_python(data) if _count_c is None else _count_c(data)


def decode(data: bytes) -> Decoded:
    """Decode a serialized ExportTraceServiceRequest; ValueError when it is malformed."""
    if _decode_c is None:
        return decode_python(data)
    spans, rejected = _decode_c(data, SpanRecord)
    return Decoded(spans, rejected)
