"""What a run's tool results said about the records it looked up, and who the user said they are (content
capture on). Shared by the detectors that judge whether the agent acted on what it was shown (FM-2.5, FM-3.3).

A tool result holding one record (a JSON object) is read at its start: its id (the first `*_id` or `id` key),
its contact values (keys naming a phone or an email) and its `status`. Who the user is: the phone numbers and
emails in what the user said, and in the arguments of lookups (an agent finds the user by them). A record
whose contact values are all other than the user's is someone else's: a later call on it acts on the wrong
record, and a figure only it holds, told to the user, is told of the wrong record (whether or not the run called on
it after the lookup). A change refused for the state a looked-up record showed (its `status`) ignored what the run
had seen.
A tool result listing ids (a JSON array of them: a user's orders) whose ids the run then passes to its calls is a
listing of records; telling the user something is not among their records while some listed record was never
opened concluded without looking (FM-3.2).
Constant work per step: a few regular expressions over the step's text, and a look for each kept
record's id in the arguments (records kept: at most `MAX_RECORDS`)."""

from __future__ import annotations

import re
from typing import Final

from ..model.steps import LLM, TOOL, Step
from .detector import Detector, SharedState, shared
from .signals import RECORD_ID, denies_on_record, refused_for_state, says_success, tool_error
from .tools import STATE_CHANGING, ToolClassifier

MAX_RECORDS: Final = 64
MAX_LISTINGS: Final = 8
MAX_LISTED: Final = 32  # ids kept per listing
# A JSON array of two or more strings: a listing of records when its items look like ids (a digit, no space).
_LISTING: Final = re.compile(r'\[\s*"[^"\\\s]{2,64}"(?:\s*,\s*"[^"\\\s]{2,64}")+\s*\]')
_LISTED_ID: Final = re.compile(r'"[^"\\\s]*\d[^"\\\s]*"')  # quoted, as arguments name it
_CONTACT: Final = re.compile(r'"\w*(?:phone|email)\w*"\s*:\s*"([^"\\]{3,80})"', re.IGNORECASE)
_STATUS: Final = re.compile(r'"status"\s*:\s*"([^"\\]{1,40})"', re.IGNORECASE)
_PHONE: Final = re.compile(r"(?<![\w.-])(?:\+?\d{1,3}[ .-]?)?\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4}(?![\w-])")
_EMAIL: Final = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NOT_DIGIT: Final = re.compile(r"\D")
_FIGURE: Final = re.compile(r"\d(?<![\w.]\d)\d*\.\d+(?![\w.]*\d)")  # 3.2, 15.1, 65.00: a measured or charged figure


def contact_key(value: str) -> str:
    """A phone number by its last ten digits, an email in lower case."""
    if "@" in value:
        return value.strip().lower()
    digits = _NOT_DIGIT.sub("", value)
    return digits[-10:] if len(digits) >= 7 else value.strip().lower()


def _contacts(text: str) -> list[str]:
    emails = [v.lower() for v in _EMAIL.findall(text)] if "@" in text else []
    return [contact_key(v) for v in _PHONE.findall(text)] + emails


class Record:
    __slots__ = ("_figures", "contacts", "foreign", "id", "quoted", "status", "step")

    def __init__(self, step: Step, record_id: str, contacts: set[str], status: str | None) -> None:
        self.step, self.id, self.contacts, self.status = step, record_id, contacts, status
        self.quoted = f'"{record_id}"'  # as arguments name it
        self.foreign = False  # its contacts are not the user's, and the run used it
        self._figures: set[str] | None = None

    @property
    def figures(self) -> set[str]:
        """The figures its lookup's result holds (read when first asked: most runs never ask)."""
        if self._figures is None:
            self._figures = set(_FIGURE.findall(self.step.result_text or ""))
        return self._figures


class Listing:
    __slots__ = ("ids", "opened", "step")

    def __init__(self, step: Step, ids: list[str]) -> None:
        self.step, self.ids = step, ids  # quoted, as arguments name them
        self.opened: set[str] = set()  # the ids a later call's arguments named

    def unopened(self) -> list[str]:
        """The ids never opened (unquoted), when some were (which shows the tools take them)."""
        return [i[1:-1] for i in self.ids if i not in self.opened] if self.opened else []


class Records(SharedState):
    __slots__ = ("acted", "claimed", "contacted", "denied", "foreign_figures", "heard", "listings", "own_figures",
                 "recorded", "records", "seen", "sides", "told", "tools", "user", "write_refused", "wrong_write")

    def __init__(self, tools: ToolClassifier) -> None:
        super().__init__()
        self.tools = tools
        self.begin()

    def begin(self) -> None:
        # made when first needed, as the others: most runs name no record and no contact
        self.records: dict[str, Record] | None = None
        self.user: set[str] | None = None  # contact values the user gave (normalised)
        self.heard: list[str] | None = None  # texts naming who the user is, read when a record's contacts are
        self.seen: Step | None = None
        # findings' material, first of each kept
        self.acted: tuple[Record, Step] | None = None  # a call on someone else's record
        self.wrong_write: tuple[Record, Step] | None = None  # a change made to someone else's record
        self.claimed: Step | None = None  # a model turn claiming success after that change
        self.write_refused: tuple[Record, Step] | None = None  # a change refused on a record the run had read
        # figures (numbers with decimals) in the results about someone else's record, and in all other results
        self.foreign_figures: set[str] | None = None
        self.own_figures: set[str] | None = None
        # a model turn telling the user a figure of someone else's record, and that record
        self.told: tuple[Step, str, Record] | None = None
        self.contacted = False  # some record named other phones or emails than the user had given when it was read
        # the figures of the user's records and the records that are someone else's, made again when either changes
        self.sides: tuple[set[str], list[Record]] | None = None
        self.recorded: set[str] | None = None  # the figures of all records, made again when one is added
        self.listings: list[Listing] | None = None
        # a model turn saying something is not among the user's records while a listed one was never opened
        self.denied: tuple[Listing, Step, str, list[str]] | None = None

    def observe(self, step: Step) -> None:
        if step is self.seen:
            return
        self.seen = step
        if step.kind is LLM:
            if step.user_text:
                self._hear(step.user_text)
            said = step.said
            if said:
                if self.wrong_write is not None and self.claimed is None and says_success(said):
                    self.claimed = step
                if (self.foreign_figures or self.contacted) and self.told is None:
                    self._telling(step, said)
                if self.listings is not None and self.denied is None:
                    self._denying(step, said)
            return
        if step.kind is not TOOL:
            return
        args = step.args_text
        effect = self.tools.effect(step.tool)
        about_foreign = False
        if args:
            if effect is not STATE_CHANGING:
                self._hear(args)
            for record in (self.records or {}).values():
                if record.step is not step and record.quoted in args:
                    about_foreign |= self._used(record, step, effect is STATE_CHANGING)
            for listing in self.listings or ():
                listing.opened.update(i for i in listing.ids if i in args)
        text = step.result_text
        if not text:
            return
        if "[" in text and (self.listings is None or len(self.listings) < MAX_LISTINGS):
            self._listing(step, text)
        records = self.records
        if text.lstrip()[:1] == "{" and (match := RECORD_ID.search(text)) is not None and (
                records is None or (match.group(2) not in records and len(records) < MAX_RECORDS)):
            record_id = match.group(2)
            if records is None:
                records = self.records = {}
            status = _STATUS.search(text)
            contacts = {contact_key(v) for v in _CONTACT.findall(text)} if "hone" in text or "mail" in text else set()
            if contacts and not self.contacted:
                user = self._who()
                self.contacted = not user or not contacts & user
            records[record_id] = Record(step, record_id, contacts, status.group(1) if status else None)
            self.sides = self.recorded = None
        elif about_foreign:
            if self.foreign_figures is None:
                self.foreign_figures = set()
            self.foreign_figures.update(_FIGURE.findall(text))
        elif self.foreign_figures is not None:  # figures only matter once someone else's record was used
            if self.own_figures is None:
                self.own_figures = set()
            self.own_figures.update(_FIGURE.findall(text))

    def _listing(self, step: Step, text: str) -> None:
        """Keep the first array of ids a result holds (a user's orders, lines, tickets)."""
        for match in _LISTING.finditer(text):
            ids = _LISTED_ID.findall(match.group(0))
            if len(ids) >= 2:
                if self.listings is None:
                    self.listings = []
                self.listings.append(Listing(step, ids[:MAX_LISTED]))
                return

    def _denying(self, step: Step, said: str) -> None:
        """Whether the model told the user something is not among their records while a listed one was unopened."""
        words = denies_on_record(said)
        if words is None:
            return
        for listing in self.listings or ():
            unopened = listing.unopened()
            if unopened:
                self.denied = (listing, step, words, unopened)
                return

    def _hear(self, text: str) -> None:
        """Keep a text that may say who the user is; its contacts are read once a record's are compared (most
        runs never compare any), or when too many texts wait."""
        heard = self.heard
        if heard is None:
            heard = self.heard = []
        heard.append(text)
        if len(heard) >= MAX_RECORDS:
            self._who()

    def _who(self) -> set[str] | None:
        """The contacts the user gave, with those of the texts kept since last asked."""
        heard = self.heard
        if heard:
            contacts = [c for text in heard for c in _contacts(text)]
            heard.clear()
            if contacts:
                if self.user is None:
                    self.user = set()
                self.user.update(contacts)
                self.sides = None
        return self.user

    def _telling(self, step: Step, said: str) -> None:
        """Whether the model told the user a figure that only someone else's records hold: records the run used,
        or whose lookup named other contacts than the user gave (told as the user's, that is using it too). Who
        the user is, is read only once a figure told is some record's."""
        figures = _FIGURE.findall(said)
        if not figures:
            return
        if not self.foreign_figures:
            recorded = self.recorded
            if recorded is None:
                recorded = self.recorded = {f for r in (self.records or {}).values() for f in r.figures}
            if not any(f in recorded for f in figures):
                return
        user = self._who() if self.contacted else None
        sides = self.sides
        if sides is None:
            ours: set[str] = set()
            theirs: list[Record] = []
            for r in (self.records or {}).values():
                if r.foreign or (user and r.contacts and not r.contacts & user):
                    theirs.append(r)
                else:
                    ours.update(r.figures)
            sides = self.sides = (ours, theirs)
        ours, theirs = sides
        if not theirs:
            return
        foreign = self.foreign_figures or set()
        for figure in figures:
            if figure in ours or figure in (self.own_figures or ()):
                continue
            for r in theirs:
                if figure in r.figures or (r.foreign and figure in foreign):
                    self.told = (step, figure, r)
                    return

    def _used(self, record: Record, step: Step, writes: bool) -> bool:
        """Note a call on a known record; whether the record is someone else's."""
        user = self._who() if record.contacts else None
        if user and not record.contacts & user:
            if not record.foreign:
                record.foreign = True
                self.sides = None
                if self.foreign_figures is None:
                    self.foreign_figures = set()
                self.foreign_figures.update(record.figures)
            if self.acted is None:
                self.acted = (record, step)
            if writes and self.wrong_write is None and tool_error(step) is None:
                self.wrong_write = (record, step)
            return True
        if writes and self.write_refused is None and record.status is not None and tool_error(step) is not None and \
                refused_for_state(step):
            self.write_refused = (record, step)
        return False


def shared_records(detector: Detector) -> Records:
    return shared(detector, "records", lambda: Records(detector.tools))
