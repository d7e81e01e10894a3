"""Offline classification of captured OTLP traffic.

Reads what the OpenTelemetry Collector's `file` exporter writes: OTLP/JSON lines (one
ExportTraceServiceRequest per line), or protobuf (4-byte big-endian length before each message, or a
single bare message). Every trace is classified when the input ends.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from typing import TextIO

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mastwatch.collector.assemble import END_OF_INPUT
from mastwatch.collector.processor import Increment, Processor, ProcessorConfig
from mastwatch.collector.receiver.otlp_json import parse_request
from mastwatch.collector.verdict import Verdict


class ReplayError(ValueError):
    pass


def _length_prefixed(data: bytes) -> list[bytes] | None:
    out, i = [], 0
    while i < len(data):
        if i + 4 > len(data):
            return None
        (n,) = struct.unpack_from(">I", data, i)
        i += 4
        if n > len(data) - i:
            return None
        out.append(data[i:i + n])
        i += n
    return out


def read_requests(path: str) -> Iterator[ExportTraceServiceRequest]:
    with open(path, "rb") as f:
        data = f.read()
    if data.lstrip()[:1] == b"{":
        for number, line in enumerate(data.splitlines(), 1):
            if line.strip():
                try:
                    yield parse_request(line)
                except ValueError as e:
                    raise ReplayError(f"{path}:{number}: {e}") from None
        return
    chunks = _length_prefixed(data) or [data]
    for chunk in chunks:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(chunk)
        except DecodeError as e:
            raise ReplayError(f"{path}: not OTLP/JSON lines nor OTLP protobuf ({e})") from None
        yield request


class JsonLinesExporter:
    """Writes each verdict as one JSON line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def export_increment(self, increment: Increment) -> None:
        pass

    def export_verdict(self, verdict: Verdict, increment: Increment) -> None:
        self.out.write(verdict.to_json() + "\n")

    def shutdown(self) -> None:
        self.out.flush()


class _NoTelemetry:
    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def replay(paths: list[str], exporters: list, config: ProcessorConfig | None = None) -> int:
    """Classify every trace in the files; returns the number of spans read."""
    processor = Processor(config or ProcessorConfig(), exporters, _NoTelemetry())
    spans = 0
    for path in paths:
        for request in read_requests(path):
            spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
            processor.process(request, now=0.0)
    processor.drain(END_OF_INPUT)
    for exporter in exporters:
        exporter.shutdown()
    return spans


def main_replay(paths: list[str], store, config: ProcessorConfig) -> int:
    exporters = [JsonLinesExporter(sys.stdout)] + ([store] if store is not None else [])
    try:
        spans = replay(paths, exporters, config)
    except (OSError, ReplayError) as e:
        print(f"mastwatch replay: {e}", file=sys.stderr)
        return 2
    print(f"mastwatch replay: {spans} spans classified", file=sys.stderr)
    return 0
