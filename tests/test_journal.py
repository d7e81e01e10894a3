"""The span journal's records read back whole, also when the operating system writes them in pieces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mastwatch.collector.journal import JSON, PROTOBUF, SpanJournal


def test_records_written_in_short_pieces_read_back_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writev = os.writev
    calls = []

    def short_writev(fd: int, buffers) -> int:  # as a write interrupted after a few bytes leaves it
        calls.append(1)
        first = bytes(buffers[0])[:7] if len(buffers[0]) else bytes(buffers[1])[:7]
        return writev(fd, [first])

    monkeypatch.setattr(os, "writev", short_writev)
    journal = SpanJournal(str(tmp_path), max_age=60.0)
    bodies = [(PROTOBUF, b"\x0a\x03abc" * 11), (JSON, b'{"resourceSpans": []}'), (PROTOBUF, b"")]
    for kind, body in bodies:
        journal.append(kind, body, [b"t" * 16])
    journal.close()
    monkeypatch.setattr(os, "writev", writev)
    assert len(calls) > 3 * len(bodies)  # every record took several writes
    assert [(kind, body) for kind, body, _ in SpanJournal(str(tmp_path), max_age=60.0).recovered()] == bodies
