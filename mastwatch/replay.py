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

from mastwatch.collector.assemble import END_OF_INPUT
from mastwatch.collector.processor import Increment, Processor, ProcessorConfig
from mastwatch.collector.receiver.decode import SpanRecord, decode, records
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


def read_requests(path: str) -> Iterator[list[SpanRecord]]:
    """The spans of each request in a file (spans with invalid ids are left out, as the receiver does)."""
    with open(path, "rb") as f:
        data = f.read()
    if data.lstrip()[:1] == b"{":
        for number, line in enumerate(data.splitlines(), 1):
            if line.strip():
                try:
                    yield records(parse_request(line)).spans
                except ValueError as e:
                    raise ReplayError(f"{path}:{number}: {e}") from None
        return
    chunks = _length_prefixed(data) or [data]
    for chunk in chunks:
        try:
            yield decode(chunk).spans
        except ValueError as e:
            raise ReplayError(f"{path}: not OTLP/JSON lines nor OTLP protobuf ({e})") from None


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


def replay(paths: list[str], exporters: list, config: ProcessorConfig | None = None) -> int:
    """Classify every trace in the files; returns the number of spans read."""
    processor = Processor(config or ProcessorConfig(), exporters)
    spans = 0
    for path in paths:
        for records_ in read_requests(path):
            spans += len(records_)
            processor.process(records_, now=0.0)
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
