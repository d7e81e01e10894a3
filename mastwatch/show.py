"""`mastwatch show TRACE_ID`: one run from the store, in the terminal: what it was (service, agent, models, time,
spend, findings' waste), its steps in the order they started, each step that is evidence of a finding marked with
the mode's code, then the findings with their reasons and evidence. The same run as a page: `mastwatch report
--trace` and `/traces/{trace_id}` on the metrics port (dashboards/trace_page.py)."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import Any

from mastwatch.config import Config
from mastwatch.exporter.store.queries import StoredRun, stored_run, trace_id_of

INDENT = "    "


def usd(value: float) -> str:
    return f"${value:,.6f}" if value else "$0"


def when(ns: int) -> str:
    seconds, fraction = divmod(int(ns), 1_000_000_000)
    return f"{datetime.fromtimestamp(seconds, tz=timezone.utc):%Y-%m-%d %H:%M:%S}.{fraction // 1_000_000:03d} UTC"


def seconds(ns: int) -> str:
    return f"{int(ns) / 1e9:.3f}s"


def step_label(step: dict[str, Any]) -> str:
    """A step's name as read: the tool of a tool call, else its span name (without the model it ends with, which
    has its own column)."""
    if step["tool"]:
        return step["tool"]
    name, model = step["name"], step["model"]
    return name[:-len(model)].rstrip() or name if model and name.endswith(" " + model) else name


def clipped(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def plural(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def tokens(step: dict[str, Any]) -> str:
    if not step["input_tokens"] and not step["output_tokens"]:
        return ""
    read, written = step["cache_read_tokens"], step["cache_write_tokens"]
    cache = [f"{read:,} read from cache"] * bool(read) + [f"{written:,} written to cache"] * bool(written)
    return f"{step['input_tokens']:,}→{step['output_tokens']:,}" + (f" ({', '.join(cache)})" if cache else "")


def previews(step: dict[str, Any]) -> list[tuple[str, str]]:
    """The content stored of a step (with store_content): its arguments, and its result (a model call's output)."""
    return [("output" if what == "result" and step["kind"] == "llm" else what, step[f"{what}_preview"])
            for what in ("args", "result") if step[f"{what}_preview"]]


def fingerprint(step: dict[str, Any]) -> str:
    return f"{int(step['args_fingerprint']):016x}" if step["args_fingerprint"] else ""


def models(stored: StoredRun) -> str:
    """The run's models, each with its calls and USD when the store holds them (what a run calling two costs)."""
    if not stored.spend:
        return ", ".join(stored.run["models"]) or "(none named)"
    return ", ".join(f"{m['model']} ({plural(m['calls'], 'call')}, {usd(m['cost_usd']) if m['priced'] else 'no price'})"
                     for m in stored.spend)


def release(run: dict[str, Any]) -> str:
    """A run's version and environment as one phrase: "3.2.0 in production"."""
    version, environment = run["version"], run["environment"]
    return f"{version or '(no version)'} in {environment}" if environment else version


def header(stored: StoredRun) -> list[tuple[str, str]]:
    """The run's verdict as (label, value) lines."""
    r = stored.run
    repeats = plural(r["repeated_steps"], "repeated step")
    waste = usd(r["wasted_cost_usd"]) + (f" and {seconds(round(r['wasted_seconds'] * 1e9))} on {repeats}"
                                         if r["repeated_steps"] else "")
    return [("trace", r["trace_id"]), ("service", r["service"]), ("agent", r["agent"]),
            *([("release", release(r))] if r["version"] or r["environment"] else []),
            ("models", models(stored)),
            ("time", f"{when(r['started_ns'])}, lasted {seconds(int(r['ended_ns']) - int(r['started_ns']))}"),
            ("steps", f"{r['steps']} ({plural(r['llm_calls'], 'model call')}, {plural(r['tool_calls'], 'tool call')})"),
            ("tokens", f"{r['input_tokens']:,} input, {r['output_tokens']:,} output"),
            ("cost", usd(r["cost_usd"]) + (" (no price known for its models)" if not r["cost_usd"] and
                                           r["input_tokens"] + r["output_tokens"] else "")),
            ("wasted", waste), ("completion", r["completion"]),
            ("findings", " ".join(r["failure_modes"]) or "none")]


def _aligned(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths,
                                                                                             strict=True))).rstrip()
            for row in rows]


def format_run(stored: StoredRun) -> str:
    lines = [f"{label:<11}{value}" for label, value in header(stored)]
    lines.append("")
    if stored.steps:
        lines.append("steps, in the order they started (tokens: input→output; *: evidence of the findings named):")
        table = [["", "offset", "kind", "span", "step", "model", "tokens", "cost", "args", "error", "findings"]]
        notes: dict[int, list[str]] = {}
        for i, s in enumerate(stored.steps, 1):
            codes = stored.marks.get(s["span_id"], [])
            table.append(["*" if codes else "", f"+{stored.offset_s(s['started_ns']):.3f}s", s["kind"], s["span_id"],
                          clipped(step_label(s)), clipped(s["model"], 30), tokens(s),
                          usd(s["cost_usd"]) if s["cost_usd"] else "", fingerprint(s),
                          (s["error_type"] or "error") if s["error"] else "", " ".join(codes)])
            for what, preview in previews(s):
                notes.setdefault(i, []).append(f"{what}: {preview}")
        for i, line in enumerate(_aligned(table, {1, 6, 7})):
            lines.append(INDENT + line)
            lines.extend(INDENT * 3 + note.replace("\n", " ") for note in notes.get(i, []))
    else:
        lines.append(f"steps: not stored. {stored.no_steps}")
    lines.append("")
    if stored.findings:
        lines.append("findings:")
        for f in stored.findings:
            lines.append(f"{INDENT}{f['failure_mode']} {f['name']} ({f['category']}), confidence "
                         f"{f['confidence']:.2f}, basis {f['basis']}")
            lines.append(f"{INDENT * 2}reason: {f['reason']}")
            if f["evidence"]:
                lines.append(f"{INDENT * 2}evidence: {' '.join(f['evidence'])}")
            recurrence = stored.recurrence.get(f["signature"])
            if recurrence is not None:
                lines.append(f"{INDENT * 2}{recurrence_line(f['signature'], recurrence)}")
                if "mute" in recurrence:
                    lines.append(f"{INDENT * 2}{mute_line(recurrence['mute'])}")
                if "resolution" in recurrence:
                    lines.append(f"{INDENT * 2}{resolution_line(recurrence['resolution'])}")
    else:
        lines.append("findings: none")
    if stored.reviews:
        lines.append("")
        lines.append("reviews (the latest per mode):")
        lines.extend(f"{INDENT}{review_line(r)}" for r in stored.reviews)
    return "\n".join(lines)


def recurrence_line(signature: str, recurrence: dict[str, Any]) -> str:
    """'the same problem (signature 0123456789abcdef): 42 runs since 2026-05-01 12:00:00.000 UTC; reviewed 3
    confirmed, 5 dismissed'."""
    runs = int(recurrence["runs"])
    seen = "this run only" if runs <= 1 else f"{plural(runs, 'run')} since {when(recurrence['first_ns'])}"
    confirmed, dismissed = int(recurrence["confirmed"] or 0), int(recurrence["dismissed"] or 0)
    reviewed = f"; reviewed {confirmed} confirmed, {dismissed} dismissed" if confirmed or dismissed else ""
    return f"the same problem (signature {signature}): {seen}{reviewed}"


def mute_line(mute: dict[str, Any]) -> str:
    """'muted by ana since 2026-05-01 12:00:00.000 (until 2026-05-08 12:00:00.000, or 100 more runs; 3 since): polls
    by design: ...'."""
    by = f" by {mute['muted_by']}" if mute["muted_by"] else ""
    ends = ([f"until {mute['muted_until']}"] if mute["muted_until"] else []) + (
        [f"{int(mute['until_runs']) - int(mute['runs_since'])} more runs"] if int(mute["until_runs"]) else [])
    since = f"; {plural(int(mute['runs_since']), 'run')} since"
    until = f" ({', or '.join(ends)}{since})" if ends else f" ({since[2:]})"
    note = f": {mute['note']}" if mute["note"] else ""
    return f"muted{by} since {mute['muted_at']}{until}{note}: not counted in the alerting series"


def resolution_line(resolution: dict[str, Any]) -> str:
    """'marked fixed by ana at 2026-05-01 12:00:00.000: new prompt; regressed: 3 runs since'."""
    by = f" by {resolution['resolved_by']}" if resolution["resolved_by"] else ""
    note = f": {resolution['note']}" if resolution["note"] else ""
    runs = int(resolution["runs_since"])
    since = f"; regressed: {plural(runs, 'run')} since" if runs else "; no run since"
    return f"marked fixed{by} at {resolution['resolved_at']}{note}{since}"


def review_line(review: dict[str, Any]) -> str:
    """'FM-3.3 dismissed by ana, 2026-05-01 12:00:00.000 UTC: the check passed'."""
    by = f" by {review['reviewer']}" if review["reviewer"] else ""
    note = f": {review['note']}" if review["note"] else ""
    return f"{review['failure_mode']} {review['verdict']}{by}, {when(review['reviewed_ns'])}{note}"


def load(config: Config, text: str, command: str) -> tuple[int, StoredRun | None]:
    """The run `text` names from the configured store: (0, the run), or (exit status, None) after one line on
    stderr saying what is wrong."""
    from mastwatch import remote

    try:
        trace_id = trace_id_of(text)
    except ValueError as e:
        print(f"mastwatch {command}: {e}", file=sys.stderr)
        return 2, None
    store = config.exporters.store
    status, stored = remote.on_store(config, command, lambda engine: stored_run(engine, store.database, trace_id,
                                                                                store.steps),
                                     lambda: remote.ask_run(config, trace_id))
    if status:
        return status, None
    if stored is None:
        where = store.path if store.engine == "chdb" else f"database {store.database}"
        print(f"mastwatch {command}: trace {trace_id} is not in the store ({where})", file=sys.stderr)
        return 1, None
    return 0, stored


def main_show(config: Config, text: str) -> int:
    status, stored = load(config, text, "show")
    if stored is None:
        return status
    print(format_run(stored))
    return 0
