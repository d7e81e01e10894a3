"""FM-2.6 Reasoning-action mismatch: said one tool, called another; said it would fix, repeated unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-says-x-does-y")
    r.llm("I will call search_flights to find options.", [("search_hotels", {"city": "Rome"})])
    r.tool("search_hotels", {"city": "Rome"}, [{"hotel": "Roma"}])
    yield r.name, {"FM-2.6"}, r.answer("Here are hotel options in Rome.")
    r = Run(f"{tag}-says-fix-repeats")
    r.call("edit", {"command": "edit 10:12 x = (1"}, "SyntaxError: unmatched '('")
    r.llm("I will correct the syntax and try the edit again.", [("edit", {"command": "edit 10:12 x = (1"})])
    r.tool("edit", {"command": "edit 10:12 x = (1"}, "SyntaxError: unmatched '('")
    r.call("edit", {"command": "edit 10:12 x = (1)"}, "File updated.").call("run_tests", {"path": "tests"}, "3 passed")
    yield r.name, {"FM-2.6", "FM-2.5"}, r.answer("The edit is in place and the tests pass.")  # the error unread too
    r = Run(f"{tag}-says-x-does-x")
    r.llm(f"I will call {read} to look it up.", [(read, rargs)]).tool(read, rargs, {"id": 1})
    yield r.name, set(), r.answer("Found it.")
