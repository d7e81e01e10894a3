"""`mastwatch report`: the dashboards' ClickHouse panels, run on the store and drawn with matplotlib into one
self-contained HTML page (charts inline as SVG), and optionally one PNG of the charts, for people without
Grafana. The queries are the dashboards' own, expanded as Grafana would for the chosen time range."""

from __future__ import annotations

import html
import io
import math
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt

from mastwatch.config import Config

from .generate import dashboards
from .macros import ALL, TimeRange, Variable, expand_sql
from .panels import CLICKHOUSE

REPORTED = ("mastwatch-failure-modes", "mastwatch-repeated-spend")
Query = Callable[[str], list[dict[str, Any]]]
PALETTE = ["#3274d9", "#e0752d", "#56a64b", "#a352cc", "#e02f44", "#8ab8ff", "#f2cc0c", "#73bf69", "#ff9830"]


def _interval(range_s: int, points: int = 40) -> int:
    """A round interval giving at most `points` buckets (tens of bars: each stays readable), as Grafana's
    $__interval does."""
    for step in (1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 10800, 21600, 43200, 86400):
        if range_s / step <= points:
            return step
    return 86400


def _units(panel: dict[str, Any]) -> dict[str, str]:
    """Column -> Grafana unit, from the panel's field overrides (and its default unit as '')."""
    units = {"": panel["fieldConfig"]["defaults"].get("unit") or ""}
    for o in panel["fieldConfig"].get("overrides", []):
        for prop in o["properties"]:
            if prop["id"] == "unit":
                units[o["matcher"]["options"]] = prop["value"]
    return units


def _fmt(value: Any, unit: str) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    if unit == "percentunit":
        return "-" if math.isnan(value) else f"{value:.1%}"
    if unit == "currencyUSD":
        return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def _axis_format(unit: str) -> Any:
    """Tick labels: short, as Grafana draws its axes (table cells keep `_fmt`'s precision)."""
    if unit == "currencyUSD":
        return lambda v, _: f"${v:,.3g}"
    if unit == "percentunit":
        return lambda v, _: f"{v:.0%}"
    return lambda v, _: f"{v:,.3g}"


def _svg(fig: plt.Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "T")).replace(tzinfo=timezone.utc)


def _series(rows: list[dict[str, Any]]) -> tuple[list[datetime], dict[str, list[float]]]:
    """Long rows (time, label, value) to wide series, as Grafana's time series format does."""
    label = next(k for k in rows[0] if k != "time" and isinstance(rows[0][k], str))
    value = [k for k in rows[0] if k not in ("time", label)][-1]
    times = sorted({r["time"] for r in rows})
    index = {t: i for i, t in enumerate(times)}
    series: dict[str, list[float]] = {}
    for r in rows:
        series.setdefault(r[label], [0.0] * len(times))[index[r["time"]]] = float(r[value])
    return [_time(t) for t in times], series


UNIT_NAMES = {"currencyUSD": "USD", "percentunit": "share", "short": "", "": ""}


def _per(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _draw_timeseries(ax: plt.Axes, panel: dict[str, Any], rows: list[dict[str, Any]], bucket_s: int) -> None:
    """Stacked bars, one per bucket of `bucket_s` (the query's own interval); the axes say what a bar counts, per
    how long, and on what day."""
    times, series = _series(rows)
    bucket = timedelta(seconds=bucket_s)
    bottom = [0.0] * len(times)
    for i, (name, values) in enumerate(sorted(series.items())):
        ax.bar(times, values, width=bucket * 0.8, bottom=bottom, align="edge", label=name,
               color=PALETTE[i % len(PALETTE)])
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    unit = _units(panel)[""]
    ax.yaxis.set_major_formatter(_axis_format(unit))
    value = [k for k in rows[0] if k != "time" and not isinstance(rows[0][k], str)][-1]
    counted = UNIT_NAMES.get(unit, unit) or value.replace("_", " ")
    ax.set_ylabel(f"{counted} per {_per(bucket_s)}", fontsize=8)
    ax.set_xlim(times[0] - bucket * 0.5, times[-1] + bucket * 1.5)
    span = (times[-1] - times[0]).total_seconds() + bucket_s
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=3, maxticks=8))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S" if span < 600 else "%H:%M" if span < 2 * 86400
                                                      else "%b %d %H:%M"))
    days = sorted({t.strftime("%Y-%m-%d") for t in times})
    ax.set_xlabel(f"time (UTC), {days[0]}" + (f" to {days[-1]}" if len(days) > 1 else ""), fontsize=8)
    ax.legend(fontsize=7, loc="upper left", frameon=False)


Bars = tuple[list[str], list[float], str, list[str]]  # labels, values, column, a note per bar


def _bar_column(panel: dict[str, Any], rows: list[dict[str, Any]]) -> Bars | None:
    """A table sorted by a numeric column is also drawn as bars of that column. A cost of 0 for tokens that were
    spent is a model without a price, not a free one: its bar says so."""
    sort = panel["options"].get("sortBy") or []
    if not sort or not rows:
        return None
    column = sort[0]["displayName"]
    keys = [k for k in ("failure_mode", "mode", "tool", "model", "agent", "agent_name", "service", "service_name")
            if k in rows[0]]
    ordered = sorted(rows, key=lambda r: r[column], reverse=True)[:10]
    labels = [" / ".join(str(r[k]) for k in reversed(keys)) for r in ordered]
    usd = _units(panel).get(column) == "currencyUSD"
    notes = [f"unpriced model: {_fmt(tokens, '')} tokens, cost unknown"
             if usd and not r[column] and (tokens := _tokens(r)) else "" for r in ordered]
    return labels, [float(r[column]) for r in ordered], column, notes


def _tokens(row: dict[str, Any]) -> int:
    """The tokens a row of a spend table counts: those wasted (waste tables), else those used (spend by model)."""
    if "wasted_tokens" in row:
        return int(row["wasted_tokens"] or 0)
    return int(row.get("input_token_count") or 0) + int(row.get("output_token_count") or 0)


def _draw_bars(ax: plt.Axes, panel: dict[str, Any], bars: Bars) -> None:
    """Horizontal bars labelled inside the plot (not by tick labels), so that every chart's plot area starts at
    the same place whatever its labels' lengths."""
    labels, values, column, notes = bars
    labels, values, notes = labels[::-1], values[::-1], notes[::-1]  # the largest on top
    positions = range(len(values))
    ax.barh(positions, values, color=PALETTE[0], alpha=0.85)
    ax.set_yticks([])
    top = max(values) or 1.0
    ax.set_xlim(0, top * 1.05)
    for y, label, note in zip(positions, labels, notes, strict=True):
        ax.text(top * 0.01, y, label + (f"  ({note})" if note else ""), va="center", fontsize=8,
                color="#b00020" if note else "#111",
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.7, "linewidth": 0})
    unit = _units(panel).get(column, "")
    ax.xaxis.set_major_formatter(_axis_format(unit))
    name, unit_name = column.replace("_", " "), UNIT_NAMES.get(unit, "")
    shown = unit_name and unit_name.lower() not in name.lower().split()  # "wasted usd" needs no "(USD)"
    ax.set_xlabel(name + (f" ({unit_name})" if shown else ""), fontsize=8)


def _table_html(panel: dict[str, Any], rows: list[dict[str, Any]], trace_url: str) -> str:
    units = _units(panel)
    columns = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in rows[:50]:
        cells = []
        for c in columns:
            text = html.escape(_fmt(r[c], units.get(c, "")))
            if c == "trace_id":
                text = f'<a href="{html.escape(trace_url.replace("{trace_id}", str(r[c])))}">{text}</a>'
            cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _stat_html(panel: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    units = _units(panel)
    return "<div class=tiles>" + "".join(
        f"<div class=tile><b>{html.escape(_fmt(v, units.get(k, '')))}</b><span>{html.escape(k)}</span></div>"
        for k, v in rows[0].items()) + "</div>"


def panels(config: Config) -> list[tuple[str, dict[str, Any]]]:
    """(row title, panel) of every ClickHouse panel of the reported dashboards, in dashboard order."""
    out = []
    boards = dashboards(config)
    for uid in REPORTED:
        row = boards[uid]["title"]
        for panel in boards[uid]["panels"]:
            if panel["type"] == "row":
                row = panel["title"]
            elif panel["datasource"] == CLICKHOUSE:
                out.append((row, panel))
    return out


Results = list[tuple[str, dict, list]]


def window(query: Query, config: Config, start: int, end: int) -> TimeRange:
    """From `start` to `end` (Unix seconds), narrowed to when the store has runs (a two-minute demo is drawn over its
    two minutes, not as one bar of a day), bucketed into tens of intervals."""
    rows = query(f"SELECT toUnixTimestamp(min(started_at)) AS first FROM {config.exporters.store.database}.mast_traces "
                 f"WHERE started_at >= toDateTime({start}) AND started_at <= toDateTime({end})")
    first = int(rows[0]["first"]) if rows and rows[0]["first"] else start
    start = max(start, first)
    interval = _interval(max(end - start, 1))
    start -= start % interval  # buckets on round times
    return TimeRange(start, end, interval, variables={"service": Variable(ALL, all_value=".*")})


def run(query: Query, config: Config, start: int, end: int) -> tuple[Results, TimeRange]:
    """Each reported panel with the rows its query returns for the range `window` gives."""
    chosen = window(query, config, start, end)
    return [(row, panel, query(expand_sql(panel["targets"][0]["rawSql"], chosen))) for row, panel in
            panels(config)], chosen


def render_html(results: Results, config: Config, covered: str, bucket_s: int) -> str:
    """The page; `covered` says which range it covers ("over the last 24h")."""
    parts, row = [], None
    for title, panel, rows in results:
        if title != row:
            row = title
            parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(f"<section><h3>{html.escape(panel['title'])}</h3><p>{html.escape(panel['description'])}</p>")
        if not rows:
            parts.append("<p class=empty>No data in this range.</p>")
        elif panel["type"] == "timeseries":
            fig, ax = plt.subplots(figsize=(9, 3))
            _draw_timeseries(ax, panel, rows, bucket_s)
            parts.append(_svg(fig))
        elif panel["type"] == "stat":
            parts.append(_stat_html(panel, rows))
        else:
            bars = _bar_column(panel, rows)
            if bars:
                fig, ax = plt.subplots(figsize=(9, 0.35 * len(bars[0]) + 0.8))
                _draw_bars(ax, panel, bars)
                parts.append(_svg(fig))
            parts.append(_table_html(panel, rows, config.dashboards.trace_url))
        parts.append("</section>")
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>mastwatch report</title><style>
body{{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}}
h2{{border-bottom:2px solid #3274d9;padding-bottom:.2em;margin-top:2em}} h3{{margin-bottom:.2em}}
section p{{color:#555;margin-top:0}} .empty{{font-style:italic}}
table{{border-collapse:collapse;font-size:12px;width:100%}} td,th{{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top}} th{{background:#f3f5f8}} svg{{max-width:100%;height:auto}}
.tiles{{display:flex;gap:1em}} .tile{{background:#f3f5f8;padding:.8em 1.2em;border-radius:6px}}
.tile b{{display:block;font-size:1.6em}} .tile span{{color:#555;font-size:.85em}}
</style></head><body><h1>mastwatch report</h1>
<p>The store's MAST failure modes and repeated-step spend {html.escape(covered)}, generated
{generated}: the ClickHouse panels of the Grafana dashboards, from database
<code>{html.escape(config.exporters.store.database)}</code>.</p>
{"".join(parts)}</body></html>
"""


def render_png(results: Results, path: Path, bucket_s: int) -> None:
    charts = [(p, rows) for _, p, rows in results if rows and (p["type"] == "timeseries" or _bar_column(p, rows))]
    cols, rows_of_charts = 2, max(1, math.ceil(len(charts) / 2))  # an empty store still gets its page
    fig, axes = plt.subplots(rows_of_charts, cols, figsize=(14, 3.6 * rows_of_charts), squeeze=False)
    for ax, (panel, rows) in zip(axes.flat, charts, strict=False):
        ax.set_title(panel["title"], fontsize=11, loc="left")
        if panel["type"] == "timeseries":
            _draw_timeseries(ax, panel, rows, bucket_s)
        else:
            bars = _bar_column(panel, rows)
            assert bars is not None  # charts holds only panels that have them
            _draw_bars(ax, panel, bars)
    for ax in list(axes.flat)[len(charts):]:
        ax.axis("off")
    if not charts:
        axes.flat[0].text(0, 0.5, "No data in this range.", fontsize=12)
    fig.suptitle("mastwatch: failure modes and repeated-step spend (from the store)", fontsize=13, x=0.01,
                 ha="left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _utc(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def main_report(config: Config, out: Path, png: Path | None, since: str, until: str = "now") -> int:
    from mastwatch.exporter.store.chdb_engine import ChdbEngine
    from mastwatch.exporter.store.queries import time_bound

    now_ns = time.time_ns()
    bounds = []
    for flag, text in (("--since", since), ("--until", until)):
        try:
            bounds.append(time_bound(text, now_ns))
        except ValueError as e:
            print(f"mastwatch: {flag}: {e}", file=sys.stderr)
            return 2
    start_ns, end_ns = bounds
    if start_ns >= end_ns:
        print(f"mastwatch: --since {since} is not before --until {until}", file=sys.stderr)
        return 2
    engine = ChdbEngine(config.exporters.store.path, create=False)
    try:
        results, chosen = run(engine.query, config, start_ns // 10**9, end_ns // 10**9)
    finally:
        engine.close()
    covered = f"over the last {since}" if until == "now" else f"from {_utc(start_ns)} to {_utc(end_ns)} UTC"
    out.write_text(render_html(results, config, covered, chosen.interval_s), encoding="utf-8")
    print(out)
    if png:
        render_png(results, png, chosen.interval_s)
        print(png)
    return 0
