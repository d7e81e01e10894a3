"""Content reduced to its canonical form: the whitespace collapse and the canonical check (in C, `_content.c`, and
in Python, `_content_py.py`, for a build without a C compiler: each against the reference, and the two against
each other), and what orjson leaves to the standard library."""

from __future__ import annotations

import contextlib
import json
import random
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import orjson
import pytest

from mastwatch.collector.model import _content_py
from mastwatch.collector.model.content import Content, canonical_json
from tests.builds import extension

WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


@pytest.fixture(params=["c", "python"])
def loops(request: pytest.FixtureRequest) -> ModuleType:
    """The C loops, then their Python twin."""
    return extension("mastwatch.collector.model._content") if request.param == "c" else _content_py


def test_collapse_is_split_and_join_for_every_whitespace_character_and_string_width(loops: ModuleType) -> None:
    collapse = loops.collapse
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


def test_collapse_takes_only_str(loops: ModuleType) -> None:
    with pytest.raises(TypeError, match="takes a str"):
        loops.collapse(b"a  b")


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


def _value(rng: random.Random, depth: int = 0) -> object:
    pick = rng.randrange(9 if depth < 3 else 5)
    if pick == 0:
        return rng.choice([0, -3, 2**40, True, None])
    if pick == 1:
        return rng.choice([2.0, 2.5, -0.0, 1e300, 1.5e-7, float("inf"), float("nan")])
    if pick in (2, 3, 4):
        characters = [*WHITESPACE[:4], " ", "a", "é", "{", "[", "1", '"']
        return "".join(rng.choice(characters) for _ in range(rng.randint(0, 5)))
    if pick in (5, 6):
        return {rng.choice(["a", "b", " k", "{"]): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    if pick == 7:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return tuple(_value(rng, depth + 1) for _ in range(rng.randint(0, 2)))


def test_is_canonical_holds_only_for_values_canonicalising_leaves_alone(loops: ModuleType) -> None:
    from mastwatch.collector.model.content import _canonical, _dumps
    is_canonical = loops.is_canonical
    rng = random.Random(11)
    seen = {True: 0, False: 0}
    for _ in range(20_000):
        value = _value(rng)
        if is_canonical(value):
            assert _dumps(_canonical(value)) == _dumps(value), repr(value)
        seen[is_canonical(value)] += 1
    assert min(seen.values()) > 1_000  # both answers exercised
    assert is_canonical({"a": [1, 2.5, "x y"], "b": None})
    assert not is_canonical({"a": 2.0}) and not is_canonical(["x  y"]) and not is_canonical({"q": '{"a":1}'})
    assert not is_canonical({1: "x"}) and not is_canonical((1,))


def test_a_long_tool_result_is_keyed_as_received_and_a_short_one_canonically() -> None:
    from mastwatch.collector.model.content import RAW_LIMIT, fingerprint
    result = json.dumps({"pods": [f"api-{i}" for i in range(100)]})
    assert len(result) > RAW_LIMIT
    verbatim = Content(result, verbatim=True)
    assert verbatim.key == Content(result, verbatim=True).key == fingerprint(result)
    assert verbatim.preview == result[:159] + "…" and verbatim.text == verbatim.preview
    assert Content(json.dumps(json.loads(result), indent=1), verbatim=True).key != verbatim.key  # as received
    assert Content(json.dumps(json.loads(result), indent=1)).key == Content(result).key  # arguments: canonical
    assert Content('{"b": 1,  "a": 2}', verbatim=True).key == Content('{"a":2,"b":1}').key  # short: canonical
    assert Content({"pods": list(range(200))}, verbatim=True).key == Content({"pods": list(range(200))}).key


def test_json_nested_too_deep_to_parse_is_keyed_as_text() -> None:
    from mastwatch.collector.normalize import normalize_span
    from mastwatch.collector.receiver.decode import SpanRecord
    for depth in (1_000, 1_010, 1_024, 1_030, 100_000):  # past Python's recursion limit, orjson's, or both
        deep = "[" * depth + "]" * depth
        assert Content(deep).key == Content(deep).key  # no RecursionError: the text is content like any other
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": deep}
    step = normalize_span(SpanRecord("svc", b"\1" * 16, b"\2" * 8, b"", "execute_tool t", 1, 2, 0, attrs))
    assert step.args is not None and isinstance(step.args.key, int)  # the span is kept, not dropped


# --- the Python twin against the C loops: the same results, objects and errors for the same arguments -----------


def _outcome(f: Callable[[Any], Any], value: Any) -> Any:
    """What a call gives: its result (and its type), or the type and message of what it raised."""
    try:
        result = f(value)
    except Exception as e:  # compared, not handled
        return type(e), str(e)
    return type(result), result


def _corpus_values() -> list[Any]:
    """Every attribute value of the recorded runs (content capture on), and the JSON values those that are JSON
    text parse to."""
    from mastwatch.collector.receiver.decode import decode
    from tests.otlp_corpus import corpus

    values: list[Any] = []
    for _, _, request in corpus():
        for record in decode(request.SerializeToString()).spans:
            for value in record.attributes.values():
                values.append(value)
                if type(value) is str and value[:1] in ("{", "["):
                    with contextlib.suppress(orjson.JSONDecodeError):
                        values.append(orjson.loads(value))
    return values


class _Str(str):
    pass


class _Float(float):
    pass


def test_the_python_collapse_gives_the_c_collapses_results() -> None:
    c = extension("mastwatch.collector.model._content")
    rng = random.Random(41)
    alphabet = [*WHITESPACE, *"ab{}", "é", "Ā", "€", "😀", "\x00", "\ud800"]
    recorded = [v for v in _corpus_values() if type(v) is str]
    assert len(recorded) > 4_000
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16))) for _ in range(20_000)] + recorded
    texts += ["", " ", "  ", "a", " a", "a ", "a  b", "a\tb", "\u3000", "x\u3000" * 3000, _Str("a b"), _Str(" a ")]
    for text in texts:
        want = c.collapse(text)
        got = _content_py.collapse(text)
        assert type(got) is type(want) and got == want, repr(text)
        assert (got is text) == (want is text), repr(text)  # nothing to collapse: the text itself
    for value in (b"a  b", None, 3, ["a"]):
        assert _outcome(_content_py.collapse, value) == _outcome(c.collapse, value), value


def test_the_python_canonical_check_gives_the_c_checks_answers() -> None:
    c = extension("mastwatch.collector.model._content")
    rng = random.Random(43)
    values = [_value(rng) for _ in range(20_000)] + _corpus_values()
    values += [{_Str("k"): 1}, {"k": _Str(" x ")}, [_Float(2.0)], 2.0, -0.0, float("inf"), float("nan"), 1e300,
               True, None, 2**70, (), {}, [], {1.5: "x"}, {None: 1}, "", " ", "{", "x  y", b"bytes", {"a": (1,)}]
    answers = {True: 0, False: 0}
    for value in values:
        want = _outcome(c.is_canonical, value)
        assert _outcome(_content_py.is_canonical, value) == want, repr(value)[:200]
        answers[want[1]] += 1
    assert min(answers.values()) > 1_000
    deep: list[Any] = []
    for _ in range(100_000):  # past any recursion limit: both refuse it
        deep = [deep]
    with pytest.raises(RecursionError):
        c.is_canonical(deep)
    with pytest.raises(RecursionError):
        _content_py.is_canonical(deep)
