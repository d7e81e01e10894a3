Columns = tuple[tuple[bytes, int], ...]  # each column's name and type as Native strings, and its kind (see _native.c)


def encode(columns: Columns, rows: list[list], /) -> bytes:
    """`rows` as one Native block; b"" for no rows."""


def merge(columns: Columns, blocks: list[bytes], /) -> bytes:
    """Native blocks of `columns` as one block of all their rows; b"" for no rows."""
