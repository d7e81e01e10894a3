"""Frameworks' names for a run stopped by its own iteration, recursion, turn or step limit.

They arrive as the error type of the span that raised them (`error.type`, OpenInference's
`exception.type`): LangGraph's GraphRecursionError, the OpenAI Agents SDK's MaxTurnsExceeded, smolagents'
AgentMaxStepsError, pydantic-ai's UsageLimitExceeded, Google ADK's LlmCallsLimitExceededError, ...
Matched on the class name (module paths are dropped), case-insensitively, by the words it contains.
"""

from __future__ import annotations

import re

# A class name naming a limit: a limit word next to "exceeded", "reached", "error", "limit" ...
_LIMIT = re.compile(
    r"(recursion|max_?turns?|max_?steps?|max_?iter(ation)?s?|max_?rounds?|max_?messages?|turn_?limit|step_?limit|"
    r"iteration_?limit|usage_?limit|calls_?limit|max_?loops?)", re.IGNORECASE)
_KNOWN: dict[str, str | None] = {}
_CACHE_LIMIT = 1_000


def limit_hit(error_type: str) -> str | None:
    """The error type when it names a limit (GraphRecursionError, MaxTurnsExceeded...), else None."""
    known = _KNOWN.get(error_type, False)
    if known is False:
        name = error_type.rpartition(".")[2]
        known = error_type if name != "RecursionError" and _LIMIT.search(name) else None
        if len(_KNOWN) >= _CACHE_LIMIT:
            _KNOWN.clear()
        _KNOWN[error_type] = known
    return known  # type: ignore[return-value]
