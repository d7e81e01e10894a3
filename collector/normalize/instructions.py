"""Rules an agent's instructions (`gen_ai.system_instructions`, a system message) state, as bits a detector can
test: a run is judged against what its agent was told; and the instructions' text in lower case, for the detectors
that ask whether a value came from them. Read once per distinct text (a bounded cache): every model call of a run
carries the same instructions, and gets the same string."""

from __future__ import annotations

import re
from typing import Any, Final

from ..bounded import remember
from ..model.content import as_json

ONE_CALL_AT_A_TIME: Final = 1  # at most one tool call per model turn, and no text to the user beside it
CONFIRM_FIRST: Final = 2  # explicit confirmation from the user before an action that changes state

_ONE_CALL: Final = re.compile(
    r"\b(only|at most|no more than|just)\s+(make|call|use|issue)?\s*(one|a single|1)\s+(tool|function)[ _-]?"
    r"(call|invocation)s?\s+(at a time|per (turn|message|response)|at once)", re.IGNORECASE)
_CONFIRM: Final = re.compile(
    r"\b(explicit|explicitly)\b[^.\n]{0,40}\b(confirm|confirmation|consent|approval|yes)\b|"
    r"\b(confirm|confirmation|consent|approval)\b[^.\n]{0,60}\bbefore\b[^.\n]{0,40}\b(action|change|updat|modif|"
    r"cancel|book|delet|writ|proceed|execut)|"
    r"\bbefore\b[^.\n]{0,60}\b(action|change|updat|modif|cancel|book|delet|writ)\w*[^.\n]{0,80}\b(must|need to|"
    r"have to|should)\b[^.\n]{0,30}\b(confirm|confirmation|consent|approval)", re.IGNORECASE)
_KNOWN: Final[dict[tuple[int, str, str, str], tuple[int, str]]] = {}
_CACHE_LIMIT: Final = 256


def read_instructions(instructions: Any) -> tuple[int, str]:
    """The rule bits instructions state (0: none) and their text in lower case: text, or the conventions' JSON list
    of parts (as a string or parsed), read once per distinct string."""
    if type(instructions) is not str:
        text = _text(instructions)
        return _rules(text), text.lower()
    # keyed by its length and three samples, not the whole text: each model call brings the text anew, and hashing
    # all of a long policy every time would cost more than reading the rest of the span
    n = len(instructions)
    key = (n, instructions[:256], instructions[n // 2 - 128:n // 2 + 128], instructions[-256:])
    known = _KNOWN.get(key)
    if known is None:
        text = _text(as_json(instructions))
        known = remember(_KNOWN, key, (_rules(text), text.lower()), _CACHE_LIMIT)
    return known



def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(p.get("content", "")) if isinstance(p, dict) else str(p) for p in value)
    return value if isinstance(value, str) else ""


def _rules(text: str) -> int:
    return (ONE_CALL_AT_A_TIME if _ONE_CALL.search(text) else 0) | (CONFIRM_FIRST if _CONFIRM.search(text) else 0)
