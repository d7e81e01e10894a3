"""What steps say, read from their structure first and their captured content (previews) second.

Each helper returns the basis it rests on, so that a finding can say whether it needed content capture."""

from __future__ import annotations

import functools
import re
from typing import Final

from ..bounded import remember
from ..model.steps import Step
from ..normalize.limits import LIMIT_TEXT
from .tools import name_words

STRUCTURE: Final = "structure"
CONTENT: Final = "content"
TOOL_CALL_FINISH: Final = frozenset({"tool_call", "tool_calls", "function_call", "tool_use",
                                     "tool-calls"})  # tool-calls: Vercel AI SDK


def asks_for_tools(step: Step) -> bool:
    """Whether a model call finished asking for tool calls (one of its finish reasons is in TOOL_CALL_FINISH). Not
    `isdisjoint`: a method call through Python, for every model call and every detector asking; this compiles to a
    loop."""
    return any(reason in TOOL_CALL_FINISH for reason in step.finish_reasons)

# A tool result reporting a failure, read at its start (a leading quote or bracket of JSON is skipped), or a
# traceback or error list anywhere in its preview (whitespace there is collapsed; looked for only in text holding
# one of the words it needs).
_RESULT_ERROR: Final = re.compile(
    r"""^[\s"'\[{(]*+(error\b|err:|exception\b|traceback\b|fail(ed|ure)?\b|fatal\b|invalid\b|wrong\b|not found\b|"""
    r"""no (data|results?|such|matching)\b|denied\b|forbidden\b|unauthori[sz]ed\b|cannot\b|can't\b|could not\b|"""
    r"""unable to\b|timed? ?out\b|"?error"?\s*:\s*(?!null|none|false|""|\{\}|\[\]))""", re.IGNORECASE)
_RESULT_ERROR_ANYWHERE: Final = re.compile(
    r"Traceback \(most recent call last\)|\bERRORS?:|\b[A-Z]\w*Error: |"
    r"\"(exit_?code|returncode|exit_status)\"\s*:\s*[1-9]")  # a command that failed
# Errors that go away on their own: retrying them is not ignoring them.
_TRANSIENT: Final = re.compile(
    r"time(d)? ?out|timeout|temporar|unavailable|rate.?limit|too many requests|\b429\b|\b50[234]\b|"
    r"connection (reset|refused|error)|try again later|overloaded|throttl", re.IGNORECASE)
# A model claiming the work is done and right.
_SUCCESS_CLAIM: Final = re.compile(
    r"\b(successfully|succeeded|(has|have) been (fixed|resolved|completed|updated|created|booked|cancell?ed|applied|"
    r"restarted|deployed|changed|processed|done|refunded|returned|exchanged|sent|scaled|rolled (back|out)|removed|"
    r"deleted|added|issued|paid|merged|migrated|reverted|modified|submitted|saved|enabled|disabled|released|"
    r"installed|upgraded|patched|rebooted)|(is|are) (now )?(fixed|resolved|working|complete|done|healthy)|"
    r"(shows?|showed|found|reports?|with) no (errors?|issues?|problems?|anomal\w+)|nothing unusual|"
    r"looks? (good|fine|healthy|normal)|"
    r"all (the )?tests (now )?pass|tests? (now )?pass(es|ed)?\b|verified|confirmed that|works (correctly|as expected)|"
    r"i(?:'ve| have) (now |just |successfully )?(fixed|resolved|completed|updated|created|booked|applied|restarted|"
    r"deployed|enabled|disabled|activated|reactivated|changed|processed|cancell?ed|refunded|submitted)|"
    r"task (is )?complete|"
    r"(runs?|ran|pass(es|ed)?|works?|worked|completes?|completed|finish(es|ed)?) without (any )?(errors?|issues?|"
    r"problems?|failures?|exceptions?))|"
    r"^\W*(fixed|done|resolved|completed)\b(?! (by|with|when|if|once|after))",  # "Fixed: ...", "Done."
    re.IGNORECASE)
# A final answer telling the user why the work cannot be done (an apology, an impossibility).
_EXPLAINED_FAILURE: Final = re.compile(
    r"\b(sorry|apologi[sz]e|unfortunately|can ?not|can't|unable to|not able to|"
    r"not possible|no longer|isn't possible|is not allowed|not eligible)\b", re.IGNORECASE)
# A model telling the user a change can be done later: once a state is reached, it (or the user) can do it then
# ("Once your order is delivered, just let me know and we can process the exchange"; "we'll need to wait until").
_DEFERS: Final = re.compile(
    r"\b(?:once|when|after|as soon as)\b[^.?!\n]{1,80}?\b(?:is|are|has been|have been|gets?|becomes?)\b"
    r"[^.?!\n]{0,40}?,[^.?!\n]{0,50}?\b(?:we|I)(?:['\u2019]ll| will| can| could)\b|"
    r"\b(?:once|when|after|as soon as)\b[^.?!\n]{1,80}?,\s*you (?:can|could|will be able to) (?:then )?"
    r"(?:request|ask|try|submit|place|process|reach out|contact)\b|"
    r"\b(?:need|have|has) to wait (?:until|for)\b|\btry again later\b", re.IGNORECASE)
# A refusal naming the state the record should have been in ("must be suspended", "Non-delivered order"): a state
# word (a participle, a state adjective), not any requirement ("Payment method should be the original payment method").
_STATE_CONDITION: Final = re.compile(
    r"\b(?:must|needs? to|has to|should) (?:be|have been) (?:in (?:an? |the )?\w+ (?:state|status)\b|"
    r"(?!(?:the|an?|one|of|in|at|on|for|less|more)\b)\w+(?:ed|ing)\b|(?:pending|active|inactive|open|closed|paid|"
    r"unpaid|overdue|due|available|valid|enabled|idle|live|ready)\b)|"
    r"\bnon-\w+|\bstatus\b|\bnot (yet )?(\w+ed|active|open|pending|available)\b", re.IGNORECASE)
# A check's result showing the system unhealthy although the call itself worked: failing pods, 5xx answers.
_UNHEALTHY: Final = re.compile(
    r"\b(CrashLoopBackOff|ImagePullBackOff|ErrImagePull|OOMKilled|Unhealthy)\b|"
    r"\"(status|status_?code|code)\"\s*:\s*\"?5\d\d\b|\b5\d\d (Service Unavailable|Internal Server "
    r"Error|Bad Gateway|Gateway Time-?out)\b")
_NEGATED_CLAIM: Final = re.compile(r"\b(not|n't|unable|could not|failed|unsuccessful|error)\b", re.IGNORECASE)
# A claim made only on a condition, later in time ("once your return is completed", "when it has been processed"):
# the clause leading to it, read back to the last punctuation.
_CONDITIONAL_CLAIM: Final = re.compile(r"\b(once|when|whenever|after|if|until|unless|as soon as|before)\b[^.,;:!?\n]*$",
                                       re.IGNORECASE)


# A state-changing call's result that only acknowledges the request: the new state is not shown yet.
_ACKNOWLEDGED: Final = re.compile(
    r"""^[\s"'\[{(]*+(accepted|queued|scheduled|submitted|initiated|in progress|pending|started|restarting|"""
    r"""rolling out|triggered|request (received|sent|accepted)|ok\W*$|"?status"?\s*:\s*"?(accepted|pending|"""
    r"""queued|in_progress|started))""", re.IGNORECASE)
# A model saying it will change what it does next ("I will correct the syntax and try again").
_STATED_CHANGE: Final = re.compile(
    r"\b(i will|i'll|let me|let's|we will|we'll|i need to|i should)\b[^.]{0,60}\b(correct|fix|"
    r"modify|change|adjust|amend|update|quote|escape|try (again )?with|instead|different)", re.IGNORECASE)
# A model naming the tool it is about to use ("I will call search_flights", "let me check `get_order`").
_STATED_TOOL: Final = re.compile(
    r"(?i:\b(?:i will|i'll|let me|let's|now|next,? i)\b[^.]{0,30}?\b(?:call|use|run|invoke|"
    r"query|check|try)(?: the)?) `?([A-Za-z]\w*_\w+|[a-z]+[A-Z]\w*)`?")


# A tool handing the conversation over to a person (transfer_to_human_agents, escalate_ticket, ...).
_HANDS_OVER: Final = re.compile(r"human|escalat|representative|live_?agent|operator|supervisor", re.IGNORECASE)
# Why a run is handed over: the problem is still there ("despite ...", "still fails", "needs further support") ...
_PERSISTS: Final = re.compile(
    r"\b(despite|persist\w*|still (not|unable|cannot|can't|fails?|failing|has no|have no|having|experienc\w+|"
    r"showing|shows|no)|continues? to (fail|be|have|show|experienc\w+)|not (yet )?(resolved|working|fixed)|"
    r"unresolved|remains? (unresolved|down|broken|unable|the same)|further (technical |advanced )?(assistance|"
    r"support|troubleshooting|investigation|help)|advanced (technical )?(support|troubleshooting|assistance)|"
    r"unable to (resolve|fix|restore|get))", re.IGNORECASE)
# ... unless it names a cause the agent cannot remove (a locked SIM, a rule, an expired contract).
_BLOCKED: Final = re.compile(
    r"\b(locked|cannot be (resumed|lifted|restored|changed|modified|cancell?ed|processed|refunded|unlocked|"
    r"reactivated|done)|can ?not (resume|lift|restore|unlock|reactivate)|not eligible|ineligible|expired|"
    r"in the past|not (allowed|permitted|possible)|against (the |our )?polic\w+|polic(y|ies) (does not|doesn't|"
    r"do not|don't) (allow|permit)|out of scope|outside (my|the agent's|our) scope|requires? (a )?(human|manual|"
    r"supervisor)|only a human|hardware|physical(ly)? damage|replacement)\b", re.IGNORECASE)
# A claim that every step was tried: a verification no one can see.
_EXHAUSTED: Final = re.compile(
    r"\ball (the |of the )?(standard |necessary |available |basic |possible |recommended |usual |relevant |"
    r"applicable |typical )*(troubleshooting |diagnostic )?(steps|options|fixes|solutions|checks|measures)"
    r"( \w+){0,3}? (have been |were |are )?(completed|exhausted|tried|taken|performed|done|attempted|followed|"
    r"checked)|\bexhausted (all|every)|\b(tried|completed|attempted|performed|done) (all|every) "
    r"(the )?(standard |available |possible |basic |recommended )*(troubleshooting |diagnostic )?"
    r"(steps?|options?|fix(es)?|solutions?)", re.IGNORECASE)


# A final turn that says nothing to anyone: a bare control token ("###STOP###", "<end>") or nothing.
_SILENT: Final = re.compile(r"^\W*(stop|end|terminate|exit)?\W*$", re.IGNORECASE)


# A log reader's result is what the system logged: its error lines are data, not the call failing. Only a
# failure of the call itself counts there (the pod or file not found, access denied, the reader timing out).
_LOG_WORDS: Final = frozenset({"log", "logs", "journal", "journalctl", "syslog", "events"})
_LOG_READ_FAILED: Final = re.compile(
    r"""^[\s"'\[{(]*+(error from server|not found|no such|denied|forbidden|"""
    r"""unauthori[sz]ed|cannot\b|can't\b|could not|unable to|timed? ?out)""", re.IGNORECASE)


@functools.lru_cache(maxsize=10_000)
def reads_logs(tool: str | None) -> bool:
    """Whether a tool's name says it reads logs or events (kubectl_logs, getLogEvents, read_journal)."""
    return tool is not None and not _LOG_WORDS.isdisjoint(name_words(tool))


def _text(step: Step) -> str | None:
    return None if step.result is None else step.result.text


def _anywhere(text: str) -> bool:
    return ("Error" in text or "ERROR" in text or "Traceback" in text) and \
        _RESULT_ERROR_ANYWHERE.search(text) is not None


# The last two steps asked about and their answers (detectors ask in turn).
_recent: Final[list] = [None, None, None, None]


def tool_error(step: Step) -> str | None:
    """The basis on which a tool step failed (status or error type; else its result text), or None."""
    if step.error:
        return STRUCTURE
    recent = _recent
    if recent[0] is step:
        return recent[1]
    if recent[2] is step:
        return recent[3]
    text = _text(step)
    if text is None:
        basis = None
    elif reads_logs(step.tool):
        basis = CONTENT if _LOG_READ_FAILED.match(text) else None
    else:
        basis = CONTENT if _RESULT_ERROR.match(text) or _anywhere(text) else None
    recent[2], recent[3], recent[0], recent[1] = recent[0], recent[1], step, basis
    return basis


def transient(step: Step) -> bool:
    """A failure that a plain retry may cure (timeouts, rate limits, unavailable services), by its error type, its
    error message (exception message or status description) or its result."""
    return any(text and _TRANSIENT.search(text) for text in (step.error_type, step.error_message, _text(step)))


def _output_says(pattern: re.Pattern[str], step: Step) -> bool:
    """Whether the model output (content capture on) matches `pattern` anywhere."""
    text = step.output_preview
    if not text:
        return False
    return pattern.search(text) is not None


def claims_success(step: Step) -> bool:
    """Model output (its preview) claiming success, not negated nearby (content capture on)."""
    return says_success(step.output_preview)


def says_success(text: str | None) -> bool:
    """Text claiming success, not negated nearby."""
    if not text:
        return False
    for match in _SUCCESS_CLAIM.finditer(text):
        start = match.start()
        if not _NEGATED_CLAIM.search(text[max(start - 24, 0):start]) and \
                not _CONDITIONAL_CLAIM.search(text[max(start - 60, 0):start]):
            return True
    return False


def explains_failure(step: Step) -> bool:
    """Model output telling the user the work cannot be done: an apology, an impossibility (content capture on; all
    it said when read, not just the preview)."""
    said = step.said
    return _EXPLAINED_FAILURE.search(said) is not None if said else _output_says(_EXPLAINED_FAILURE, step)


def refused_for_state(step: Step) -> bool:
    """A failed call refused for good for the state its record was in, which its refusal names ("must be suspended",
    "Non-delivered order cannot be exchanged"; content capture on)."""
    return not transient(step) and _STATE_CONDITION.search(step.result_text or step.error_message or "") is not None


def defers(step: Step) -> str | None:
    """Model output telling the user a change can be done later, once some state is reached (content capture on;
    all it said when read, not just the preview): the words that say so, or None."""
    text = step.said or step.output_preview
    match = _DEFERS.search(text) if text else None
    return None if match is None else match.group(0)


def unhealthy(step: Step) -> bool:
    """A tool result showing the system unhealthy (failing pods, a 5xx answer), the call itself having worked."""
    text = _text(step)
    return text is not None and _UNHEALTHY.search(text) is not None


def limit_text(step: Step) -> bool:
    """Model output carrying a framework's "stopped at the limit" message (content capture on)."""
    return _output_says(LIMIT_TEXT, step)


def acknowledged_only(step: Step) -> bool:
    """A tool result that acknowledges a request without showing its outcome (content capture on)."""
    text = _text(step)
    return text is not None and _ACKNOWLEDGED.match(text) is not None


def states_change(step: Step) -> bool:
    """Model output saying it will do something different next (content capture on)."""
    return _output_says(_STATED_CHANGE, step)


def stated_tool(step: Step) -> str | None:
    """The tool a model output says it will use, if it names one (content capture on)."""
    if not step.output_preview:
        return None
    match = _STATED_TOOL.search(step.output_preview)
    return match.group(1) if match else None


_HANDS_OVER_KNOWN: Final[dict[str, bool]] = {}


def hands_over(tool: str | None) -> bool:
    """Whether a tool hands the conversation over to a person (its name says so), cached per name."""
    if tool is None:
        return False
    known = _HANDS_OVER_KNOWN.get(tool)
    if known is None:
        known = remember(_HANDS_OVER_KNOWN, tool, _HANDS_OVER.search(tool) is not None, 10_000)
    return known


def gives_up(text: str) -> str | None:
    """A handover reason saying the problem is still there, without a cause the agent could not remove: the words
    that say so, or None."""
    match = _PERSISTS.search(text)
    return match.group(0) if match is not None and _BLOCKED.search(text) is None else None


def claims_all_done(text: str) -> str | None:
    """Text claiming every step or check was done ("all troubleshooting steps have been completed"): the claim, or
    None. Not when it names a cause the agent cannot remove (a locked SIM, an expired contract): handing over is
    then what was left to do, and the claim may hold."""
    match = _EXHAUSTED.search(text)
    return None if match is None or _BLOCKED.search(text) is not None else match.group(0)


RECORD_ID: Final = re.compile(r'"(\w*_id|id)"\s*:\s*"([^"\\]{2,64})"')  # "order_id": "#W123", in JSON
# The agent telling the user something is not among their records ("I don't see a Seattle address on file").
_DENIES_ON_RECORD: Final = re.compile(
    r"\bI (?:do not|don['\u2019]t|can ?not|can['\u2019]t|could not|couldn['\u2019]t|did not|didn['\u2019]t) "
    r"(?:see|find|locate|have)\b[^.?!\n]{0,80}?\b(?:on file|account|records?|orders?)\b|"
    r"\bonly \w+ I have on file\b", re.IGNORECASE)
_ONE_RECORD: Final = re.compile(r"\b(?:this|that) (?:order|account|record)\b", re.IGNORECASE)


def named_record(args: str | None) -> str | None:
    """The record a call's arguments name first (the value of its first `*_id` or `id` key; content capture on)."""
    match = RECORD_ID.search(args) if args else None
    return match.group(2) if match is not None else None


def named_records(args: str | None) -> frozenset[str] | None:
    """Every record a call's arguments name (each `*_id` or `id` value); None when they name none or are not
    captured."""
    records = frozenset(m.group(2) for m in RECORD_ID.finditer(args)) if args else None
    return records or None


def same_record(failed: Step, step: Step) -> bool:
    """Whether a call names the record a failed call named (content capture on): a change done another way (an
    exchange refused, the order's items modified instead)."""
    record = named_record(failed.args_text)
    return record is not None and record == named_record(step.args_text)


def denies_on_record(text: str) -> str | None:
    """Text telling the user something is not among their records, not about one record it names ("in this
    order"): the words that say so, or None."""
    match = _DENIES_ON_RECORD.search(text)
    return None if match is None or _ONE_RECORD.search(match.group(0)) else match.group(0)


def says_nothing(text: str) -> bool:
    """Model text that tells nobody anything: empty, or a bare control token ("###STOP###")."""
    return _SILENT.match(text) is not None
