"""Render the tau2-bench runs as annotators read them (tests/data/README.md, "Labels: tau2-bench-labels/").

Each run becomes numbered steps (user, assistant text, tool call with arguments, tool result) with the span id
of every agent step as `tests/otlp_corpus.py` emits it, the outcome and the expected actions above. The
domain's policy (the agent's system instructions) is written once per domain.

    python tests/data/tau2-bench-labels/render.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from otlp_corpus import DATA_DIR, tau2_requests  # noqa: E402


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _spans(request: Any) -> list[tuple[str, str]]:
    """(span id hex, name) of a run's spans in emitted order, root first."""
    return [(span.span_id.hex(), span.name)
            for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def _call(call: dict[str, Any]) -> str:
    return f"{call['name']}({json.dumps(call.get('arguments'), ensure_ascii=False)})"


def render_run(sim: dict[str, Any], task: dict[str, Any], request: Any, source: str, domain: str,
               model: str) -> str:
    spans = _spans(request)
    root = spans[0][0]
    queue = iter(spans[1:])
    reward = sim["reward_info"]
    lines = [f"# run {sim['id']}", f"file: {source}", f"domain: {domain}   agent model: {model}   "
             f"task_id: {sim['task_id']}", f"root span (invoke_agent): {root}", "",
             f"## OUTCOME: reward {reward.get('reward')} ({'passed' if reward.get('reward') == 1 else 'FAILED'}), "
             f"termination: {sim.get('termination_reason')}"]
    if reward.get("db_check"):
        lines.append(f"database check: {json.dumps(reward['db_check'])}")
    for check in reward.get("action_checks") or []:
        action = check["action"]
        lines.append(f"expected action by {action.get('requestor')}: {_call(action)} -> "
                     f"{'done' if check.get('action_match') else 'NOT DONE as expected'}")
    for check in reward.get("env_assertions") or []:
        a = check["env_assertion"]
        lines.append(f"env assertion {a['func_name']}({json.dumps(a.get('arguments'))}): "
                     f"{'met' if check.get('met') else 'NOT MET'}")
    for check in reward.get("nl_assertions") or []:
        lines.append(f"nl assertion: {json.dumps(check, ensure_ascii=False)}")
    for check in reward.get("communicate_checks") or []:
        lines.append(f"communicate check: {json.dumps(check, ensure_ascii=False)}")
    scenario = task.get("user_scenario") or {}
    lines += ["", "## What the simulated user was told (the agent never sees this)",
              json.dumps(scenario.get("instructions"), ensure_ascii=False, indent=1)]
    criteria = task.get("evaluation_criteria") or {}
    if criteria.get("actions"):
        lines += ["", "## Expected actions", *("- " + f"{a.get('requestor', 'assistant')}: {_call(a)}"
                                              for a in criteria["actions"])]
    if criteria.get("communicate_info"):
        lines.append(f"expected to communicate: {json.dumps(criteria['communicate_info'], ensure_ascii=False)}")
    lines += ["", "## Steps"]
    n = 0

    def step(text: str) -> None:
        nonlocal n
        n += 1
        lines.append(f"{n}. {text}")

    for msg in sim["messages"]:
        role = msg["role"]
        if role == "user":
            if _text(msg.get("content")):
                step(f"[user] {_text(msg['content'])}")
            for call in msg.get("tool_calls") or []:
                step(f"[user's own tool call on their device, no agent span] {_call(call)}")
            continue
        if role == "tool":
            who = "user's tool" if msg.get("requestor") == "user" else "tool"
            err = " ERROR" if msg.get("error") else ""
            step(f"[{who} result{err}] {_text(msg.get('content'))}")
            continue
        calls = msg.get("tool_calls") or []
        if msg.get("usage") or msg.get("raw_data"):
            span, name = next(queue)
            assert name.startswith("chat"), (sim["id"], name)
            tag = f"[assistant, chat span {span}]"
        else:
            tag = "[assistant, canned greeting: no span]"
        text = _text(msg.get("content"))
        step(f"{tag} {text}" if text else f"{tag} (no text)")
        for call in calls:
            span, name = next(queue)
            assert name == f"execute_tool {call['name']}", (sim["id"], name)
            step(f"[tool call, execute_tool span {span}] {_call(call)}")
    return "\n".join(lines) + "\n"


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted((DATA_DIR / "runs/tau2-bench").glob("*.json")):
        data = json.loads(path.read_text())
        domain = data["info"]["environment_info"]["domain_name"]
        model = data["info"]["agent_info"]["llm"]
        (out / f"policy-{domain}.md").write_text(data["info"]["environment_info"]["policy"])
        tasks = {t["id"]: t for t in data["tasks"]}
        requests = dict(tau2_requests(path))
        for sim in data["simulations"]:
            text = render_run(sim, tasks[sim["task_id"]], requests[sim["id"]], path.name, domain, model)
            (out / f"{sim['id']}.md").write_text(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
