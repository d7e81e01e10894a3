"""Content reduced to its canonical form: the C whitespace collapse, and what orjson leaves to the standard library."""

from __future__ import annotations

import json
import random
import sys

import pytest

from mastwatch.collector._text import collapse
from mastwatch.collector.content import Content, canonical_json

WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


def test_collapse_is_split_and_join_for_every_whitespace_character_and_string_width() -> None:
    # one-, two- and four-byte strings; whitespace wider than the rest of the text (U+3000 in Latin-1 text)
    alphabet = [*WHITESPACE, *"ab{}\"", "é", "ÿ", "Ā", "€", "😀", "\x00", "\x7f"]
    rng = random.Random(7)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        expected = " ".join(text.split())
        assert collapse(text) == expected, repr(text)
        assert (collapse(text) is text) == (expected == text), repr(text)  # nothing to collapse: no copy
    assert len(WHITESPACE) == 29
    assert collapse("word " * 4000) == ("word " * 4000).strip()
    assert collapse("é\u3000x") == "é x" and collapse("é\u3000x").isascii() is False
    assert collapse("a\u3000b").isascii()  # the narrowest width for what is left


def test_collapse_takes_only_str() -> None:
    with pytest.raises(TypeError, match="takes a str"):
        collapse(b"a  b")  # type: ignore[arg-type]


@pytest.mark.parametrize(("raw", "canonical"), [
    ('{"a": NaN, "b": Infinity}', '{"a":null,"b":null}'),  # read by the standard library, written as orjson does
    ({"n": 2**70}, '{"n":1180591620717411303424}'),  # orjson does not write integers past 64 bits
    ('{"n": 18446744073709551617}', '{"n":18446744073709551616}'),  # it reads them as doubles, as JavaScript does
    ({"s": "\ud800 x"}, '{"s":"\ud800 x"}'),  # a lone surrogate: orjson will not encode it
])
def test_values_orjson_cannot_handle_are_still_keyed(raw: object, canonical: str) -> None:
    assert canonical_json(raw) == canonical


def test_a_large_json_result_is_keyed_by_its_canonical_form() -> None:
    items = [{"name": f"pod-{i}", "status": "Running", "restarts": i, "ratio": 0.5 + i} for i in range(300)]
    indented = json.dumps({"items": items}, indent=2)
    shuffled = json.dumps({"items": [dict(reversed(list(item.items()))) for item in items]})
    spaced = json.dumps({"items": [{**item, "status": " Running\n"} for item in items]})
    assert Content(indented).key == Content(shuffled).key == Content(spaced).key
    assert Content(json.dumps({"items": items[:-1]})).key != Content(indented).key
