"""One str object per text for the names steps keep (`_strings.c`) in Python, for a build without a C compiler: the
same functions with the same results (tests/test_normalize.py compares the two where the C extension is built).
The C module's table of recent addresses only spares it dict lookups; the texts kept are those of the dict alone."""

from __future__ import annotations

import sys

_texts: dict[str, str] = {}  # text -> the str that stands for it
_max_texts = 10_000


def canonical(text: str, /) -> str:
    """The one str kept for texts equal to `text` (bounded: a full table is emptied)."""
    if not isinstance(text, str):
        raise TypeError(f"canonical() takes a str, not {type(text).__name__}")
    known = _texts.get(text)
    if known is not None:
        return known
    if len(_texts) >= _max_texts:
        _texts.clear()
    _texts[text] = text
    return text


def bound(max_texts: int, /) -> None:
    """Keep at most `max_texts` texts (those kept are forgotten)."""
    global _max_texts
    if not isinstance(max_texts, int):
        raise TypeError("an integer is required")
    if not -sys.maxsize - 1 <= max_texts <= sys.maxsize:
        raise OverflowError("Python int too large to convert to C ssize_t")
    if max_texts < 1:
        raise ValueError("bound() takes a positive number of texts")
    _max_texts = max_texts
    _texts.clear()


def kept() -> int:
    """How many texts are kept."""
    return len(_texts)
