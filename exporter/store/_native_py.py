"""Rows as ClickHouse Native blocks, and blocks of the same columns merged into one (`_native.c`), in Python for a
build without a C compiler: the same functions with the same bytes and errors (tests/test_native.py runs both on
the same rows and blocks where the C extension is built). See _native.c for the format and the kinds of columns."""

from __future__ import annotations

import math
import struct
from typing import Any, Final

STRING: Final = 0  # the kinds of column values (see _native.c)
ARRAY_STRING: Final = 1
INT64: Final = 2
UINT32: Final = 3
UINT64: Final = 4
FLOAT32: Final = 5
FLOAT64: Final = 6
NULLABLE_FLOAT32: Final = 7
BOOL: Final = 8
_KINDS: Final = 9
_MAX_COLUMNS: Final = 64
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_UINT32_MAX: Final = 2**32 - 1
_UINT64: Final = 2**64  # the C module's counts and offsets wrap at 64 bits
_MALFORMED: Final = "a malformed Native block"
_FORMATS: Final = {INT64: "q", UINT32: "I", UINT64: "Q", FLOAT32: "f", FLOAT64: "d"}
_WIDTHS: Final = {INT64: 8, UINT32: 4, UINT64: 8, FLOAT32: 4, FLOAT64: 8, BOOL: 1}
Columns = tuple[tuple[bytes, int], ...]  # each column's name and type as Native strings, and its kind (see _native.c)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _arguments(columns: Any, items: Any, what: str) -> list[int]:
    """The columns' kinds, the arguments checked as the C module checks them."""
    if not isinstance(columns, tuple) or len(columns) > _MAX_COLUMNS or not isinstance(items, list):
        raise TypeError(f"takes the columns (a tuple of (prefix bytes, kind) pairs) and a list of {what}")
    kinds = []
    for i, column in enumerate(columns):
        if not (isinstance(column, tuple) and len(column) == 2 and isinstance(column[0], bytes) and
                isinstance(column[1], int)):
            raise TypeError("columns: a tuple of (prefix bytes, kind) pairs")
        kind = int(column[1])
        if not _INT64_MIN <= kind <= _INT64_MAX:
            kind = -1  # what a C long holds of it, then refused as no kind
        if not 0 <= kind < _KINDS:
            raise ValueError(f"column {i}: no kind {kind}")
        kinds.append(kind)
    return kinds


def _str(value: Any, row: int, column: int) -> bytes:
    """A String: the UTF-8 length as a varint, then the bytes."""
    if not isinstance(value, str):
        raise TypeError(f"row {row}, column {column}: a str, not {type(value).__name__}")
    data = str.encode(value)  # str's own encode, as the C module reads a subclass's characters
    return _varint(len(data)) + data


def _number(kind: int, value: Any, row: int, column: int) -> int | float:
    """What the C module writes of a number for a column of `kind` (ints saturated to the column's range)."""
    if kind in (INT64, UINT32, UINT64) and isinstance(value, int):
        n = int(value)
        if kind == INT64:
            return min(max(n, _INT64_MIN), _INT64_MAX)
        if kind == UINT32:
            return min(max(n, 0), _UINT32_MAX)
        if n < 0:
            raise OverflowError("can't convert negative int to unsigned")
        if n >= _UINT64:
            raise OverflowError("int too big to convert")
        return n
    if kind in (FLOAT32, FLOAT64):
        if type(value) is float:
            d = value
        elif isinstance(value, float):
            d = float.__float__(value)  # its value, as the C module reads it
        elif isinstance(value, int):
            d = float(value)
        else:
            raise TypeError(f"row {row}, column {column}: a number, not {type(value).__name__}")
        if kind == FLOAT32 and not math.isinf(d):
            try:
                struct.pack("<f", d)
            except OverflowError:  # past the float range: C's conversion gives an infinity, struct refuses it
                return math.copysign(math.inf, d)
        return d
    raise TypeError(f"row {row}, column {column}: a number, not {type(value).__name__}")


def _bool(value: Any, row: int, column: int) -> int:
    """A Bool's byte: 1 for a true int (a bool is one)."""
    if not isinstance(value, int):
        raise TypeError(f"row {row}, column {column}: a bool, not {type(value).__name__}")
    return 1 if value else 0


def _column(kind: int, values: list[Any], column: int) -> bytes:
    """One column's values (`values`, a row's each)."""
    if kind == STRING:
        return b"".join([_str(v, r, column) for r, v in enumerate(values)])
    if kind == ARRAY_STRING:  # the offsets (the strings so far), then the strings
        ends = []
        offset = 0
        for r, items in enumerate(values):
            if not isinstance(items, (list, tuple)):
                raise TypeError(f"row {r}, column {column}: a list of str, not {type(items).__name__}")
            offset = (offset + len(items)) % _UINT64
            ends.append(offset)
        strings = [_str(s, r, column) for r, items in enumerate(values) for s in items]
        return struct.pack(f"<{len(ends)}Q", *ends) + b"".join(strings)
    if kind == NULLABLE_FLOAT32:  # the null map, then the values (0 where null)
        nulls = bytes([v is None for v in values])
        numbers = [0.0 if v is None else _number(FLOAT32, v, r, column) for r, v in enumerate(values)]
        return nulls + struct.pack(f"<{len(numbers)}f", *numbers)
    if kind == BOOL:
        return bytes([_bool(v, r, column) for r, v in enumerate(values)])
    numbers = [_number(kind, v, r, column) for r, v in enumerate(values)]
    return struct.pack(f"<{len(numbers)}{_FORMATS[kind]}", *numbers)


def encode(columns: Columns, rows: list[list], /) -> bytes:
    """`rows` as one Native block; b"" for no rows."""
    kinds = _arguments(columns, rows, "rows")
    if not rows:
        return b""
    for r, row in enumerate(rows):
        if not isinstance(row, (list, tuple)) or len(row) < len(columns):
            raise TypeError(f"row {r}: a list of every column's value")
    parts = [_varint(len(columns)), _varint(len(rows))]
    for c, kind in enumerate(kinds):
        parts.append(columns[c][0])
        parts.append(_column(kind, [row[c] for row in rows], c))
    return b"".join(parts)


class _Cursor:
    """Over one block's bytes, as the C module reads them back."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at, self.end = data, 0, len(data)

    def varint(self) -> int:
        n = 0
        for shift in range(0, 64, 7):
            if self.at >= self.end:
                raise ValueError(_MALFORMED)
            byte = self.data[self.at]
            self.at += 1
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return n % _UINT64  # bits past the 64th dropped, as in C
        raise ValueError(_MALFORMED)

    def skip(self, size: int) -> None:
        if self.end - self.at < size:
            raise ValueError(_MALFORMED)
        self.at += size

    def skip_strings(self, n: int) -> None:
        for _ in range(n):  # each string at least a byte: a count past the block's bytes ends at its end
            self.skip(self.varint())


class _Part:
    """The values of one column of one block: data[head:] its values, data[:head] an Array's offsets or a Nullable's
    null map; items: an Array's strings in all."""

    __slots__ = ("data", "head", "items")

    def __init__(self, data: bytes, head: int, items: int) -> None:
        self.data, self.head, self.items = data, head, items


def _part(c: _Cursor, kind: int, rows: int) -> _Part:
    start = c.at
    head = items = 0
    if kind == STRING:
        c.skip_strings(rows)
    elif kind == ARRAY_STRING:
        if rows > (c.end - c.at) // 8:
            raise ValueError(_MALFORMED)
        if rows:
            items = int.from_bytes(c.data[c.at + (rows - 1) * 8:c.at + rows * 8], "little")
        head = rows * 8
        c.skip(head)
        c.skip_strings(items)
    elif kind == NULLABLE_FLOAT32:
        head = rows
        if rows > (c.end - c.at) // 5:
            raise ValueError(_MALFORMED)
        c.skip(rows * 5)
    else:
        width = _WIDTHS[kind]
        if rows > (c.end - c.at) // width:
            raise ValueError(_MALFORMED)
        c.skip(rows * width)
    return _Part(c.data[start:c.at], head, items)


def _merged(kind: int, parts: list[_Part]) -> bytes:
    """One column's parts, in the order of their blocks, as one."""
    out = []
    if kind == ARRAY_STRING:  # each block's offsets moved by the strings of the blocks before it
        base = 0
        for part in parts:
            n = part.head // 8
            offsets = struct.unpack_from(f"<{n}Q", part.data)
            out.append(struct.pack(f"<{n}Q", *[(offset + base) % _UINT64 for offset in offsets]))
            base = (base + part.items) % _UINT64
    elif kind == NULLABLE_FLOAT32:
        out.extend(part.data[:part.head] for part in parts)
    out.extend(part.data[part.head:] for part in parts)
    return b"".join(out)


def merge(columns: Columns, blocks: list[bytes], /) -> bytes:
    """Native blocks of `columns` as one block of all their rows; b"" for no rows."""
    kinds = _arguments(columns, blocks, "blocks")
    parts: list[list[_Part]] = []  # [block][column]
    rows = 0
    for block in blocks:
        if not isinstance(block, bytes):
            raise TypeError("blocks: a list of bytes")
        c = _Cursor(block)
        while c.at < c.end:
            n, block_rows = c.varint(), c.varint()
            if n != len(columns):
                raise ValueError(f"a Native block of {n} columns, not {len(columns)}")
            read = []
            for kind in kinds:
                c.skip(c.varint())  # the column's name
                c.skip(c.varint())  # and type
                read.append(_part(c, kind, block_rows))
            parts.append(read)
            rows = (rows + block_rows) % _UINT64
    if rows == 0:
        return b""
    out = [_varint(len(columns)), _varint(rows)]
    for k, kind in enumerate(kinds):
        out.append(columns[k][0])
        out.append(_merged(kind, [read[k] for read in parts]))
    return b"".join(out)


def string(text: str, /) -> bytes:
    """`text` as Native writes a String: its UTF-8 length as a varint, then its bytes."""
    return _str(text, 0, 0)


def rows(block: bytes, /) -> int:
    """The rows of a Native block."""
    if not isinstance(block, bytes):
        raise TypeError("rows() takes bytes")
    c = _Cursor(block)
    c.varint()
    return c.varint()
