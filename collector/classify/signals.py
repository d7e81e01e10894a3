"""What steps say, read from their structure first and their captured content (previews) second.

Each helper returns the basis it rests on, so that a finding can say whether it needed content capture."""

from __future__ import annotations

import re

from ..steps import Step

STRUCTURE = "structure"
CONTENT = "content"

# A tool result reporting a failure, read at its start (a leading quote or bracket of JSON is skipped).
_RESULT_ERROR = re.compile(
    r"""^[\s"'\[{(]*(error\b|err:|exception\b|traceback\b|fail(ed|ure)?\b|fatal\b|invalid\b|wrong\b|not found\b|
    no (data|results?|such|matching)\b|denied\b|forbidden\b|unauthori[sz]ed\b|cannot\b|can't\b|could not\b|
    unable to\b|timed? ?out\b|"?error"?\s*:\s*(?!null|none|false|""|\{\}|\[\]))""",
    re.IGNORECASE | re.VERBOSE)
_RESULT_ERROR_ANYWHERE = re.compile(r"Traceback \(most recent call last\)|\n\s*ERRORS?:|^\s*\S+Error: ", re.MULTILINE)
# Errors that go away on their own: retrying them is not ignoring them.
_TRANSIENT = re.compile(r"time(d)? ?out|timeout|temporar|unavailable|rate.?limit|too many requests|\b429\b|\b50[234]\b|"
                        r"connection (reset|refused|error)|try again later|overloaded|throttl", re.IGNORECASE)
# A model claiming the work is done and right.
_SUCCESS_CLAIM = re.compile(
    r"\b(successfully|succeeded|has been (fixed|resolved|completed|updated|created|booked|cancell?ed|applied|"
    r"restarted|deployed|changed|processed|done)|is (now )?(fixed|resolved|working|complete|done)|"
    r"all (the )?tests (now )?pass|tests? (now )?pass(es|ed)?\b|verified|confirmed that|works (correctly|as expected)|"
    r"i have (fixed|resolved|completed|updated|created|booked|applied|restarted|deployed)|task (is )?complete)",
    re.IGNORECASE)
_NEGATED_CLAIM = re.compile(r"\b(not|n't|unable|could not|failed|unsuccessful|error)\b", re.IGNORECASE)
# A framework's own text when it stopped a run at its limit (CrewAI, LangChain, LlamaIndex, AutoGen ...).
_LIMIT_TEXT = re.compile(
    r"stopped due to (iteration|time) limit|reached (the )?max(imum)? (number of )?(iterations|steps|turns|rounds)|"
    r"max(imum)? (number of )?(iterations|steps|turns|rounds|messages) (reached|exceeded)|recursion limit of \d+|"
    r"max_?turns|max_?iterations? (reached|exceeded)", re.IGNORECASE)


def _text(step: Step) -> str | None:
    return None if step.result is None else step.result.preview


def tool_error(step: Step) -> str | None:
    """The basis on which a tool step failed (status or error type; else its result text), or None."""
    if step.error:
        return STRUCTURE
    text = _text(step)
    if text is not None and (_RESULT_ERROR.match(text) or _RESULT_ERROR_ANYWHERE.search(text)):
        return CONTENT
    return None


def transient(step: Step) -> bool:
    """A failure that a plain retry may cure (timeouts, rate limits, unavailable services)."""
    return any(text and _TRANSIENT.search(text) for text in (step.error_type, _text(step)))


def claims_success(step: Step) -> bool:
    """Model output claiming success, not negated nearby (content capture on)."""
    text = step.output_preview
    if not text:
        return False
    match = _SUCCESS_CLAIM.search(text)
    return match is not None and not _NEGATED_CLAIM.search(text[max(match.start() - 24, 0):match.start()])


def limit_text(step: Step) -> bool:
    """Model or agent output carrying a framework's "stopped at the limit" message."""
    return any(text and _LIMIT_TEXT.search(text) for text in (step.output_preview, _text(step)))
