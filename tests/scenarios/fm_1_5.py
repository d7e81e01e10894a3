"""FM-1.5 Unaware of termination conditions: frameworks' limits as error types, exceptions and texts, a run cut off
before the model saw its last tool result; ordinary failures and a final tool are not limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    for framework, error in (("langgraph", "GraphRecursionError"), ("openai-agents", "MaxTurnsExceeded"),
                             ("smolagents", "AgentMaxStepsError")):
        r = Run(f"{tag}-{framework}-limit")
        for i in range(6):
            r.call(read, {**rargs, "try": i}, {"id": 1, "status": "open"})
        yield r.name, {"FM-1.5"}, r.fail_root(error)
    r = Run(f"{tag}-langgraph-limit-raised")  # the limit error recorded only as the exception leaving the run
    for i in range(6):
        r.call(read, {**rargs, "try": i}, {"id": 1, "status": "open"})
    yield r.name, {"FM-1.5"}, r.raise_root("langgraph.errors.GraphRecursionError", "Recursion limit of 25 reached "
                                           "without hitting a stop condition. You can increase the limit by setting "
                                           "the `recursion_limit` config key.")
    r = Run(f"{tag}-llamaindex-limit-raised")  # a limit raised under a plain type: its message names it
    for i in range(5):
        r.call(read, {**rargs, "try": i}, {"id": 1, "status": "open"})
    yield r.name, {"FM-1.5"}, r.raise_root("ValueError", "Reached max iterations.")
    r = Run(f"{tag}-crewai-limit-text")
    for i in range(5):
        r.call(read, {**rargs, "try": i}, {"id": 1, "status": "open"})
    yield r.name, {"FM-1.5"}, r.answer("Agent stopped due to iteration limit or time limit.")
    r = Run(f"{tag}-other-exception")  # an ordinary failure of the run is not a limit
    r.call(read, rargs, {"id": 1})
    r.fail_root("ValueError")
    yield r.name, set(), r.answer("Here is the record.")
    r = Run(f"{tag}-other-exception-raised")
    r.call(read, rargs, {"id": 1}).call(read, {**rargs, "max_results": 5}, {"id": 1})
    r.raise_root("ValueError", "invalid literal for int() with base 10: 'W1001'")
    yield r.name, set(), r.answer("Here is the record.")
    r = Run(f"{tag}-cut-off")  # stopped before the model saw the result it asked for, as a step limit does
    r.call(read, rargs, {"id": 1, "status": "open"}).llm("", [(write, wargs)]).tool(write, wargs, {"status": "done"})
    yield r.name, {"FM-1.5"}, r
    r = Run(f"{tag}-ends-with-submit")
    r.call(read, rargs, {"id": 1}).llm("", [("submit", {"answer": "1"})]).tool("submit", {"answer": "1"}, "")
    yield r.name, set(), r
