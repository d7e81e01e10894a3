"""FM-1.4 Loss of conversation history: a prompt that collapses, a gentle trim, two agents' prompts side by side."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-prompt-collapse")
    for i, tokens in enumerate((1200, 3400, 6100, 9000)):
        r.llm("", [(read, {**rargs, "n": i})], input_tokens=tokens).tool(read, {**rargs, "n": i}, {"n": i})
    r.llm("", [(read, {**rargs, "n": 9})], input_tokens=3000).tool(read, {**rargs, "n": 9}, {"n": 9})
    yield r.name, {"FM-1.4"}, r.answer("What was the order id again?")
    r = Run(f"{tag}-summarised-history")  # a gentle trim (70%) is not a collapse
    for i, tokens in enumerate((1200, 3400, 6100, 9000, 6500, 7000)):
        r.llm("", [(read, {**rargs, "n": i})], input_tokens=tokens).tool(read, {**rargs, "n": i}, {"n": i})
    yield r.name, set(), r.answer("Done with all six lookups.")
    r = Run(f"{tag}-two-agents")  # a planner with a small prompt next to a worker with a growing one
    for i, tokens in enumerate((2500, 5200, 8300)):
        r.llm("", [(read, {**rargs, "n": i})], input_tokens=tokens).tool(read, {**rargs, "n": i}, {"n": i})
        r.llm(f"Next: step {i + 1}.", agent="planner", input_tokens=600)
    yield r.name, set(), r.answer("All steps are done.")
