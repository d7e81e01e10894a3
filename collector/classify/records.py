"""What a run's tool results said about the records it looked up, and who the user said they are (content
capture on). Shared by the detectors that judge whether the agent acted on what it was shown (FM-2.5, FM-3.3).

A tool result holding one record (a JSON object) is read at its start: its id (the first `*_id` or `id` key, whose
name says the record's kind: `line_id`), its contact values (keys naming a phone or an email) and its `status`. Who
the user is: the phone numbers and emails in what the user said, and the phone or email arguments of lookups (an
agent finds the user by them), less those a lookup by them found nobody with (mistyped, not on file). A record
whose contact values are all other than the user's, the user having given one of their kind, is someone else's: a
later call on it, or on a record only it names (its device, its plan), acts on the wrong record, and a figure only
it holds, or its status told as that of the user's record of its kind ("your line appears active"), is told of the
wrong record (whether or not the run called on it after the lookup). Not when the run had read the user's own record
of that kind before: it then chose the other record, it did not take it for the user's. A change refused for the
state a looked-up record showed (its `status`; the refusal names a state) misjudged the record and ignored what the
run had seen, unless the next change was the same record's, made another way and not refused for its state.
A tool result listing ids (a JSON array of them: a user's orders) whose ids the run then passes to its calls is a
listing of records; telling the user something is not among their records while some listed record was never
opened concluded without looking (FM-3.2).
Constant work per step: a few regular expressions over the step's text, and a look for each kept
record's id in the arguments (records kept: at most `MAX_RECORDS`)."""

from __future__ import annotations

import re
from typing import Final

from ..model.steps import LLM, TOOL, Finding, Step
from .detector import Detector, SharedState, shared
from .signals import CONTENT, RECORD_ID, denies_on_record, refused_for_state, says_success, tool_error
from .tools import STATE_CHANGING, ToolClassifier

MAX_RECORDS: Final = 64
MAX_LISTINGS: Final = 8
MAX_LISTED: Final = 32  # ids kept per listing
MAX_LINKS: Final = 8  # ids kept of the records a record names
MAX_STRANGERS: Final = 8  # records kept whose contacts were not the user's, with the records they name
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


def others(contacts: set[str], user: set[str] | None) -> bool:
    """Whether a record's contacts are someone else's: none is the user's, and the user gave one of their kind (a
    phone number, an email)."""
    if not user or not contacts or not contacts.isdisjoint(user):
        return False
    phones = emails = False
    for c in contacts:
        if "@" in c:
            emails = True
        else:
            phones = True
    return any(emails if "@" in u else phones for u in user)


class Record:
    __slots__ = ("_figures", "contacts", "foreign", "id", "key", "links", "quoted", "status", "step")

    def __init__(self, step: Step, key: str, record_id: str, contacts: set[str], status: str | None) -> None:
        self.step, self.key, self.id, self.contacts, self.status = step, key, record_id, contacts, status
        self.quoted = f'"{record_id}"'  # as arguments name it
        self.foreign = False  # its contacts are not the user's, and the run used it
        self.links: list[str] | None = None  # the other records it names (quoted ids), kept when it may be foreign
        self._figures: set[str] | None = None

    @property
    def kind(self) -> str | None:
        """What kind of record it is, as the key naming its id says ("line" for `line_id`), or None (`id`)."""
        key = self.key
        return key[:-3].replace("_", " ") if len(key) > 3 and key.endswith("_id") else None

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
    __slots__ = ("acted", "claimed", "contacted", "denied", "foreign_figures", "heard", "linked", "listings",
                 "own_figures", "recorded", "records", "refusal", "seen", "sides", "state_sides",
                 "strangers", "told", "told_state", "tools", "unfound", "user", "write_refused", "wrong_write")

    def __init__(self, tools: ToolClassifier) -> None:
        super().__init__()
        self.tools = tools
        self.begin()

    def begin(self) -> None:
        # made when first needed, as the others: most runs name no record and no contact
        self.records: dict[str, Record] | None = None
        self.user: set[str] | None = None  # contact values the user gave (normalised)
        self.unfound: set[str] | None = None  # contact values a lookup by them found nobody with
        self.heard: list[str] | None = None  # texts naming who the user is, read when a record's contacts are
        self.seen: Step | None = None
        # findings' material, first of each kept
        self.acted: tuple[Record, Step] | None = None  # a call on someone else's record
        self.linked = False  # that call named a record someone else's names (its device, its plan), not it
        self.wrong_write: tuple[Record, Step] | None = None  # a change made to someone else's record
        self.claimed: Step | None = None  # a model turn claiming success after that change
        # the first change refused for the state of a record the run had read (the run judged the record eligible)
        # and not heeded: the next change was not the same record's, changed another way (`refusal`: the last one,
        # waiting for that next change)
        self.write_refused: tuple[Record, Step] | None = None
        self.refusal: tuple[Record, Step] | None = None
        # figures (numbers with decimals) in the results about someone else's record, and in all other results
        self.foreign_figures: set[str] | None = None
        self.own_figures: set[str] | None = None
        # a model turn telling the user a figure of someone else's record, and that record
        self.told: tuple[Step, str, Record] | None = None
        # a model turn telling the user the state (`status`) of someone else's record as its kind's ("your line
        # appears active"), and that record; the records whose state it looks for, with the words telling it
        self.told_state: tuple[Step, Record] | None = None
        self.state_sides: list[tuple[Record, re.Pattern[str]]] | None = None
        # the records whose contacts were not the user's when read, which may be someone else's
        self.strangers: list[Record] | None = None
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
                if self.contacted and self.told_state is None:
                    self._telling_state(step, said)
                if self.listings is not None and self.denied is None:
                    self._denying(step, said)
            return
        if step.kind is not TOOL:
            return
        args = step.args_text
        effect = self.tools.effect(step.tool)
        writes = effect is STATE_CHANGING
        if writes and self.refusal is not None:
            self._heeded(step, args)
        about_foreign = False
        if args:
            if not writes and ("hone" in args or "mail" in args):  # a lookup by phone or email: who the user is
                given = _CONTACT.findall(args)
                if given and tool_error(step) is not None:  # found nobody: not on file, it tells no record apart
                    self._unfound(given)
                else:
                    self._hear(" ".join(given))
            for record in (self.records or {}).values():
                if record.step is not step and record.quoted in args:
                    about_foreign |= self._used(record, step, writes)
            for record in self.strangers or ():  # a record someone else's names: its device, its plan
                if record.links and record.step is not step and record.quoted not in args and \
                        any(link in args for link in record.links):
                    about_foreign |= self._used(record, step, writes, True)
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
            record = Record(step, match.group(1), record_id, contacts, status.group(1) if status else None)
            if contacts:
                user = self._who()
                if not user or others(contacts, user):
                    self.contacted = True
                    if self.strangers is None:
                        self.strangers = []
                    if len(self.strangers) < MAX_STRANGERS:  # each is looked for in every later call's arguments
                        record.links = self._links(record, text, args or "")
                        self.strangers.append(record)
            records[record_id] = record
            self.sides = self.recorded = self.state_sides = None
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
                if self.unfound:
                    self.user.difference_update(self.unfound)
                self.sides = self.state_sides = None
        return self.user

    def _unfound(self, given: list[str]) -> None:
        """Contacts a lookup by them found nobody with (mistyped, not on file): not the user's to compare records to."""
        keys = {contact_key(v) for v in given}
        if self.unfound is None:
            self.unfound = set()
        self.unfound.update(keys)
        user = self._who()
        if user:
            user.difference_update(keys)
            self.sides = self.state_sides = None

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
                if r.foreign or others(r.contacts, user):
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

    def _used(self, record: Record, step: Step, writes: bool, linked: bool = False) -> bool:
        """Note a call on a known record, or (`linked`) on a record it names; whether the record is someone else's,
        taken for the user's: not when the run had read the user's own record of its kind (then it chose the other
        one)."""
        user = self._who() if record.contacts else None
        if user and others(record.contacts, user):
            if self._owns_kind(record, user) or (linked and not self._only_theirs(record, step, user)):
                return False
            if not record.foreign:
                record.foreign = True
                self.sides = self.state_sides = None
                if self.foreign_figures is None:
                    self.foreign_figures = set()
                self.foreign_figures.update(record.figures)
            if self.acted is None:
                self.acted, self.linked = (record, step), linked
            if writes and self.wrong_write is None and tool_error(step) is None:
                self.wrong_write = (record, step)
            return True
        if writes and not linked and record.status is not None and \
                self.write_refused is None and self.refusal is None and \
                tool_error(step) is not None and refused_for_state(step):
            self.refusal = (record, step)
        return False

    def _owns_kind(self, record: Record, user: set[str]) -> bool:
        """Whether the run had read a record of the same kind whose contacts are the user's."""
        return any(r.key == record.key and r.contacts & user for r in (self.records or {}).values())

    def _only_theirs(self, record: Record, step: Step, user: set[str]) -> bool:
        """Whether a record someone else's names, which a call named, is named by none of the user's own records."""
        args = step.args_text or ""
        named = [link for link in record.links or () if link in args]
        for r in (self.records or {}).values():
            text = r.step.result_text
            if r is not record and text and r.contacts & user and any(link in text for link in named):
                return False
        return True

    def _links(self, record: Record, text: str, args: str) -> list[str]:
        """The records a record's lookup names besides it (quoted ids), not those the run knew before (the user's
        account) nor those its call named."""
        known = self.records or {}
        links: list[str] = []
        for match in RECORD_ID.finditer(text):
            value = match.group(2)
            quoted = f'"{value}"'
            if value != record.id and value not in known and quoted not in args and len(links) < MAX_LINKS:
                links.append(quoted)
        return links

    def _heeded(self, step: Step, args: str | None) -> None:
        """The change after a refusal for a record's state: heeded when it changes the same record with another tool
        and is not refused for the state too (the change done the way the state allows); else the refusal stands."""
        refusal = self.refusal
        if refusal is None or refusal[1] is step:
            return
        self.refusal = None
        record, refused = refusal
        if step.tool != refused.tool and args and record.quoted in args and \
                not (tool_error(step) is not None and refused_for_state(step)):
            return
        if self.write_refused is None:
            self.write_refused = refusal

    def told_wrong_record(self, code: str) -> Finding | None:
        """A figure, else the status, of someone else's record told to the user as theirs (FM-2.5 and FM-3.3 both
        report it: the lookup that showed whose it is was disregarded, and the user was told what it contradicts)."""
        if self.told is not None:
            told, figure, record = self.told
            return Finding(code, 0.6, [record.step.span_id, told.span_id], f"told the user a figure of a record whose "
                           f"{record.step.tool} result names another phone or email than the user gave", CONTENT,
                           quote=f"{figure} ({record.id})")
        if self.told_state is not None:
            said, record = self.told_state
            return Finding(code, 0.6, [record.step.span_id, said.span_id], f"told the user the status of a record "
                           f"whose {record.step.tool} result names another phone or email than the user gave, as "
                           "theirs", CONTENT, quote=f"{record.status} ({record.id})")
        return None

    def ignored_refusal(self) -> tuple[Record, Step] | None:
        """The first change refused for the state of a record the run had read, and not heeded (FM-2.5)."""
        return self.write_refused or self.refusal

    def _telling_state(self, step: Step, said: str) -> None:
        """Whether the model told the user the state of someone else's record as that of their record of its kind
        ("your line appears active"), the run never having read the user's own record of that kind."""
        sides = self.state_sides
        if sides is None:
            user = self._who()
            sides = []
            for r in (self.records or {}).values():
                kind = r.kind
                if user and r.status and kind and others(r.contacts, user) and not self._owns_kind(r, user):
                    sides.append((r, re.compile(
                        rf"\b{re.escape(kind)}\b[^.?!\n]{{0,30}}?\b(?:is|are|appears?|shows?|remains?|looks?|seems?)"
                        rf"\s+(?:to be\s+|as\s+)?(?:currently\s+|now\s+|still\s+)?{re.escape(r.status)}\b",
                        re.IGNORECASE)))
            self.state_sides = sides
        for r, words in sides:
            if words.search(said) is not None:
                self.told_state = (step, r)
                return


def shared_records(detector: Detector) -> Records:
    return shared(detector, "records", lambda: Records(detector.tools))
