"""The loops of content.py (`_content.c`) in Python, for a build without a C compiler: the same functions with the
same results (tests/test_content.py compares the two where the C extension is built)."""

from __future__ import annotations


def collapse(text: str, /) -> str:
    """`" ".join(text.split())`: each whitespace run as one space, none at the ends. A text with nothing to collapse
    is returned itself."""
    if not isinstance(text, str):
        raise TypeError(f"collapse() takes a str, not {type(text).__name__}")
    collapsed = " ".join(str.split(text))  # str's own split, as the C loop reads a subclass's characters
    return text if collapsed == text else collapsed


def is_canonical(value: object, /) -> bool:
    """Whether canonicalising leaves a parsed JSON value as it is: every string without whitespace to collapse and
    not starting with JSON, no float with an integer's value, no tuple, string keys. Exact types only, as
    content.py's _canonical treats them."""
    if type(value) is str:
        return value[:1] not in ("{", "[") and " ".join(value.split()) == value
    if type(value) is float:
        return not value.is_integer()  # false for infinities and NaN, which are written as they are
    if type(value) is dict:
        return all(type(k) is str and is_canonical(v) for k, v in value.items())
    if type(value) is list:
        return all(is_canonical(v) for v in value)
    return type(value) is not tuple  # a tuple is written as a list
