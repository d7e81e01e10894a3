"""A reader of the Native blocks the store queues (exporter/store/records.py): rows back from a block, written
apart from the encoder (_native.c) so that each checks the other."""

from __future__ import annotations

import struct
from typing import Any


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def varint(self) -> int:
        n = shift = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return n
            shift += 7

    def string(self) -> str:
        size = self.varint()
        self.at += size
        return self.data[self.at - size:self.at].decode()

    def numbers(self, code: str, n: int) -> list[Any]:
        values = list(struct.unpack_from(f"<{n}{code}", self.data, self.at))
        self.at += struct.calcsize(f"<{n}{code}")
        return values


_FIXED = {"Int64": "q", "UInt32": "I", "UInt64": "Q", "Float32": "f", "Float64": "d", "UInt8": "B", "Bool": "?"}


def _column(r: _Reader, kind: str, rows: int) -> list[Any]:
    if kind == "String":
        return [r.string() for _ in range(rows)]
    if kind == "Array(String)":
        ends = r.numbers("Q", rows)
        items = [r.string() for _ in range(ends[-1] if ends else 0)]
        return [items[a:b] for a, b in zip([0, *ends], ends, strict=False)]
    if kind.startswith("Nullable("):
        nulls = r.numbers("B", rows)
        values = _column(r, kind[len("Nullable("):-1], rows)
        return [None if null else v for null, v in zip(nulls, values, strict=True)]
    if kind.startswith("DateTime64("):
        return r.numbers("q", rows)
    return r.numbers(_FIXED[kind], rows)


def read_blocks(data: bytes) -> tuple[list[tuple[str, str]], list[list[Any]]]:
    """(the (name, type) of each column, the rows) of one or more concatenated blocks (of the same columns)."""
    r = _Reader(data)
    names: list[tuple[str, str]] = []
    rows: list[list[Any]] = []
    while r.at < len(data):
        columns, n = r.varint(), r.varint()
        values = []
        names = []
        for _ in range(columns):
            name, kind = r.string(), r.string()
            names.append((name, kind))
            values.append(_column(r, kind, n))
        rows.extend([list(row) for row in zip(*values, strict=True)])
    return names, rows
