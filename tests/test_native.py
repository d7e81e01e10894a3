"""The store's Native blocks (exporter/store/_native.c): rows come back as written, a batch's blocks merge into the
block of all their rows, and bad rows or blocks are refused with a clear error."""

from __future__ import annotations

import random
import struct

import pytest

from mastwatch.exporter.store import _native
from tests.native_blocks import read_blocks

TYPES = ("String", "Array(String)", "DateTime64(9, 'UTC')", "UInt32", "UInt64", "Float32", "Float64",
         "Nullable(Float32)")
KINDS = (_native.STRING, _native.ARRAY_STRING, _native.INT64, _native.UINT32, _native.UINT64, _native.FLOAT32,
         _native.FLOAT64, _native.NULLABLE_FLOAT32)  # in the order of TYPES and of random_rows' values
COLUMNS = tuple((_native.string(f"c{kind}") + _native.string(t), kind) for kind, t in zip(KINDS, TYPES, strict=True))


def _float32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def random_rows(rng: random.Random, n: int) -> list[list]:
    def text() -> str:
        return "".join(rng.choice("aé\t\n'\"✓x") for _ in range(rng.randrange(0, 200)))  # past one varint byte

    return [[text(), [text() for _ in range(rng.randrange(0, 4))], rng.randrange(2**63), rng.randrange(2**32),
             rng.randrange(2**64), _float32(rng.random()), rng.random(), rng.choice([None, _float32(rng.random())])]
            for _ in range(n)]


def test_rows_come_back_as_written() -> None:
    rows = random_rows(random.Random(3), 300)
    names, back = read_blocks(_native.encode(COLUMNS, rows))
    assert names == [(f"c{kind}", t) for kind, t in zip(KINDS, TYPES, strict=True)]
    assert back == rows
    assert _native.rows(_native.encode(COLUMNS, rows)) == len(rows) == 300
    assert _native.encode(COLUMNS, []) == b""


def test_blocks_merge_into_the_block_of_all_their_rows() -> None:
    rng = random.Random(5)
    rows = random_rows(rng, 200)
    cuts = sorted(rng.sample(range(1, 200), 9))
    blocks = [_native.encode(COLUMNS, rows[a:b]) for a, b in zip([0, *cuts], [*cuts, 200], strict=True)]
    whole = _native.encode(COLUMNS, rows)
    assert _native.merge(COLUMNS, [*blocks[:3], b"", *blocks[3:]]) == whole
    assert _native.merge(COLUMNS, [b"".join(blocks)]) == whole  # concatenated blocks, as one record may hold
    assert _native.merge(COLUMNS, [whole]) == whole
    assert _native.merge(COLUMNS, []) == _native.merge(COLUMNS, [b""]) == b""


def test_out_of_range_numbers_saturate() -> None:
    row = ["", [], 2**64 - 1, 2**40, 0, 0.0, 0.0, None]
    _, back = read_blocks(_native.encode(COLUMNS, [row, [*row[:2], 5, -3, *row[4:]]]))
    assert [r[2:4] for r in back] == [[2**63 - 1, 2**32 - 1], [5, 0]]


@pytest.mark.parametrize(("column", "value"), [(0, None), (0, b"bytes"), (1, "not a list"), (1, ["a", 3]),
                                               (2, 1.5), (3, "7"), (4, -1), (5, "0.5"), (7, "x")])
def test_a_value_of_the_wrong_type_is_refused_naming_its_row_and_column(column: int, value: object) -> None:
    rows = random_rows(random.Random(1), 3)
    rows[2][column] = value
    with pytest.raises((TypeError, OverflowError), match=f"row 2, column {column}|int too big|negative"):
        _native.encode(COLUMNS, rows)


def test_malformed_blocks_are_refused() -> None:
    block = _native.encode(COLUMNS, random_rows(random.Random(2), 20))
    for cut in (1, 5, len(block) // 2, len(block) - 1):
        with pytest.raises(ValueError, match="malformed"):
            _native.merge(COLUMNS, [block[:cut]])
    with pytest.raises(ValueError, match="columns"):
        _native.merge(COLUMNS[:-1], [block])
    with pytest.raises(TypeError):
        _native.merge(COLUMNS, ["text"])  # type: ignore[list-item]
