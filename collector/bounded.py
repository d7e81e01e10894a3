"""Caches keyed by what spans carry (names, error types, model ids): bounded, as distinct keys from untrusted input
must not grow memory without end. A full cache is emptied, not evicted from one by one: what is still in use is
looked up again at once."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def remember(cache: dict, key: object, value: T, limit: int) -> T:
    """`value`, kept in `cache` under `key` (a cache of `limit` entries is emptied first)."""
    if len(cache) >= limit:
        cache.clear()
    cache[key] = value
    return value
