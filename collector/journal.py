"""The span journal: every request the receivers accept is appended here before it is acknowledged, and replayed
into assembly when the process starts again, so a trace acknowledged to its agent survives kill -9.

Records go to segment files (`segment_bytes` each) in `directory`: a 4-byte length, a 4-byte CRC-32 and a type byte
(protobuf or OTLP/JSON) before the request's bytes as received (decompressed). A segment is deleted once every trace
with spans in it was classified (their rows queued by the store), or, failing that, once it is older than the
longest a trace stays open (`max_age`, counted from the start for segments found there). Written to the operating
system, not synced to the disk: a killed process loses nothing, a machine that loses power may lose the last
writes. The journal holds the requests whole, captured content included, until their traces are classified."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from typing import BinaryIO

log = logging.getLogger(__name__)
PROTOBUF, JSON = 0, 1
_HEADER = struct.Struct("<IIB")
_SEGMENT = re.compile(r"^segment-(\d{12})\.log$")


def _write(file: BinaryIO, header: bytes, body: bytes) -> None:
    """The record to the operating system in one system call, the request not copied behind its header (a short
    write goes on where it stopped)."""
    parts = [memoryview(header), memoryview(body)]
    while parts:
        done = os.writev(file.fileno(), parts)
        while parts and done >= len(parts[0]):
            done -= len(parts.pop(0))
        if parts and done:
            parts[0] = parts[0][done:]


class _Segment:
    __slots__ = ("open_traces", "path", "size", "touched")

    def __init__(self, path: str, size: int, touched: float) -> None:
        self.path, self.size, self.touched = path, size, touched
        self.open_traces: set[bytes] = set()


class SpanJournal:
    def __init__(self, directory: str, max_age: float, segment_bytes: int = 64 << 20) -> None:
        self.directory, self.max_age, self.segment_bytes = directory, max_age, segment_bytes
        os.makedirs(directory, exist_ok=True)
        self._lock = threading.Lock()
        self._sealed: list[_Segment] = []
        now = time.monotonic()
        for name in sorted(os.listdir(directory)):
            if _SEGMENT.match(name):
                path = os.path.join(directory, name)
                self._sealed.append(_Segment(path, os.path.getsize(path), now))
        self._number = max((int(_SEGMENT.match(os.path.basename(s.path)).group(1))  # type: ignore[union-attr]
                            for s in self._sealed), default=0)
        self._current: _Segment | None = None
        self._file: BinaryIO | None = None
        self._closed: dict[bytes, None] = {}  # traces classified lately: their late spans hold no segment

    def recovered(self) -> Iterator[tuple[int, bytes, _Segment]]:
        """The records of the segments found at start, in order: (type, bytes, segment). A record cut short by a
        crash, or whose checksum fails, ends its segment."""
        for segment in list(self._sealed):
            with open(segment.path, "rb") as f:
                data = f.read()
            position = 0
            while position + _HEADER.size <= len(data):
                length, crc, kind = _HEADER.unpack_from(data, position)
                body = data[position + _HEADER.size:position + _HEADER.size + length]
                if len(body) < length or zlib.crc32(body) != crc:
                    log.warning("journal %s: a record cut short at byte %d (the process was killed while writing "
                                "it); the rest of the segment is skipped", segment.path, position)
                    break
                position += _HEADER.size + length
                yield kind, body, segment

    def holds(self, segment: _Segment, trace_ids: Iterable[bytes]) -> None:
        """A recovered record's traces: the segment is kept until they are classified."""
        with self._lock:
            segment.open_traces.update(t for t in trace_ids if t not in self._closed)

    def append(self, kind: int, body: bytes, trace_ids: Iterable[bytes]) -> None:
        header = _HEADER.pack(len(body), zlib.crc32(body), kind)
        size = len(header) + len(body)
        with self._lock:
            current, file = self._current, self._file
            if current is None or file is None or (current.size + size > self.segment_bytes and current.size):
                current, file = self._rotate()
            _write(file, header, body)
            current.size += size
            current.touched = time.monotonic()
            current.open_traces.update(t for t in trace_ids if t not in self._closed)

    def _rotate(self) -> tuple[_Segment, BinaryIO]:
        if self._file is not None:
            self._file.close()
        if self._current is not None:
            self._sealed.append(self._current)
        self._number += 1
        path = os.path.join(self.directory, f"segment-{self._number:012d}.log")
        file: BinaryIO = open(path, "ab", buffering=0)  # noqa: SIM115 (open until the next rotation)
        current = _Segment(path, 0, time.monotonic())
        self._file, self._current = file, current
        return current, file

    def classified(self, trace_ids: list[bytes]) -> None:
        """These traces' rows are queued: segments that held only them (and others classified) are deleted."""
        now = time.monotonic()
        with self._lock:
            closed = self._closed
            for t in trace_ids:
                closed[t] = None
            while len(closed) > 100_000:
                del closed[next(iter(closed))]
            for segment in [*self._sealed, *([self._current] if self._current else [])]:
                segment.open_traces.difference_update(trace_ids)
            kept = []
            for segment in self._sealed:
                if not segment.open_traces or now - segment.touched > self.max_age:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(segment.path)
                else:
                    kept.append(segment)
            self._sealed = kept

    def close(self) -> None:
        """Close the segment being written; after a drain that classified every trace, the journal is emptied."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            for segment in [*self._sealed, *([self._current] if self._current else [])]:
                if not segment.open_traces:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(segment.path)
