"""The store's Native blocks (exporter/store/_native_py.c, and its Python twin _native_py.py for a build without a C
compiler): rows come back as written, a batch's blocks merge into the block of all their rows, and bad rows or
blocks are refused with a clear error, by each; and the two write the same bytes and raise the same errors."""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from mastwatch.exporter.store import _native_py
from tests.builds import extension
from tests.native_blocks import read_blocks

TYPES = ("String", "Array(String)", "DateTime64(9, 'UTC')", "UInt32", "UInt64", "Float32", "Float64",
         "Nullable(Float32)", "Bool")
TYPE_NAMES = ("STRING", "ARRAY_STRING", "INT64", "UINT32", "UINT64", "FLOAT32", "FLOAT64", "NULLABLE_FLOAT32",
              "BOOL")
KINDS = tuple(getattr(_native_py, name) for name in TYPE_NAMES)  # in the order of TYPES and of random_rows' values
COLUMNS = tuple((_native_py.string(f"c{kind}") + _native_py.string(t), kind)
                for kind, t in zip(KINDS, TYPES, strict=True))


@pytest.fixture(params=["c", "python"])
def native(request: pytest.FixtureRequest) -> ModuleType:
    """The C module, then its Python twin."""
    return extension("mastwatch.exporter.store._native") if request.param == "c" else _native_py


def _float32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def random_rows(rng: random.Random, n: int) -> list[list]:
    def text() -> str:
        return "".join(rng.choice("aé\t\n'\"✓x") for _ in range(rng.randrange(0, 200)))  # past one varint byte

    return [[text(), [text() for _ in range(rng.randrange(0, 4))], rng.randrange(2**63), rng.randrange(2**32),
             rng.randrange(2**64), _float32(rng.random()), rng.random(), rng.choice([None, _float32(rng.random())]),
             rng.random() < 0.5] for _ in range(n)]


def test_rows_come_back_as_written(native: ModuleType) -> None:
    rows = random_rows(random.Random(3), 300)
    names, back = read_blocks(native.encode(COLUMNS, rows))
    assert names == [(f"c{kind}", t) for kind, t in zip(KINDS, TYPES, strict=True)]
    assert back == rows
    assert native.rows(native.encode(COLUMNS, rows)) == len(rows) == 300
    assert native.encode(COLUMNS, []) == b""


def test_blocks_merge_into_the_block_of_all_their_rows(native: ModuleType) -> None:
    rng = random.Random(5)
    rows = random_rows(rng, 200)
    cuts = sorted(rng.sample(range(1, 200), 9))
    blocks = [native.encode(COLUMNS, rows[a:b]) for a, b in zip([0, *cuts], [*cuts, 200], strict=True)]
    whole = native.encode(COLUMNS, rows)
    assert native.merge(COLUMNS, [*blocks[:3], b"", *blocks[3:]]) == whole
    assert native.merge(COLUMNS, [b"".join(blocks)]) == whole  # concatenated blocks, as one record may hold
    assert native.merge(COLUMNS, [whole]) == whole
    assert native.merge(COLUMNS, []) == native.merge(COLUMNS, [b""]) == b""


def test_out_of_range_numbers_saturate(native: ModuleType) -> None:
    row = ["", [], 2**64 - 1, 2**40, 0, 0.0, 0.0, None, False]
    _, back = read_blocks(native.encode(COLUMNS, [row, [*row[:2], 5, -3, *row[4:]]]))
    assert [r[2:4] for r in back] == [[2**63 - 1, 2**32 - 1], [5, 0]]


@pytest.mark.parametrize(("column", "value"), [(0, None), (0, b"bytes"), (1, "not a list"), (1, ["a", 3]),
                                               (2, 1.5), (3, "7"), (4, -1), (5, "0.5"), (7, "x"), (8, 1.0),
                                               (8, None)])
def test_a_value_of_the_wrong_type_is_refused_naming_its_row_and_column(native: ModuleType, column: int,
                                                                         value: object) -> None:
    rows = random_rows(random.Random(1), 3)
    rows[2][column] = value
    with pytest.raises((TypeError, OverflowError), match=f"row 2, column {column}|int too big|negative"):
        native.encode(COLUMNS, rows)


def test_malformed_blocks_are_refused(native: ModuleType) -> None:
    block = native.encode(COLUMNS, random_rows(random.Random(2), 20))
    for cut in (1, 5, len(block) // 2, len(block) - 1):
        with pytest.raises(ValueError, match="malformed"):
            native.merge(COLUMNS, [block[:cut]])
    with pytest.raises(ValueError, match="columns"):
        native.merge(COLUMNS[:-1], [block])
    with pytest.raises(TypeError):
        native.merge(COLUMNS, ["text"])  # type: ignore[list-item]


# --- the Python twin against the C module: the same bytes and the same errors for the same arguments -------------


def _outcome(f: Callable[..., Any], *args: Any) -> Any:
    """What a call gives: its result, or the type and message of what it raised."""
    try:
        return f(*args)
    except Exception as e:  # compared, not handled
        return type(e), str(e)


class _Int(int):
    pass


class _Float(float):
    def __float__(self) -> float:  # not what the C module reads: the value itself
        return 0.0


class _Str(str):
    pass


# Values for each kind of column (in the order of KINDS): ordinary, at and past the edges of the column's range, of
# subclasses, and of the wrong type.
EDGES: tuple[list[Any], ...] = (
    ["", "a", "é✓😀", "x" * 127, "x" * 128, "x" * 20_000, _Str("sub"), "\ud800", None, b"b", 3],
    [[], ["a", "b"], ("t", "u"), [""], ["é"] * 200, [_Str("s")], "ab", ["a", 3], None, {"a": 1}, [b"x"]],
    [0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**200, -(2**200), True, _Int(5), 1.5, "7", None],
    [0, 1, 2**32 - 1, 2**32, -1, -(2**70), 2**70, False, _Int(-3), 1.0, "7"],
    [0, 2**64 - 1, 2**64, -1, True, _Int(9), 0.0, "7"],
    [0.0, -0.0, 1.5, 3.4028234663852886e38, 3.4028235e38, 3.4028236e38, 3.40282357e38, 1e39, -1e300, math.inf,
     -math.inf, math.nan, 1e-50, 5e-324, 2**128, 2**1024, True, _Int(7), _Float(2.5), "0.5", None],
    [0.0, -0.0, 1e308, math.inf, math.nan, -math.nan, 5e-324, 2**1023, 2**1024, False, _Int(7), _Float(2.5), "1"],
    [None, 0.0, 1.5, 1e39, -1e39, math.nan, 7, _Float(2.5), "x", b"", []],
    [True, False, 0, 1, 2, -1, 2**70, _Int(0), _Int(4), 1.5, "x", b"", None],
)


def test_the_python_twin_writes_the_c_modules_bytes_for_every_value() -> None:
    c = extension("mastwatch.exporter.store._native")
    assert [getattr(c, name) for name in TYPE_NAMES] == [getattr(_native_py, name) for name in TYPE_NAMES]
    rng = random.Random(29)
    base = random_rows(rng, 1)[0]
    compared = 0
    for column, values in enumerate(EDGES):
        for value in values:
            for at in (0, 2):  # the value in the first row, or in a later one
                rows = [list(base) for _ in range(3)]
                rows[at][column] = value
                want = _outcome(c.encode, COLUMNS, rows)
                assert _outcome(_native_py.encode, COLUMNS, rows) == want, (column, value)
                compared += 1
        for value in values[:4]:
            assert _outcome(_native_py.string, value) == _outcome(c.string, value), value
    assert compared > 150
    for n in (0, 1, 2, 7, 64, 300):
        rows = random_rows(rng, n)
        assert _native_py.encode(COLUMNS, rows) == c.encode(COLUMNS, rows)
        as_tuples = [tuple([*row[:1], tuple(row[1]), *row[2:], "extra"]) for row in rows]  # tuples, extra values
        assert _native_py.encode(COLUMNS, as_tuples) == c.encode(COLUMNS, as_tuples)


def test_the_python_twin_checks_its_arguments_as_the_c_module() -> None:
    c = extension("mastwatch.exporter.store._native")
    one = random_rows(random.Random(4), 2)
    block = c.encode(COLUMNS, one)
    many = tuple((_native_py.string(f"c{i}") + _native_py.string("UInt32"), _native_py.UINT32) for i in range(65))
    cases: list[tuple[Any, ...]] = [
        (COLUMNS, one), (list(COLUMNS), one), (COLUMNS, tuple(one)), (COLUMNS, [one[0][:-1]]), (COLUMNS, [None]),
        (COLUMNS, [set()]), ((), one), ((), []), (many[:64], [[1] * 64]), (many, [[1] * 65]),
        (((b"x", 9),), [[1]]), (((b"x", -1),), [[1]]), (((b"x", 2**70),), [[1]]), (((b"x", True),), [["a"]]),
        (((b"x", _Int(3)),), [[1]]), ((("x", 3),), [[1]]), (((b"x", 3.0),), [[1]]), (((b"x",),), [[1]]),
        ((b"x", 3), [[1]]), ((COLUMNS[0], [b"x", 3]), [["a", 1]])]
    for columns, rows in cases:
        assert _outcome(_native_py.encode, columns, rows) == _outcome(c.encode, columns, rows), (columns, rows)
        blocks = [block] if isinstance(rows, list) else rows
        assert _outcome(_native_py.merge, columns, blocks) == _outcome(c.merge, columns, blocks), columns
    for blocks in ([block, "text"], [bytearray(block)], ["text", b"\x01"], [block, None], (block,)):
        assert _outcome(_native_py.merge, COLUMNS, blocks) == _outcome(c.merge, COLUMNS, blocks), blocks
    for value in (block, b"", b"\x08", b"\x80", b"\xff" * 11, b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                  bytearray(block), "text", None):
        assert _outcome(_native_py.rows, value) == _outcome(c.rows, value), value


def test_the_python_twin_merges_blocks_as_the_c_module() -> None:
    c = extension("mastwatch.exporter.store._native")
    rng = random.Random(31)
    for _ in range(40):
        rows = random_rows(rng, rng.randrange(0, 60))
        cuts = sorted(rng.sample(range(len(rows) + 1), min(len(rows) + 1, rng.randrange(0, 6))))
        blocks = [c.encode(COLUMNS, rows[a:b]) for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
        joined = [b"".join(blocks[:2]), *blocks[2:], b""]
        for batch in (blocks, joined, [], [b""]):
            assert _native_py.merge(COLUMNS, batch) == c.merge(COLUMNS, batch)
    nothing = ((_native_py.string("n") + _native_py.string("UInt32"), _native_py.UINT32),)
    for columns, batch in ((nothing, [c.encode(nothing, [[1], [2]]), b"\x01\x00\x01n\x06UInt32"]),
                           ((), [b"\x00\x05", b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x00\x01"])):
        assert _outcome(_native_py.merge, columns, batch) == _outcome(c.merge, columns, batch), batch


def test_the_python_twin_refuses_the_blocks_the_c_module_refuses() -> None:
    """Blocks cut, grown, or with bytes changed (counts and lengths past the end, wrong columns): the same merged
    block, or the same error."""
    c = extension("mastwatch.exporter.store._native")
    rng = random.Random(37)
    valid = [c.encode(COLUMNS, random_rows(rng, n)) for n in (1, 2, 5, 30)]
    outcomes = set()
    for i in range(3000):
        block = bytearray(rng.choice(valid))
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(block))
            action = rng.randrange(4)
            if action == 0:
                block[at] = rng.randrange(256)
            elif action == 1:
                block[at] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
            elif action == 2:
                del block[at:at + rng.randrange(1, 9)]
            else:
                block[at:at] = rng.randbytes(rng.randrange(1, 9))
        blocks = [bytes(block)] if i % 2 else [rng.choice(valid), bytes(block)]
        want = _outcome(c.merge, COLUMNS, blocks)
        assert _outcome(_native_py.merge, COLUMNS, blocks) == want, bytes(block).hex()
        assert _outcome(_native_py.rows, bytes(block)) == _outcome(c.rows, bytes(block))
        outcomes.add(want if isinstance(want, tuple) else bytes)
    assert bytes in outcomes and (ValueError, "a malformed Native block") in outcomes
