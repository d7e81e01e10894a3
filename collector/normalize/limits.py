"""Frameworks' names and messages for a run stopped by its own iteration, recursion, turn or step limit.

They arrive as the error type of the span that raised them (`error.type`, or the `exception.type` of its
exception event): LangGraph's GraphRecursionError, the OpenAI Agents SDK's MaxTurnsExceeded, smolagents'
AgentMaxStepsError, pydantic-ai's UsageLimitExceeded, Google ADK's LlmCallsLimitExceededError, ...
Matched on the class name (module paths are dropped), case-insensitively, by the words it contains.
A limit raised under another name still says so in its message ("Recursion limit of 25 reached without hitting
a stop condition", "Reached max steps."), and so do frameworks that end the run with a final text instead
(CrewAI and LangChain "Agent stopped due to iteration limit", LlamaIndex "Reached max iterations"): `LIMIT_TEXT`.
"""

from __future__ import annotations

import re
from typing import Final

from ..bounded import remember

# A class name naming a limit: a limit word next to "exceeded", "reached", "error", "limit" ...
_LIMIT: Final = re.compile(
    r"(recursion|max_?turns?|max_?steps?|max_?iter(ation)?s?|max_?rounds?|max_?messages?|turn_?limit|step_?limit|"
    r"iteration_?limit|usage_?limit|calls_?limit|max_?loops?)", re.IGNORECASE)
# A framework's own text when it stopped a run at its limit (CrewAI, LangChain, LlamaIndex, AutoGen, LangGraph ...).
LIMIT_TEXT: Final = re.compile(
    r"stopped due to (iteration|time) limit|reached (the )?max(imum)? (number of )?(iterations|steps|turns|rounds)|"
    r"max(imum)? (number of )?(iterations|steps|turns|rounds|messages) (\(\d+\) )?(reached|exceeded)|"
    r"recursion limit of \d+|max_?turns|max_?iterations? (reached|exceeded)", re.IGNORECASE)
_KNOWN: Final[dict[str, str | None]] = {}
_CACHE_LIMIT: Final = 1_000


def limit_hit(error_type: str) -> str | None:
    """The error type when it names a limit (GraphRecursionError, MaxTurnsExceeded...), else None."""
    known = _KNOWN.get(error_type, False)
    if known is False:
        name = error_type.rpartition(".")[2]
        limit = error_type if name != "RecursionError" and _LIMIT.search(name) else None
        known = remember(_KNOWN, error_type, limit, _CACHE_LIMIT)
    return known  # type: ignore[return-value]
