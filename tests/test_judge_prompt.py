"""The judge's transcript, its prompt, and the strict reading of its answers."""

from __future__ import annotations

import json

import pytest

from mastwatch.collector.judge.prompt import DEFINITIONS, AnswerRejected, messages, parse_answer
from mastwatch.collector.judge.transcript import build_transcript
from mastwatch.collector.model.content import Content
from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.steps import Step, StepKind


def make_step(i: int, kind: StepKind = StepKind.TOOL, **kw) -> Step:
    return Step(b"t" * 16, i.to_bytes(8, "big"), b"\0" * 8 if i else b"", kind, kw.pop("name", f"step {i}"),
                1_000_000_000 * i, 1_000_000_000 * i + 500, "svc", **kw)


def run_steps() -> list[Step]:
    return [
        make_step(0, StepKind.AGENT, name="invoke_agent support", agent="support"),
        make_step(1, StepKind.LLM, model="gpt-4.1-mini", input_tokens=900, output_tokens=40,
                  finish_reasons=("tool_calls",)),
        make_step(2, tool="get_order", args=Content({"order_id": "A17"}), result=Content("not found"), error=True,
                  error_type="NotFound", error_message="order A17 does not exist"),
        make_step(3, StepKind.LLM, model="gpt-4.1-mini", output_preview="Your order has shipped.",
                  finish_reasons=("stop",)),
        make_step(4, tool="refund", args=Content({"amount": 30}), agent="billing"),
    ]


IDS = [i.to_bytes(8, "big").hex() for i in range(5)]


def test_transcript_shows_each_step_with_its_id_and_previews() -> None:
    t = build_transcript(run_steps(), "support", max_steps=200, max_chars=20_000)
    lines = t.text.splitlines()
    assert [line[1:17] for line in lines] == IDS and t.span_ids == set(IDS) and (t.steps, t.omitted) == (5, 0)
    assert lines[0] == f'[{IDS[0]}] +0.0s agent "invoke_agent support"'
    assert lines[1] == f"[{IDS[1]}] +1.0s llm gpt-4.1-mini tokens_in=900 tokens_out=40 finish=tool_calls"
    assert lines[2] == (f'[{IDS[2]}] +2.0s tool get_order args={{"order_id":"A17"}} result="not found" '
                        'ERROR=NotFound message="order A17 does not exist"')
    assert lines[3].endswith('finish=stop output="Your order has shipped."')
    assert lines[4].endswith('tool refund args={"amount":30} agent="billing"')  # another agent's step is marked


def test_transcript_is_bounded_and_keeps_both_ends() -> None:
    steps = [make_step(i, tool="poll", args=Content({"i": i, "pad": "x" * 100})) for i in range(1000)]
    t = build_transcript(steps, "a", max_steps=50, max_chars=100_000)
    assert t.omitted == 950 and len(t.span_ids) == 50 and "[... 950 steps left out ...]" in t.text
    assert steps[0].span_hex in t.span_ids and steps[-1].span_hex in t.span_ids
    assert steps[500].span_hex not in t.span_ids
    t = build_transcript(steps, "a", max_steps=200, max_chars=5000)
    assert len(t.text) <= 5000 + 40 and t.omitted == 1000 - len(t.span_ids)
    assert steps[0].span_hex in t.span_ids and steps[-1].span_hex in t.span_ids


def test_prompt_states_all_fourteen_modes_and_the_transcript() -> None:
    t = build_transcript(run_steps(), "support", 200, 20_000)
    system, user = messages(t, ["FM-1.1", "FM-2.4"], "shop", "support")
    assert system["role"] == "system" and user["role"] == "user"
    assert set(DEFINITIONS) == set(MODES)
    for code, mode in MODES.items():
        assert f"- {code} {mode.name}: {DEFINITIONS[code]}" in system["content"]
    assert '"modes"' in system["content"] and "evidence" in system["content"]
    assert t.text in user["content"] and 'agent "support" (service "shop"): 5 steps' in user["content"]
    assert user["content"].rstrip().endswith("Assess these modes: FM-1.1, FM-2.4.")


def good(**override) -> dict:
    doc = {"modes": {"FM-1.1": {"answer": "yes", "confidence": 0.7, "evidence": [IDS[4]],
                                "reason": "refunded without\n the confirmation it needs"},
                     "FM-2.4": {"answer": "no", "confidence": 0.6, "evidence": [], "reason": "nothing withheld"}}}
    doc["modes"]["FM-1.1"].update(override)
    return doc


def parse(doc, tolerant: bool = False):
    text = doc if isinstance(doc, str) else json.dumps(doc)
    return parse_answer(text, ["FM-1.1", "FM-2.4"], set(IDS), tolerant)


def test_a_well_formed_answer_is_read() -> None:
    got = parse(good(evidence=[IDS[4].upper(), IDS[4]]))
    assert got["FM-1.1"].present and got["FM-1.1"].evidence == (IDS[4],) and got["FM-1.1"].confidence == 0.7
    assert got["FM-1.1"].reason == "refunded without the confirmation it needs"  # one line
    assert not got["FM-2.4"].present and got["FM-2.4"].evidence == ()


@pytest.mark.parametrize(("doc", "reason"), [
    ("Sure! FM-1.1: yes", "malformed_json"),
    ('{"modes": {"FM-1.1": ', "malformed_json"),
    ([1, 2], "missing_field"),
    ({"answers": {}}, "missing_field"),
    ({"modes": {**good()["modes"], "FM-9.9": good()["modes"]["FM-2.4"]}}, "unknown_mode"),
    ({"modes": {**good()["modes"], "FM-1.3": good()["modes"]["FM-2.4"]}}, "unasked_mode"),
    ({"modes": {"FM-1.1": good()["modes"]["FM-1.1"]}}, "missing_mode"),
    ({"modes": {"FM-1.1": good()["modes"]["FM-1.1"], "FM-2.4": "no"}}, "missing_field"),
    (good(reason=""), "missing_field"),
    ({"modes": {"FM-1.1": {"answer": "yes", "evidence": [IDS[4]], "reason": "r"}, "FM-2.4": good()["modes"]["FM-2.4"]}},
     "missing_field"),
    (good(answer="maybe"), "bad_value"),
    (good(answer=True), "bad_value"),
    (good(confidence=1.5), "bad_value"),
    (good(confidence="high"), "bad_value"),
    (good(confidence=True), "bad_value"),
    (good(evidence=IDS[4]), "bad_value"),
    (good(evidence=["ffffffffffffffff"]), "unknown_evidence"),
    (good(evidence=["step 4"]), "unknown_evidence"),
    (good(evidence=[]), "missing_evidence"),
])
def test_a_bad_answer_is_rejected_with_its_reason(doc, reason: str) -> None:
    with pytest.raises(AnswerRejected) as e:
        parse(doc)
    assert e.value.reason == reason


def test_tolerant_reading_takes_the_object_out_of_a_fence_or_prose() -> None:
    body = json.dumps(good())
    for text in (f"```json\n{body}\n```", f"Here is my assessment:\n```\n{body}\n```\nThanks.", f"Answer: {body}"):
        assert parse(text, tolerant=True)["FM-1.1"].present
        with pytest.raises(AnswerRejected):
            parse(text)
    with pytest.raises(AnswerRejected) as e:  # tolerance finds the object, strictness still applies to it
        parse(f"```json\n{json.dumps(good(evidence=['ffffffffffffffff']))}\n```", tolerant=True)
    assert e.value.reason == "unknown_evidence"
    with pytest.raises(AnswerRejected) as e:
        parse("```json\n{not json}\n```", tolerant=True)
    assert e.value.reason == "malformed_json"
