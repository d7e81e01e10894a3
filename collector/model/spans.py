"""A span as the receivers decode it and the processor takes it: what flows from the receivers into
normalisation. Imports nothing of the project."""

from __future__ import annotations

from typing import Any, NamedTuple


class SpanRecord(NamedTuple):
    service: str
    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    name: str
    start_ns: int
    end_ns: int
    status_code: int  # 0 unset, 1 ok, 2 error
    attributes: dict[str, Any]
    # the OR of the marks normalisation gives the attribute keys (normalize.span.KEY_MARKS): which conventions
    # read the span, which optional keys it has; -1 when not worked out (a record made by hand)
    key_marks: int = -1
    version: str = ""  # the resource's service.version
    environment: str = ""  # the resource's deployment.environment.name (or the older deployment.environment)
