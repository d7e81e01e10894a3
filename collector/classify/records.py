"""What a run's tool results said about the records it looked up, and who the user said they are (content
capture on). Shared by the detectors that judge whether the agent acted on what it was shown (FM-2.5, FM-3.3).

A tool result holding one record (a JSON object) is read at its start: its id (the first `*_id` or `id` key),
its contact values (keys naming a phone or an email) and its `status`. Who the user is: the phone numbers and
emails in what the user said, and in the arguments of lookups (an agent finds the user by them). A record
whose contact values are all other than the user's is someone else's: a later call on it acts on the wrong
record. Constant work per step: a few regular expressions over the step's text, and a look for each kept
record's id in the arguments (records kept: at most `MAX_RECORDS`)."""

from __future__ import annotations

import re
from typing import Final

from ..steps import LLM, TOOL, Step
from .detector import Detector, SharedState, shared
from .signals import says_success, tool_error, transient
from .tools import STATE_CHANGING, ToolClassifier

MAX_RECORDS: Final = 64
_ID: Final = re.compile(r'"(\w*_id|id)"\s*:\s*"([^"\\]{2,64})"')
_CONTACT: Final = re.compile(r'"\w*(?:phone|email)\w*"\s*:\s*"([^"\\]{3,80})"', re.IGNORECASE)
_STATUS: Final = re.compile(r'"status"\s*:\s*"([^"\\]{1,40})"', re.IGNORECASE)
_PHONE: Final = re.compile(r"(?<![\w.-])(?:\+?\d{1,3}[ .-]?)?\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4}(?![\w-])")
_EMAIL: Final = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NOT_DIGIT: Final = re.compile(r"\D")
# A refusal naming the state the record should have been in ("must be suspended", "Non-delivered order").
_STATE_CONDITION: Final = re.compile(r"\b(must|needs? to|has to|should) (be|have)\b|\bnon-\w+|\bstatus\b|"
                                     r"\bnot (yet )?(\w+ed|active|open|pending|available)\b", re.IGNORECASE)


def contact_key(value: str) -> str:
    """A phone number by its last ten digits, an email in lower case."""
    if "@" in value:
        return value.strip().lower()
    digits = _NOT_DIGIT.sub("", value)
    return digits[-10:] if len(digits) >= 7 else value.strip().lower()


def _contacts(text: str) -> list[str]:
    return [contact_key(v) for v in _PHONE.findall(text)] + [v.lower() for v in _EMAIL.findall(text)]


class Record:
    __slots__ = ("contacts", "id", "quoted", "status", "step")

    def __init__(self, step: Step, record_id: str, contacts: set[str], status: str | None) -> None:
        self.step, self.id, self.contacts, self.status = step, record_id, contacts, status
        self.quoted = f'"{record_id}"'  # as arguments name it


class Records(SharedState):
    __slots__ = ("acted", "claimed", "records", "seen", "tools", "user", "write_refused", "wrong_write")

    def __init__(self, tools: ToolClassifier) -> None:
        super().__init__()
        self.tools = tools
        self.begin()

    def begin(self) -> None:
        self.records: dict[str, Record] = {}
        self.user: set[str] = set()  # contact values the user gave (normalised)
        self.seen: Step | None = None
        # findings' material, first of each kept
        self.acted: tuple[Record, Step] | None = None  # a call on someone else's record
        self.wrong_write: tuple[Record, Step] | None = None  # a change made to someone else's record
        self.claimed: Step | None = None  # a model turn claiming success after that change
        self.write_refused: tuple[Record, Step] | None = None  # a change refused on a record the run had read

    def observe(self, step: Step) -> None:
        if step is self.seen:
            return
        self.seen = step
        if step.kind is LLM:
            if step.user_text:
                self.user.update(_contacts(step.user_text))
            if self.wrong_write is not None and self.claimed is None and says_success(step.said):
                self.claimed = step
            return
        if step.kind is not TOOL:
            return
        args = step.args_text
        effect = self.tools.effect(step.tool)
        if args:
            if effect is not STATE_CHANGING:
                self.user.update(_contacts(args))
            for record in self.records.values():
                if record.step is not step and record.quoted in args:
                    self._used(record, step, effect is STATE_CHANGING)
        text = step.result_text
        if text and text.lstrip()[:1] == "{" and (match := _ID.search(text)) is not None:
            record_id = match.group(2)
            if record_id not in self.records and len(self.records) < MAX_RECORDS:
                status = _STATUS.search(text)
                contacts = {contact_key(v) for v in _CONTACT.findall(text)} if "hone" in text or "mail" in text \
                    else set()
                self.records[record_id] = Record(step, record_id, contacts, status.group(1) if status else None)

    def _used(self, record: Record, step: Step, writes: bool) -> None:
        user = self.user
        if user and record.contacts and not record.contacts & user:
            if self.acted is None:
                self.acted = (record, step)
            if writes and self.wrong_write is None and tool_error(step) is None:
                self.wrong_write = (record, step)
        elif writes and self.write_refused is None and tool_error(step) is not None and not transient(step) and \
                _STATE_CONDITION.search(step.result_text or step.error_message or "") is not None:
            self.write_refused = (record, step)


def shared_records(detector: Detector) -> Records:
    return shared(detector, "records", lambda: Records(detector.tools))
