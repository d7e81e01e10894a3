"""Message content, tool arguments and results: held as a fingerprint of their canonical form (of the text as
received, for a long tool result) and a short preview, never whole. Small values are kept raw until a detector
compares them (most never are: only a tool that is called again has its arguments compared), then as their
canonical form while it is short; the fingerprint is computed when asked for."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from typing import Any, Final

import orjson

try:
    from ._content import collapse, is_canonical
except ImportError:  # built without a C compiler: the same loops in Python
    from ._content_py import collapse, is_canonical

PREVIEW_CHARS: Final = 160  # what of a piece of content is kept for evidence; the rest is only hashed
TEXT_CHARS: Final = 2000  # what of a message or tool result detectors read (content capture on)
RAW_LIMIT: Final = 512  # larger values are fingerprinted at once
# What orjson cannot write (integers past 64 bits, strings with lone surrogates) the standard library does.
_ENCODER: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_SORTED: Final = orjson.OPT_SORT_KEYS
# A flat JSON object that is canonical as it stands if its keys are in order: no whitespace outside strings, integers,
# strings without escapes, without whitespace other than single inner spaces, and not starting with JSON.
_FLAT: Final = re.compile(r'\{(?:"[^"\\\x00-\x1f]*":(?:0|-?[1-9]\d{0,15}|true|false|null|""|'
                          r'"(?![{\[])[^"\\\s\x00-\x1f]+(?: [^"\\\s\x00-\x1f]+)*")(?:,(?=")|(?=\})))*\}')
_KEY: Final = re.compile(r'[{,]"([^"]*)":')  # the keys of a flat object (its strings hold no quotes)


def _loads(text: str) -> Any:
    """Parse JSON (raises ValueError): orjson (integers past 64 bits become doubles, as in JavaScript), or the
    standard library for what only it reads (NaN, Infinity). JSON nested deeper than either reads (1,024 levels
    for orjson) is not JSON here: its text is content like any other."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            return json.loads(text)
        except RecursionError:
            raise ValueError("JSON nested too deep") from None


def _dumps(value: Any) -> str:
    """Compact JSON, keys sorted, non-ASCII as is."""
    try:
        return orjson.dumps(value, option=_SORTED).decode()
    except TypeError:
        return _ENCODER.encode(value)


def as_json(value: Any) -> Any:
    """Parse a JSON string into its value; anything else (or invalid JSON) is returned as is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return _loads(value)
        except ValueError:
            return value
    return value


def _canonical(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        text = value.strip()
        if text[:1] in ("{", "["):  # JSON inside a string
            inner = as_json(text)
            if inner is not text:
                return _canonical(inner)
        return collapse(text)
    if kind is dict:
        return {str(k): _canonical(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_canonical(v) for v in value]
    if kind is float and value.is_integer():
        return int(value)
    return value


def canonical_json(value: Any) -> str:
    """Equivalent arguments give the same text: keys sorted, whitespace and JSON-in-strings normalised."""
    try:
        return _canonical_json(value)
    except RecursionError:  # JSON text nested deeper than the checks go: keyed as the text it is
        if type(value) is not str:
            raise
        return _dumps(collapse(value))


def _canonical_json(value: Any) -> str:
    if type(value) is str and value[:1] in ("{", "["):
        if _FLAT.fullmatch(value) is not None:
            previous = None
            for key in _KEY.findall(value):
                if previous is not None and key <= previous:
                    break
                previous = key
            else:  # keys in order, none twice: the text is canonical
                return value
        try:
            value = _loads(value)
        except ValueError:
            pass
        else:
            if is_canonical(value):  # the usual case: no value to normalise
                return _dumps(value)
    return _dumps(_canonical(as_json(value)))


def fingerprint(text: str) -> int:
    """64 bits of the text's SHA-1: an equality key, not a defence (with SHA-NI, OpenSSL's SHA-1 hashes a long
    text about twice as fast as BLAKE2b)."""
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big")


def preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _reduced(text: str) -> tuple[str | int, str | None]:
    """The key a canonical text is compared by (the text, or its fingerprint when long), and its preview when the
    text is not kept."""
    return (text, None) if len(text) <= RAW_LIMIT else (fingerprint(text), preview(text))


@functools.lru_cache(maxsize=10_000)  # small raw strings already reduced: loops repeat the same texts
def _reduced_raw(raw: str) -> tuple[str | int, str | None]:
    return _reduced(canonical_json(raw))


@functools.lru_cache(maxsize=10_000)  # short canonical texts (at most RAW_LIMIT): repeated steps repeat them
def _short_fingerprint(text: str) -> int:
    return fingerprint(text)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str) else RAW_LIMIT + 1 if isinstance(value, dict | list) else 0


class Content:
    """A structured value (tool arguments or result) reduced on first use to the key it is compared by."""

    __slots__ = ("_fingerprint", "_key", "_preview", "_raw")

    def __init__(self, raw: Any, verbatim: bool = False) -> None:
        """`verbatim`: a text longer than RAW_LIMIT is keyed by the fingerprint of the text as received, not of its
        canonical form. For tool results: a tool writes the same result the same way each time, and canonicalising
        long results cost more than the rest of normalising their spans."""
        self._raw = raw
        self._key: str | int | None = None
        self._fingerprint: int | None = None
        self._preview: str | None = None
        if _size(raw) > RAW_LIMIT:
            if verbatim and type(raw) is str:
                self._key, self._preview = _reduced(raw)
                self._raw = None
            else:
                self._reduce()

    def _reduce(self) -> None:
        raw = self._raw
        if type(raw) is str and len(raw) <= RAW_LIMIT:
            self._key, self._preview = _reduced_raw(raw)
        else:
            self._key, self._preview = _reduced(canonical_json(raw))
        self._raw = None

    @property
    def key(self) -> str | int:
        """Equal for equivalent values, and only for them: the canonical text, or its fingerprint when long (a long
        verbatim text: the fingerprint of the text as received)."""
        if self._key is None:
            self._reduce()
        return self._key  # type: ignore[return-value]

    @property
    def fingerprint(self) -> int:
        key = self.key
        if type(key) is int:
            return key
        if self._fingerprint is None:
            self._fingerprint = _short_fingerprint(key)  # type: ignore[arg-type]
        return self._fingerprint

    @property
    def text(self) -> str:
        """The start of the value as text, for reading: a raw string as it came (not canonicalised), else the
        preview."""
        raw = self._raw
        return raw[:PREVIEW_CHARS] if type(raw) is str else self.preview

    @property
    def preview(self) -> str:
        if self._preview is None:
            key = self.key  # reducing a long value leaves its preview
            if self._preview is None:  # the key is the canonical text
                self._preview = preview(key)  # type: ignore[arg-type]
        return self._preview
