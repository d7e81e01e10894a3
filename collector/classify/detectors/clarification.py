"""FM-2.2 Fail to ask for clarification: the agent filled a change with a value nobody gave it.

Looks for: a state-changing call with an identifier or a figure among its arguments found nowhere in what the user
  said, what tools returned or the agent's instructions
Basis: content
Content capture: yes, instructions included

Signals: each value of a state-changing call's arguments that is a number or holds digits (an id, a date, an
amount), but for arguments whose name says the agent writes them (`content`, `command`, `path`, `summary`...), is
looked for in what the user said and what tools returned before the call, and in the agent's instructions: a value
none of them holds was made up (an order id, a card, an amount the user never gave) where the agent should have
asked. The parts of a value that carry digits are compared whole, in lower case (`W1001` is not found in `W10017`);
a number by value (the argument 2 is found in "2.0 GB" and "$2.00"). Values of words alone (a reason, a mode) are
not judged: they are as often the agent's fair reading of a request as a guess; nor dates and times, which an agent
works out from "tomorrow" or "at ten". Not a handover's arguments (its
summary is the agent's own words), nor arguments cut at the length detectors read (`TEXT_CHARS`). Once a source was
cut there, only identifiers that name their kind (`gift_card_0000000`, `L1002`) are judged: a figure, a word or a
number id may be in the part not kept. A run whose instructions were not captured is not judged: the value may be
one they prescribe.

Constant work per step: the user's and the tools' texts are kept (up to `MAX_SOURCE_CHARS`); they are joined and
searched only at a state-changing call with digits in its arguments, once per value."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from ...model.content import TEXT_CHARS
from ...model.steps import LLM, TOOL, Finding, Step
from ..detector import Detector
from ..signals import CONTENT
from ..tools import STATE_CHANGING

MAX_SOURCE_CHARS: Final = 200_000  # of what the user said and tools returned, per run; past it nothing is judged
MAX_WORDS: Final = 4  # a longer text value is the agent's own prose (a summary, a note), not a fact it was given
MAX_VALUE_CHARS: Final = 60
_WORDS: Final = re.compile(r"[a-z0-9]+")
_DIGIT: Final = re.compile(r"\d")
# A date or a time: an agent works them out from "tomorrow" or "at ten", words no source holds as digits.
_WHEN: Final = re.compile(r"\d{4}-\d\d-\d\d(?:[t ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:z|[+-]\d\d:?\d\d)?)?"
                          r"|\d\d?:\d\d(?::\d\d)?")
_NUMBER: Final = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")


# Words of an argument's name saying its value is what the agent writes, not a fact it was given: an edit's text, a
# command, a file it creates, a note.
AUTHORED: Final = frozenset({
    "body", "cmd", "code", "command", "comment", "content", "contents", "description", "diff", "dir", "directory",
    "file", "filename", "input", "message", "name", "note", "notes", "patch", "path", "prompt", "query", "script",
    "str", "summary", "text", "title"})
AUTHORED_KEYS: Final = frozenset({"old", "new", "search", "replace", "replacement"})  # an edit's two texts
_KEY_WORDS: Final = re.compile(r"[a-z]+|[A-Z][a-z]*")


def _facts(value: Any, key: str = "") -> list[Any]:
    """The scalar values of a JSON value (nested ones included) but those of arguments the agent authors."""
    if isinstance(value, dict):
        return [leaf for name, item in value.items() for leaf in _facts(item, str(name))]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _facts(item, key)]
    if key.lower() in AUTHORED_KEYS or any(word.lower() in AUTHORED for word in _KEY_WORDS.findall(key)):
        return []
    return [value]


def _named_id(text: str) -> bool:
    """An identifier that names its kind: letters and digits, no space (gift_card_0000000, L1002)."""
    return " " not in text and any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _holds(text: str, word: str) -> bool:
    """Whether `text` holds `word` whole (not inside a longer word or number)."""
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or not text[at - 1].isalnum()) and (end == len(text) or not text[end].isalnum()):
            return True
        at = text.find(word, at + 1)
    return False


class Clarification(Detector):
    code = "FM-2.2"
    kinds = frozenset({LLM, TOOL})
    reusable = True

    def __init__(self, settings, trace, tools=None) -> None:
        super().__init__(settings, trace, tools)
        self.begin()

    def begin(self) -> None:
        self.sources: list[str] = []  # what the user said and tools returned
        self.size = 0
        self.cut = False  # a source was cut at TEXT_CHARS: only named ids are judged after it
        self.full = False  # the sources outgrew MAX_SOURCE_CHARS: nothing is judged after
        self.instructions: str | None = None
        self.text: str | None = None  # the sources joined, as last searched
        self.numbers: set[float] | None = None  # the figures in them, as last searched
        self.found: Finding | None = None

    def _add(self, text: str | None) -> None:
        if not text:
            return
        self.size += len(text)
        if self.size > MAX_SOURCE_CHARS:
            self.full = True
            return
        if len(text) >= TEXT_CHARS:
            self.cut = True
        self.sources.append(text)
        self.text = self.numbers = None

    def observe(self, step: Step) -> Finding | None:
        if self.found is not None:
            return None
        if step.kind is LLM:
            if step.instructions is not None:
                self.instructions = step.instructions
            self._add(step.user_text)
            return None
        if step.args_text is not None and not self.full and self.instructions is not None and \
                self.tools.effect(step.tool) is STATE_CHANGING and not self.tools.is_final(step.tool):
            made_up = self._made_up(step.args_text)
            if made_up is not None:
                self.found = Finding(self.code, 0.7, [step.span_id], f"{step.tool} was called with a value that "
                                     "nothing the user said, no tool result and no instruction held", CONTENT,
                                     quote=made_up)
        self._add(step.result_text)
        return self.found

    def _made_up(self, args_text: str) -> str | None:
        """The first argument value found in no source (None: every one was)."""
        if len(args_text) >= TEXT_CHARS or not _DIGIT.search(args_text):
            return None  # cut; or nothing to judge: no number, no id
        try:
            args = json.loads(args_text)
        except ValueError:
            return None
        instructions = self.instructions or ""
        for value in _facts(args):
            if value is None or type(value) is bool:
                continue
            if type(value) is int or type(value) is float:
                if not self.cut and not self._has_number(float(value), instructions):
                    return json.dumps(value)
                continue
            text = str(value).strip().lower()
            if not text or len(text) > MAX_VALUE_CHARS or len(text.split()) > MAX_WORDS:
                continue
            if self.cut and not _named_id(text):
                continue  # a figure, a word or a number id may be in what was cut off
            if _WHEN.fullmatch(text):
                continue
            # an identifier, a date: made up when a part of it that carries digits was never seen (words alone,
            # a reason or a mode, are as often the agent's fair reading of a request as a guess)
            ids = [word for word in _WORDS.findall(text) if any(c.isdigit() for c in word)]
            if ids and not all(self._has_word(word, instructions) for word in ids):
                return str(value)
        return None

    def _joined(self) -> str:
        if self.text is None:
            self.text = (" " + " ".join(self.sources) + " ").lower()
        return self.text

    def _has_word(self, word: str, instructions: str) -> bool:
        return _holds(self._joined(), word) or _holds(instructions, word)

    def _has_number(self, number: float, instructions: str) -> bool:
        if self.numbers is None:
            self.numbers = {float(n) for n in _NUMBER.findall(self._joined())}
        return number in self.numbers or any(float(n) == number for n in _NUMBER.findall(instructions))

    def finish(self) -> Finding | None:
        return self.found
