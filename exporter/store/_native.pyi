from typing import Final

STRING: Final[int]  # the kinds of column values (see _native.c)
ARRAY_STRING: Final[int]
INT64: Final[int]
UINT32: Final[int]
UINT64: Final[int]
FLOAT32: Final[int]
FLOAT64: Final[int]
NULLABLE_FLOAT32: Final[int]
BOOL: Final[int]
Columns = tuple[tuple[bytes, int], ...]  # each column's name and type as Native strings, and its kind (see _native.c)


def encode(columns: Columns, rows: list[list], /) -> bytes:
    """`rows` as one Native block; b"" for no rows."""


def merge(columns: Columns, blocks: list[bytes], /) -> bytes:
    """Native blocks of `columns` as one block of all their rows; b"" for no rows."""


def string(text: str, /) -> bytes:
    """`text` as Native writes a String: its UTF-8 length as a varint, then its bytes."""


def rows(block: bytes, /) -> int:
    """The rows of a Native block."""
