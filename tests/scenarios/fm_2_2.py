"""FM-2.2 Fail to ask for clarification: a change made with a value nobody gave, against changes whose every value
came from the user, a lookup or the instructions, or that the agent writes itself (a note)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from . import Built, Run

POLICY = "You help customers with their records: look them up, and change them as the customer asks."


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    key, value = next(iter(wargs.items()))
    other = f"{value}7" if isinstance(value, str) else value * 10 + 7  # an id of the same kind, never seen
    done = {"id": 1, "status": "done"}
    r = Run(f"{tag}-changes-a-made-up-record")
    r.instructions = POLICY
    r.user(f"I would like this change: {json.dumps(wargs)}").call(read, rargs, {"id": 1, "status": "open"})
    r.call(write, {**wargs, key: other}, done)
    yield r.name, {"FM-2.2"}, r.answer("Done: the record now shows status done.")
    r = Run(f"{tag}-charges-a-made-up-amount")
    r.instructions = POLICY
    r.user(f"I would like this change: {json.dumps(wargs)}").call(read, rargs, {"id": 1, "status": "open"})
    r.call(write, {**wargs, "fee_usd": 37.5}, done)
    yield r.name, {"FM-2.2"}, r.answer("Done: the record now shows status done.")
    r = Run(f"{tag}-changes-what-the-lookup-showed")  # the user named none of it: the record found did
    r.instructions = POLICY
    r.user("Please make the usual change on my latest record.").call(read, {}, {"record": wargs, "status": "open"})
    r.call(write, wargs, done)
    yield r.name, set(), r.answer("Done: the record now shows status done.")
    r = Run(f"{tag}-changes-as-instructed")  # the values are the instructions' own
    r.instructions = f"{POLICY} Records flagged by the audit get this change: {json.dumps(wargs)}."
    r.user("Please apply the audit's change.").call(write, wargs, done)
    yield r.name, set(), r.answer("Done: the record now shows status done.")
    r = Run(f"{tag}-changes-with-its-own-note")  # a note the agent writes is no fact it was given
    r.instructions = POLICY
    r.user(f"I would like this change: {json.dumps(wargs)}").call(write, {**wargs, "note": "asked by phone"}, done)
    yield r.name, set(), r.answer("Done: the record now shows status done.")
