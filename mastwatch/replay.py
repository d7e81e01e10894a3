"""Offline classification of captured OTLP traffic.

Reads what the OpenTelemetry Collector's `file` exporter writes: OTLP/JSON lines (one
ExportTraceServiceRequest per line), or protobuf (4-byte big-endian length before each message, or a
single bare message). Every trace is classified when the input ends.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterator
from typing import BinaryIO, TextIO

from mastwatch.collector.assemble import END_OF_INPUT
from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.processor import Increment, Processor
from mastwatch.collector.receiver.decode import SpanRecord, decode, records
from mastwatch.collector.receiver.otlp_json import parse_request


class ReplayError(ValueError):
    pass


def _framed(f: BinaryIO, size: int) -> bool:
    """Whether the file is a sequence of 4-byte big-endian lengths each followed by that many bytes."""
    position = 0
    while position < size:
        f.seek(position)
        header = f.read(4)
        if len(header) < 4:
            return False
        position += 4 + struct.unpack(">I", header)[0]
    f.seek(0)
    return position == size


def _frames(f: BinaryIO) -> Iterator[bytes]:
    while header := f.read(4):
        yield f.read(struct.unpack(">I", header)[0])


def read_requests(path: str) -> Iterator[list[SpanRecord]]:
    """The spans of each request in a file, read as it goes (spans with invalid ids are left out, as the
    receiver does)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        first = f.read(64).lstrip()[:1]
        f.seek(0)
        if first == b"{":
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield records(parse_request(line)).spans
                    except ValueError as e:
                        raise ReplayError(f"{path}:{number}: {e}") from None
            return
        if _framed(f, size):
            chunks: Iterator[bytes] = _frames(f)
        else:
            chunks = iter([f.read()])
        for chunk in chunks:
            try:
                yield decode(chunk).spans
            except ValueError as e:
                head = chunk.split(b"\n", 1)[0].rstrip(b"\r")
                if head and all(32 <= b < 127 or b == 9 for b in head):  # a line of text: meant as JSON
                    try:
                        parse_request(head)
                    except ValueError as not_json:
                        raise ReplayError(f"{path}:1: not OTLP/JSON ({not_json}), nor OTLP protobuf") from None
                raise ReplayError(f"{path}: not OTLP/JSON lines nor OTLP protobuf ({e})") from None


class JsonLinesExporter:
    """Writes each verdict as one JSON line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def export_increments(self, increments: list[Increment]) -> None:
        pass

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        self.out.writelines(verdict.to_json() + "\n" for verdict in verdicts)

    def shutdown(self) -> None:
        self.out.flush()


def replay(paths: list[str], exporters: list, config: ProcessorConfig | None = None) -> int:
    """Classify every trace in the files; returns the number of spans read."""
    processor = Processor(config or ProcessorConfig(), exporters)
    spans = 0
    try:
        for path in paths:
            before = spans
            for records_ in read_requests(path):
                spans += len(records_)
                processor.process(records_, now=0.0)
            if spans == before:
                raise ReplayError(f"{path}: no spans in it (empty, or not OTLP/JSON lines nor an OTLP protobuf "
                                  "ExportTraceServiceRequest)")
    finally:  # what was read before a bad file or line is classified and written all the same
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
