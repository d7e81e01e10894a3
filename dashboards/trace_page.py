"""One run as a self-contained HTML page (no script, no external asset): what it was, its findings, a timeline of
its steps and the steps as a table, the rows that are evidence of a finding highlighted with the finding's reason
beside them. `mastwatch report --trace` writes it to a file; mastwatch serves it at `/traces/{trace_id}` on the
metrics port, read from its store, with the same bearer token as /metrics and /v1/findings (it shows stored data).
The dashboards' trace tables link to it (`dashboards.trace_view_url`)."""

from __future__ import annotations

import html
import logging
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from mastwatch.collector.model.modes import MODES
from mastwatch.exporter.store.engine import Engine
from mastwatch.exporter.store.mutes import MUTES_PATH, Mute
from mastwatch.exporter.store.queries import StoredRun, stored_run, trace_id_of
from mastwatch.exporter.store.resolutions import RESOLUTIONS_PATH, Resolution
from mastwatch.exporter.store.reviews import MAX_NOTE, MAX_REVIEWER, REVIEWS_PATH, Review
from mastwatch.remote import Reply, write_mute, write_resolution, write_review
from mastwatch.show import (
    fingerprint,
    header,
    mute_line,
    previews,
    recurrence_line,
    resolution_line,
    review_line,
    seconds,
    step_label,
    tokens,
    usd,
)

log = logging.getLogger(__name__)
PATH = "/traces/"
TIMELINE_STEPS = 500  # steps drawn on the timeline at most (the table lists them all)
KIND_COLOURS = {"llm": "#3274d9", "tool": "#56a64b", "agent": "#a352cc", "other": "#8e8e8e"}
STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.4em;margin-bottom:.2em} h1 code{font-size:.85em} h2{border-bottom:2px solid #3274d9;
padding-bottom:.2em;margin-top:1.6em} .sub{color:#555;margin-top:0}
.tiles{display:flex;flex-wrap:wrap;gap:.6em} .tile{background:#f3f5f8;padding:.5em .9em;border-radius:6px}
.tile b{display:block;font-size:1.15em} .tile span{color:#555;font-size:.8em}
table{border-collapse:collapse;font-size:12px;width:100%} td,th{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top} th{background:#f3f5f8} td.n{text-align:right;white-space:nowrap}
tr.evidence td{background:#fff1d6} tr.evidence td:first-child{border-left:4px solid #e02f44}
tr:target td{outline:2px solid #3274d9} .preview{color:#555;font-family:monospace;white-space:pre-wrap;
word-break:break-all;margin-top:2px} .code{font-family:monospace;font-weight:bold;color:#b00020}
.finding{border-left:4px solid #e02f44;background:#fafafa;padding:.5em .9em;margin:.6em 0}
.finding:target{background:#fff1d6} .why{margin:.2em 0} .error{color:#b00020;font-weight:bold}
.note{color:#555;font-style:italic} svg{max-width:100%;height:auto} svg text{font-size:11px}
td.model{max-width:13em;white-space:nowrap;overflow:hidden;text-overflow:ellipsis} td.marks{min-width:14em}
td.step{min-width:18em}
.name{color:#555}
form.review{margin:.4em 0 0;display:flex;flex-wrap:wrap;gap:.4em;align-items:center;font-size:.9em}
form.review input[name=note]{flex:1;min-width:14em} form.review input[name=reviewer]{width:9em}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _timeline(stored: StoredRun) -> str:
    """Each step as a bar from its start to its end on the run's time (an SVG drawn here, no library)."""
    steps = stored.steps[:TIMELINE_STEPS]
    start, end = int(stored.run["started_ns"]), int(stored.run["ended_ns"])
    for s in steps:
        end = max(end, int(s["ended_ns"]))
    span = max(end - start, 1)
    label_w, bar_w, row_h, top = 260, 900, 16, 22
    height = top + row_h * len(steps) + 6
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 10}" height="{height}" '
             f'viewBox="0 0 {label_w + bar_w + 10} {height}" role="img" aria-label="timeline of the steps">']
    for k in range(5):  # the time axis: a grid line and its offset every quarter of the run
        x = label_w + bar_w * k / 4
        parts.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height}" stroke="#e3e3e3"/>'
                     f'<text x="{x:.1f}" y="12" text-anchor="{"end" if k == 4 else "middle" if k else "start"}" '
                     f'fill="#555">+{span * k / 4 / 1e9:.3f}s</text>')
    for i, s in enumerate(steps):
        y = top + i * row_h
        paler = ' fill-opacity="0.55"' if s["error"] else ""
        x = label_w + bar_w * (int(s["started_ns"]) - start) / span
        w = max(bar_w * (int(s["ended_ns"]) - int(s["started_ns"])) / span, 1.5)
        codes = stored.marks.get(s["span_id"], [])
        label = f"{i + 1}. {step_label(s)}"
        label = label if len(label) <= 40 else label[:39] + "…"
        title = (f"{step_label(s)} ({s['kind']}), +{stored.offset_s(s['started_ns']):.3f}s for "
                 f"{seconds(int(s['ended_ns']) - int(s['started_ns']))}" + (" — error" if s["error"] else "")
                 + (f" — evidence of {' '.join(codes)}" if codes else ""))
        stroke = ' stroke="#e02f44" stroke-width="2"' if codes else ""
        parts.append(f'<a href="#span-{_e(s["span_id"])}"><title>{_e(title)}</title>'
                     f'<text x="{label_w - 6}" y="{y + 11}" text-anchor="end" fill="{"#b00020" if codes else "#222"}">'
                     f'{_e(label)}</text><rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row_h - 5}" rx="2" '
                     f'fill="{KIND_COLOURS.get(s["kind"], "#8e8e8e")}"{stroke}{paler}/></a>')
    parts.append("</svg>")
    legend = " ".join(f'<span style="color:{colour}">■</span> {kind}' for kind, colour in KIND_COLOURS.items())
    more = (f'<p class="note">The timeline shows the first {TIMELINE_STEPS} of {len(stored.steps)} steps; the table '
            "lists them all.</p>" if len(stored.steps) > TIMELINE_STEPS else "")
    return (f'<p class="note">{legend}; outlined in red: evidence of a finding; paler: failed. A bar opens its '
            f"step in the table.</p>{''.join(parts)}{more}")


def _steps_table(stored: StoredRun) -> str:
    reasons = {f["failure_mode"]: f["reason"] for f in stored.findings if f["basis"] != "judge"}
    reasons.update({f["failure_mode"]: f["reason"] for f in stored.findings if f["failure_mode"] not in reasons})
    rows = ["<tr><th>#</th><th>offset</th><th>duration</th><th>kind</th><th>step</th><th>model</th><th>tokens "
            "(input→output)</th><th>cost</th><th>args fingerprint</th><th>error</th><th>finding</th></tr>"]
    for i, s in enumerate(stored.steps, 1):
        codes = stored.marks.get(s["span_id"], [])
        stored_content = "".join(f'<div class="preview">{what}: {_e(text)}</div>' for what, text in previews(s))
        finding = "<br>".join(f'<a class="code" href="#finding-{_e(code)}">{_e(code)}</a> {_e(reasons.get(code, ""))}'
                              for code in codes)
        error = f'<span class="error">{_e(s["error_type"] or "error")}</span>' if s["error"] else ""
        rows.append(
            f'<tr id="span-{_e(s["span_id"])}"{" class=evidence" if codes else ""}><td class="n">{i}</td>'
            f'<td class="n">+{stored.offset_s(s["started_ns"]):.3f}s</td>'
            f'<td class="n">{seconds(int(s["ended_ns"]) - int(s["started_ns"]))}</td><td>{_e(s["kind"])}</td>'
            f'<td class="step"><b>{_e(step_label(s))}</b><br><code>{_e(s["span_id"])}</code>'
            + (f' <span class="name">{_e(s["name"])}</span>' if s["tool"] and s["name"] != s["tool"] else "")
            + f'{stored_content}</td><td class="model" title="{_e(s["model"])}">{_e(s["model"])}</td>'
            f'<td class="n">{_e(tokens(s))}</td>'
            f'<td class="n">{_e(usd(s["cost_usd"])) if s["cost_usd"] else ""}</td>'
            f'<td><code>{_e(fingerprint(s))}</code></td><td>{error}</td><td class="marks">{finding}</td></tr>')
    return f"<table>{''.join(rows)}</table>"


def _review_form(trace_id: str, modes: list[str], buttons: tuple[tuple[str, str], ...]) -> str:
    """A form posting a review to /v1/reviews on this page's origin: one mode (hidden), or a choice of `modes`."""
    if len(modes) == 1:
        mode = f'<input type="hidden" name="failure_mode" value="{_e(modes[0])}">'
    else:
        mode = ('<select name="failure_mode" aria-label="failure mode">'
                + "".join(f'<option value="{_e(m)}">{_e(m)} {_e(MODES[m].name)}</option>' for m in modes) + "</select>")
    return (f'<form class="review" method="post" action="{REVIEWS_PATH}"><input type="hidden" name="trace_id" '
            f'value="{_e(trace_id)}">{mode}<input name="note" maxlength="{MAX_NOTE}" placeholder="why (optional)" '
            f'aria-label="why"><input name="reviewer" maxlength="{MAX_REVIEWER}" placeholder="your name" '
            'aria-label="your name">'
            + "".join(f'<button name="verdict" value="{v}">{label}</button>' for v, label in buttons) + "</form>")


MUTE_FOR = (("1d", "for a day"), ("7d", "for a week"), ("30d", "for 30 days"), ("", "until unmuted"))
MUTE_RUNS = (("", "however often it shows"), ("10", "or until 10 more runs show it"),
             ("100", "or until 100 more runs show it"), ("1000", "or until 1,000 more runs show it"))


def _recurrence(trace_id: str, signature: str, recurrence: dict[str, Any] | None, forms: bool) -> str:
    """How often the finding's problem recurs, whether it is muted, and a form to mute or unmute it."""
    if recurrence is None:
        return ""
    mute, resolution = recurrence.get("mute"), recurrence.get("resolution")
    lines = f'<div class="note">{_e(recurrence_line(signature, recurrence))}</div>' + (
        f'<div class="note">{_e(mute_line(mute))}</div>' if mute else "") + (
        f'<div class="note">{_e(resolution_line(resolution))}</div>' if resolution else "")
    if not forms:
        return lines
    hidden = (f'<input type="hidden" name="trace_id" value="{_e(trace_id)}"><input type="hidden" name="signature" '
              f'value="{_e(signature)}">')
    who = (f'<input name="note" maxlength="{MAX_NOTE}" placeholder="why (optional)" aria-label="why">'
           f'<input name="changed_by" maxlength="{MAX_REVIEWER}" placeholder="your name" aria-label="your name">')
    if mute:
        form = f'<input type="hidden" name="muted" value="false">{who}<button>Unmute</button>'
    else:
        form = ('<select name="for" aria-label="for how long">'
                + "".join(f'<option value="{v}">{label}</option>' for v, label in MUTE_FOR)
                + '</select><select name="runs" aria-label="until how many more runs">'
                + "".join(f'<option value="{v}">{label}</option>' for v, label in MUTE_RUNS) + f"</select>{who}"
                '<button>Mute this problem</button>')
    fixed = (f'<input type="hidden" name="resolved" value="false">{who}<button>Reopen</button>' if resolution else
             f"{who}<button>Mark fixed</button>")
    return (f'{lines}<form class="review" method="post" action="{MUTES_PATH}">{hidden}{form}</form>'
            f'<form class="review" method="post" action="{RESOLUTIONS_PATH}">{hidden}{fixed}</form>')


def _findings(stored: StoredRun, forms: bool = False) -> str:
    reviews = {r["failure_mode"]: r for r in stored.reviews}
    missed = "".join(f'<p class="note">Reviewed: {_e(review_line(r))}</p>' for r in stored.reviews
                     if r["verdict"] == "missed")
    trace_id = stored.run["trace_id"]
    if forms:
        found = {f["failure_mode"] for f in stored.findings}
        hint = ("<p>Did it miss a mode this run shows?</p>"
                + _review_form(trace_id, [m for m in MODES if m not in found], (("missed", "Report missed"),)))
    else:
        hint = (f'<p class="note">Right or wrong? <code>mastwatch review {_e(trace_id)} FM-x.y '
                "confirmed|dismissed|missed</code></p>")
    if not stored.findings:
        return f'<p class="note">No finding.</p>{missed}{hint}'
    steps = {s["span_id"] for s in stored.steps}
    parts = []
    shown: set[str] = set()
    for f in stored.findings:
        evidence = " ".join(f'<a href="#span-{_e(span)}"><code>{_e(span)}</code></a>' if span in steps
                            else f"<code>{_e(span)}</code>" for span in f["evidence"])
        parts.append(f'<div class="finding" id="finding-{_e(f["failure_mode"])}"><span class="code">'
                     f'{_e(f["failure_mode"])}</span> <b>{_e(f["name"])}</b> ({_e(f["category"])}), confidence '
                     f'{f["confidence"]:.2f}, basis {_e(f["basis"])}<p class="why">{_e(f["reason"])}</p>'
                     + (f"<div>evidence: {evidence}</div>" if evidence else "")
                     + _recurrence(trace_id, f["signature"], stored.recurrence.get(f["signature"]), forms)
                     + (f'<div class="note">Reviewed: {_e(review_line(reviews[f["failure_mode"]]))}</div>'
                        if f["failure_mode"] in reviews and f["failure_mode"] not in shown else "")
                     + (_review_form(trace_id, [f["failure_mode"]], (("confirmed", "Right"), ("dismissed", "Wrong")))
                        if forms and f["failure_mode"] not in shown else "") + "</div>")
        shown.add(f["failure_mode"])
    return "".join(parts) + missed + hint


def render(stored: StoredRun, trace_url: str = "", forms: bool = False) -> str:
    """The page of one run; `trace_url` (dashboards.trace_url) links it to the trace UI; `forms`: served by
    mastwatch, with a form per finding to review it (a file written by `report --trace` names the command)."""
    r = stored.run
    facts = dict(header(stored))
    tiles = "".join(f'<div class="tile"><b>{_e(facts[key])}</b><span>{label}</span></div>' for key, label in (
        ("time", "started, and how long"), ("steps", "steps"), ("tokens", "tokens"), ("cost", "cost"),
        ("wasted", "wasted on repeated steps"), ("completion", "completion"), ("findings", "failure modes")))
    link = (f' · <a href="{_e(trace_url.replace("{trace_id}", r["trace_id"]))}">open in the trace UI</a>'
            if trace_url else "")
    if stored.steps:
        steps = f"<h2>Timeline</h2>{_timeline(stored)}<h2>Steps</h2>{_steps_table(stored)}"
    else:
        steps = f'<h2>Steps</h2><p class="note">Not stored: {_e(stored.no_steps)}</p>'
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>mastwatch: run '
            f'{_e(r["trace_id"])}</title><style>{STYLE}</style></head><body>'
            f'<h1>Run <code>{_e(r["trace_id"])}</code></h1><p class="sub">service <b>{_e(r["service"])}</b>, agent '
            f'<b>{_e(r["agent"])}</b>{_e(", release " + facts["release"]) if "release" in facts else ""}, models '
            f'{_e(facts["models"])}{link}</p><div class="tiles">{tiles}</div>'
            f"<h2>Findings</h2>{_findings(stored, forms)}{steps}</body></html>\n")


def error_page(message: str, title: str = "Run not shown", back: str = "") -> str:
    """A page saying what went wrong; `back`: a link to the page to go back to."""
    link = f'<p><a href="{_e(back)}">Back to the run</a></p>' if back else ""
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>mastwatch: {_e(title.lower())}'
            f"</title><style>{STYLE}</style></head><body><h1>{_e(title)}</h1><p>{_e(message)}</p>{link}</body>"
            "</html>\n")


def _page_form(take: Callable[[dict[str, Any]], tuple[int, str, str]], title: str, refused: str,
               applied: Callable[[], object] = lambda: None) -> Callable[[bytes, Mapping[str, str]], Reply]:
    """The reply to a form posted from a run's page: taken only from the page's own origin (the browser's
    Sec-Fetch-Site, so another site cannot post through a reviewer's browser; `refused` says so). `take` writes its
    fields: (status, why when not written, the page to go back to); ValueError: 400. `applied` is called after one
    written. The answer: back to the run's page, or a page (`title`) saying what is wrong."""
    def post(data: bytes, headers: Mapping[str, str]) -> Reply:
        if headers.get("Sec-Fetch-Site") != "same-origin":
            return 403, error_page(refused, title), {}
        fields = {k: v[-1] for k, v in urllib.parse.parse_qs(data.decode("utf-8", "replace"),
                                                             keep_blank_values=True).items()}
        back = f"{PATH}{fields.get('trace_id', '')}"
        try:
            status, why, location = take(fields)
        except ValueError as e:
            return 400, error_page(str(e), title, back), {}
        if status != 200:
            return status, error_page(why, title, back), {}
        applied()
        return 303, "", {"Location": location}

    return post


def review_form(engine: Engine, database: str) -> Callable[[bytes, Mapping[str, str]], Reply]:
    """The reply to a Right, Wrong or Report missed form posted from a run's page."""
    def take(fields: dict[str, Any]) -> tuple[int, str, str]:
        review = Review.from_json(fields)
        status, written = write_review(engine, database, review)
        return status, str(written), f"{PATH}{review.trace_id}#finding-{review.failure_mode}"

    return _page_form(take, "Review not recorded", "A review form is taken from mastwatch's own run page only.")


def _signature_form(take: Callable[[dict[str, Any]], tuple[int, str]], applied: Callable[[], object]) -> Callable[
        [bytes, Mapping[str, str]], Reply]:
    """A form about a finding's signature (its fields but the run's trace id go to `take`)."""
    def taken(fields: dict[str, Any]) -> tuple[int, str, str]:
        trace_id = trace_id_of(fields.pop("trace_id", ""))
        return (*take(fields), f"{PATH}{trace_id}")

    return _page_form(taken, "Not changed", "This form is taken from mastwatch's own run page only.", applied)


def mute_form(engine: Engine, database: str, applied: Callable[[], object]) -> Callable[
        [bytes, Mapping[str, str]], Reply]:
    """The reply to a Mute this problem or Unmute form posted from a run's page."""
    def take(fields: dict[str, Any]) -> tuple[int, str]:
        runs = fields.pop("runs", "")
        fields["muted"] = fields.get("muted") != "false"
        return write_mute(engine, database, Mute.from_json({**fields, **({"runs": int(runs)} if runs else {})}))

    return _signature_form(take, applied)


def resolution_form(engine: Engine, database: str, applied: Callable[[], object]) -> Callable[
        [bytes, Mapping[str, str]], Reply]:
    """The reply to a Mark fixed or Reopen form posted from a run's page."""
    def take(fields: dict[str, Any]) -> tuple[int, str]:
        fields["resolved"] = fields.get("resolved") != "false"
        return write_resolution(engine, database, Resolution.from_json(fields))

    return _signature_form(take, applied)


def view(engine: Engine, database: str, steps_setting: str, trace_url: str) -> Callable[[str], tuple[int, str]]:
    """The reply to GET /traces/<trace id> from the store `engine` reads: (status, page)."""
    def answer(path: str) -> tuple[int, str]:
        try:
            trace_id = trace_id_of(path[len(PATH):])
        except ValueError as e:
            return 400, error_page(f"The path ends with the trace id: {e}.")
        try:
            stored = stored_run(engine, database, trace_id, steps_setting)
        except Exception as e:  # the store not reachable, or not migrated yet
            log.warning("trace page: cannot read trace %s from the store (%s)", trace_id, e)
            return 503, error_page("The store cannot be read now; try again shortly.")
        if stored is None:
            return 404, error_page(f"Trace {trace_id} is not in the store: not classified yet (mastwatch waits for "
                                   "a run to end), or expired, or it never reached mastwatch.")
        return 200, render(stored, trace_url, forms=True)

    return answer
