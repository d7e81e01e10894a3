"""A compact, bounded transcript of a completed trace, kept for the judge after the trace itself is freed.

One line per step, in start order, led by its span id. Content appears only as the previews the steps
already hold (160 characters each); a long trace keeps its first and last steps and says how many were
left out, so that its size is bounded by `max_steps` and `max_chars`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..model.steps import Step, StepKind

_KINDS = {StepKind.LLM: "llm", StepKind.TOOL: "tool", StepKind.AGENT: "agent", StepKind.OTHER: "other"}


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    span_ids: frozenset[str]  # the steps shown: the only ids an answer may cite
    steps: int  # steps in the trace
    omitted: int  # steps left out to keep within the bounds


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def step_line(step: Step, started_ns: int, run_agent: str) -> str:
    parts = [f"[{step.span_hex}] +{max(step.start_ns - started_ns, 0) / 1e9:.1f}s {_KINDS[step.kind]}"]
    if step.kind is StepKind.TOOL:
        parts.append(step.tool or step.name)
        if step.args is not None:
            parts.append(f"args={step.args.preview}")
        if step.result is not None:
            parts.append(f"result={step.result.preview}")
    elif step.kind is StepKind.LLM:
        parts.append(step.model or step.name)
        parts.append(f"tokens_in={step.input_tokens} tokens_out={step.output_tokens}")
        if step.finish_reasons:
            parts.append("finish=" + ",".join(step.finish_reasons))
        if step.output_preview is not None:
            parts.append(f"output={_quoted(step.output_preview)}")
    else:
        parts.append(_quoted(step.name))
    if step.agent and step.agent != run_agent:
        parts.append(f"agent={_quoted(step.agent)}")
    if step.error:
        parts.append(f"ERROR={step.error_type or 'error'}")
        if step.error_message:
            parts.append(f"message={_quoted(step.error_message)}")
    return " ".join(parts)


def build_transcript(steps: Sequence[Step], agent: str, max_steps: int, max_chars: int) -> Transcript:
    """`steps` in start order; `agent` is the run's agent (steps of other agents are marked)."""
    if not steps:
        return Transcript("", frozenset(), 0, 0)
    started = min(s.start_ns for s in steps)
    head_n = min(len(steps), max_steps) // 2 + min(len(steps), max_steps) % 2
    tail_n = min(len(steps), max_steps) - head_n
    head: list[Step] = list(steps[:head_n])
    tail: list[Step] = list(steps[len(steps) - tail_n:]) if tail_n else []
    head_lines = [step_line(s, started, agent) for s in head]
    tail_lines = [step_line(s, started, agent) for s in tail]
    # within max_chars: drop steps from the middle outwards, alternately from the head's end and the tail's start
    size = sum(len(line) + 1 for line in head_lines + tail_lines)
    from_head = True
    while size > max_chars and (head_lines or tail_lines):
        if (from_head and head_lines) or not tail_lines:
            size -= len(head_lines.pop()) + 1
            head.pop()
        else:
            size -= len(tail_lines.pop(0)) + 1
            tail.pop(0)
        from_head = not from_head
    omitted = len(steps) - len(head) - len(tail)
    lines = head_lines + ([f"[... {omitted} steps left out ...]"] if omitted else []) + tail_lines
    return Transcript("\n".join(lines), frozenset(s.span_hex for s in head + tail), len(steps), omitted)
