"""Runs that show no failure mode: a short and a long run, and a confirmation turn (not a repeat)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-healthy")
    r.call(read, rargs, {"id": 1, "status": "open"}).call(write, wargs, {"id": 1, "status": "done"})
    yield r.name, set(), r.answer("Your request is complete: the record now shows status done.")
    r = Run(f"{tag}-confirmation")  # asks the user, then acts: a confirmation turn, not a repeat
    r.call(read, rargs, {"id": 1, "status": "open"}).answer("I found it. Shall I go ahead? Please confirm (yes/no).")
    r.call(read, rargs, {"id": 1, "status": "open"}).call(write, wargs, {"id": 1, "status": "done"})
    yield r.name, set(), r.answer("Done: the record now shows status done.")
    r = Run(f"{tag}-long-healthy")  # a long run of distinct steps
    for i in range(24):
        r.call(read, {**rargs, "page": i}, {"page": i, "items": [i, i + 1]})
    yield r.name, set(), r.answer("Here is the summary of all 24 pages you asked for.")
