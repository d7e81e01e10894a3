"""The judge's prompt and the strict reading of its answer.

The prompt states the 14 failure modes in our words, shows the transcript with its step ids and asks, for
each mode assessed, a JSON entry: answer yes/no, confidence, evidence step ids, a one-line reason. An answer
that does not hold exactly that is rejected as a whole (with the reason, for the count), never half trusted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence

from ..model.judgement import Assessment
from ..model.modes import MODES
from .transcript import Transcript

DEFINITIONS: dict[str, str] = {
    "FM-1.1": "the agent breaks an explicit requirement or constraint of its task or of the policy it works "
              "under: it acts without a confirmation it was told to get, or does something nobody asked for.",
    "FM-1.2": "the agent steps outside the role it was given: it uses tools that are not its own, takes over "
              "another agent's job, or answers from its own assumptions where its role says to consult a tool.",
    "FM-1.3": "the agent does again a step already done: the same tool call with the same or trivially "
              "different arguments, the same lookup or question, or a cycle such as A, B, A, B.",
    "FM-1.4": "earlier context is lost: the prompt shrinks while the run goes on, information already given is "
              "asked for again, or the agent falls back to an earlier state as if later steps had not happened.",
    "FM-1.5": "the agent does not stop when it should: it runs into an iteration, recursion or turn limit, keeps "
              "calling tools after the goal was reached or became impossible, or ignores a wish to end.",
    "FM-2.1": "the dialogue or process starts over in the middle of the run and the progress made is lost.",
    "FM-2.2": "faced with missing or ambiguous information, the agent guesses instead of asking: it passes a tool "
              "identifiers, amounts or other values that appear nowhere earlier in the run.",
    "FM-2.3": "the agent drifts away from its objective and spends steps on work unrelated to it.",
    "FM-2.4": "the agent holds information its counterpart (the user or another agent) needs, such as an error, "
              "a better option, a fee or a limitation, and does not pass it on.",
    "FM-2.5": "the agent disregards what the user, another agent or a tool told it: it goes ahead after a "
              "refusal, or carries on as if a tool error had not happened.",
    "FM-2.6": "what the agent does differs from what it says: it announces one check or action and performs "
              "another, or calls a tool with values other than those it just reasoned out.",
    "FM-3.1": "the run ends before its objective is met or before needed information was exchanged: it stops "
              "right after an unresolved error, or answers without doing the work.",
    "FM-3.2": "the agent changes state (writes, applies, books, restarts, deletes) and finishes without checking "
              "the outcome, or checks only part of it.",
    "FM-3.3": "the agent checks but concludes wrongly: it claims success (done, fixed, all tests pass) while its "
              "own evidence, such as a failed call, an error output or a bad status, shows otherwise.",
}

SYSTEM = """You review one run of an LLM agent, recorded as OpenTelemetry spans, for failure modes of the MAST \
taxonomy (Multi-Agent System Failure Taxonomy). The 14 modes, by code:

{definitions}

How to judge:
- Judge only from the transcript. Each line is one step: [step id] time since the run started, kind (llm: a \
model call; tool: a tool call; agent: an agent invocation), then what was recorded: tool name, argument and \
result previews, model output previews, token counts, finish reasons, errors. Previews are cut at 160 \
characters; the user's request and the full messages are not shown.
- Answer "yes" only when the transcript shows the mode; when it does not, or you cannot tell, answer "no".
- evidence: the ids of the steps that show the mode, copied from the square brackets; only ids from the \
transcript; at least one for a "yes", and none is needed for a "no".
- confidence: how sure you are of your answer, from 0 to 1.
- reason: one line.

Reply with one JSON object and nothing else, in exactly this shape, with one entry for each mode you are \
asked about and no other:
{{"modes": {{"FM-2.3": {{"answer": "yes", "confidence": 0.8, "evidence": ["0123456789abcdef"], \
"reason": "one line"}}}}}}"""

USER = """Run of agent {agent} (service {service}): {steps} steps{omitted}.

Transcript:
{transcript}

Assess these modes: {modes}."""

_SYSTEM_TEXT = SYSTEM.format(definitions="\n".join(
    f"- {code} {MODES[code].name}: {text}" for code, text in DEFINITIONS.items()))
_SPAN_ID = re.compile(r"^[0-9a-f]{16}$")
_FENCED = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)
REASON_CHARS = 300


def messages(transcript: Transcript, modes: Sequence[str], service: str, agent: str) -> list[dict[str, str]]:
    omitted = f", of which {transcript.omitted} are left out in the middle" if transcript.omitted else ""
    user = USER.format(agent=json.dumps(agent, ensure_ascii=False), service=json.dumps(service, ensure_ascii=False),
                       steps=transcript.steps, omitted=omitted, transcript=transcript.text, modes=", ".join(modes))
    return [{"role": "system", "content": _SYSTEM_TEXT}, {"role": "user", "content": user}]


class AnswerRejected(ValueError):
    """The model's answer does not hold what was asked; `reason` is a short label for the count."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def _extract(text: str) -> object:
    """The JSON object in a reply that wraps it in a fenced code block or in prose."""
    for block in _FENCED.findall(text):
        try:
            return json.loads(block)
        except ValueError:
            continue
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            return json.loads(text[start:end + 1])
        except ValueError:
            pass
    raise AnswerRejected("malformed_json", "no JSON object in the answer")


def _entry(code: str, entry: object, span_ids: Collection[str]) -> Assessment:
    if not isinstance(entry, dict):
        raise AnswerRejected("missing_field", f"{code}: not an object")
    for key in ("answer", "confidence", "evidence", "reason"):
        if key not in entry:
            raise AnswerRejected("missing_field", f"{code}: no {key!r}")
    answer, confidence, evidence, reason = entry["answer"], entry["confidence"], entry["evidence"], entry["reason"]
    if answer not in ("yes", "no"):
        raise AnswerRejected("bad_value", f"{code}: answer {answer!r} is not yes or no")
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        raise AnswerRejected("bad_value", f"{code}: confidence {confidence!r} is not a number from 0 to 1")
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise AnswerRejected("bad_value", f"{code}: evidence is not a list of step ids")
    ids = tuple(dict.fromkeys(e.strip().lower() for e in evidence))
    for span_id in ids:
        if not _SPAN_ID.match(span_id) or span_id not in span_ids:
            raise AnswerRejected("unknown_evidence", f"{code}: {span_id!r} is not a step of this trace")
    if answer == "yes" and not ids:
        raise AnswerRejected("missing_evidence", f"{code}: a yes without evidence")
    if not isinstance(reason, str) or not reason.strip():
        raise AnswerRejected("missing_field", f"{code}: no reason")
    reason = " ".join(reason.split())
    if len(reason) > REASON_CHARS:
        reason = reason[:REASON_CHARS - 1] + "…"
    return Assessment(code, answer == "yes", float(confidence), ids, reason)


def parse_answer(text: str, modes: Collection[str], span_ids: Collection[str],
                 tolerant: bool = False) -> dict[str, Assessment]:
    """Every mode asked, assessed with evidence from the trace; raises AnswerRejected otherwise. `tolerant`
    also takes a JSON object from a fenced code block or surrounding prose."""
    try:
        doc = json.loads(text)
    except ValueError:
        if not tolerant:
            raise AnswerRejected("malformed_json", "the answer is not JSON") from None
        doc = _extract(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("modes"), dict):
        raise AnswerRejected("missing_field", 'no "modes" object')
    answered = doc["modes"]
    for code in answered:
        if code not in MODES:
            raise AnswerRejected("unknown_mode", f"{code!r} is not a MAST failure mode")
        if code not in modes:
            raise AnswerRejected("unasked_mode", f"{code} was not asked")
    missing = [code for code in modes if code not in answered]
    if missing:
        raise AnswerRejected("missing_mode", f"no answer for {', '.join(missing)}")
    return {code: _entry(code, answered[code], span_ids) for code in modes}
