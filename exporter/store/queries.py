"""Every question asked of the store, as SQL written once and rendered for its two readers: the CLI
(`mastwatch top`, ClickHouse query parameters) and the Grafana dashboards and `mastwatch report` (Grafana's
and the ClickHouse data source's macros, see `mastwatch.dashboards.clickhouse`). One run read back whole (its
verdict, findings and steps: `mastwatch show`, `mastwatch report --trace` and the trace page) is at the end.

A query is a template over placeholders that a `Dialect` writes:

    {db}        the database
    {traces}    the filter on mast_traces rows: time range, service and agent, the models they used
    {steps}     the filter on rows with a model column: the model that produced them (mast_repeated_steps), or the
                model called (mast_model_spend)
    {rows}      the filter on other rows (mast_findings, mast_judgements): time range, service and agent
    {match}     service and agent alone
    {range}     the time range alone
    {bucket}    the time bucket of a time series
    {mode}      a failure mode asked for ('' for all); only where the dialect has one
    {modes}     the filter on failure_mode where the dialect has one, else none (every mode)
    {limit}     the row limit (the dialect's, else the query's own)

Output aliases never reuse a column's name: ClickHouse resolves aliases in WHERE too, so an alias `models`
would turn a filter on the `models` array into one on a string. Results of the CLI's queries hold only
strings, numbers and arrays, so every engine returns the same rows. On a cluster the tables are Distributed
and trace-id subqueries run as GLOBAL IN.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from mastwatch.collector.durations import parse_duration

from .engine import Engine


@dataclass(frozen=True)
class Query:
    sql: str
    format: Literal["timeseries", "table"] = "table"
    limit: int = 20  # rows when the dialect does not set the limit


@dataclass(frozen=True)
class Dialect:
    """How a reader writes the placeholders: each filter is a condition on the table's columns."""

    range: str
    match: str  # service and agent
    bucket: str
    models: str = ""  # on mast_traces.models
    model: str = ""  # on a row's model column
    limit: str | None = None
    mode: str | None = None
    new_since: str = "toDateTime64(0, 9, 'UTC')"  # signatures first seen since: all of them unless the reader asks
    state: str = "''"  # signatures in this state only (open, muted, resolved, regressed): all unless the reader asks

    def render(self, query: Query, database: str) -> str:
        if "{mode}" in query.sql and self.mode is None:
            raise ValueError("this query filters by failure mode, which the dialect does not provide")
        values = {"{db}": database, "{range}": self.range, "{new_since}": self.new_since, "{state}": self.state,
                  "{bucket}": self.bucket,
                  "{mode}": self.mode or "",
                  "{modes}": f"({self.mode} = '' OR failure_mode = {self.mode})" if self.mode else "1 = 1",
                  "{limit}": self.limit or str(query.limit), "{rows}": _all(self.range, self.match),
                  "{match}": self.match,
                  "{traces}": _all(self.range, self.match, self.models),
                  "{steps}": _all(self.range, self.match, self.model)}
        return re.sub("|".join(map(re.escape, values)), lambda m: values[m.group(0)], query.sql)


def _all(*conditions: str) -> str:
    return " AND ".join(c for c in conditions if c)


# The CLI's dialect: ClickHouse query parameters ({since} and {until} bound the time; {service}, {agent},
# {model} and {mode} filter when not empty; {limit} caps the rows), values from `Filters.params`.
PARAMETERS = Dialect(
    range="started_at >= {since:DateTime64(9, 'UTC')} AND started_at < {until:DateTime64(9, 'UTC')}",
    match="({service:String} = '' OR service = {service:String}) AND ({agent:String} = '' OR agent = {agent:String})",
    models="({model:String} = '' OR has(models, {model:String}))",
    model="({model:String} = '' OR model = {model:String})",
    bucket="toStartOfHour(started_at)", limit="{limit:UInt32}", mode="{mode:String}",
    new_since="{new_since:DateTime64(9, 'UTC')}", state="{state:String}")

# --- failure modes --------------------------------------------------------------------------------------------

FINDINGS_OVER_TIME = Query("""\
SELECT {bucket} AS time, failure_mode, count() AS traces
FROM {db}.mast_findings
WHERE {rows}
GROUP BY time, failure_mode
ORDER BY time""", "timeseries")

# Failure modes by the traces that show them; share is of all traces within the same filters.
FAILURES = Query("""\
SELECT failure_mode, any(name) AS name, any(category) AS category, uniqExact(trace_id) AS traces,
       round(traces / greatest((SELECT count() FROM {db}.mast_traces WHERE {traces}), 1), 4) AS share,
       uniqExact(service, agent) AS agents, round(avg(confidence), 3) AS confidence,
       topK(1)(basis)[1] AS basis, argMax(reason, started_at) AS latest_reason
FROM {db}.mast_findings
WHERE {rows}
GROUP BY failure_mode
ORDER BY traces DESC, failure_mode
LIMIT {limit}""")

AGENTS_BY_FAILURE_RATE = Query("""\
SELECT service, agent, count() AS runs, countIf(notEmpty(failure_modes)) AS failing, failing / runs AS share,
       topKArray(3)(failure_modes) AS top_modes
FROM {db}.mast_traces
WHERE {traces}
GROUP BY service, agent
HAVING runs >= 10
ORDER BY share DESC, runs DESC
LIMIT {limit}""")

# Agents by the share of their runs that failed (showed {mode} when set, else any mode), with their top modes and
# what their repeated steps burnt: the store's view of what a failure budget (rules.slos) counts. Muted problems'
# runs count here too: a mute decides what alerts read, not what the runs were.
AGENT_FAILURES = Query("""\
SELECT service, agent, count() AS runs,
       countIf({mode} = '' AND notEmpty(failure_modes) OR has(failure_modes, {mode})) AS failing_runs,
       round(failing_runs / runs, 4) AS failing_share, topKArray(3)(failure_modes) AS top_modes,
       round(sum(wasted_cost_usd), 6) AS wasted_usd, round(sum(wasted_seconds), 3) AS wasted_time
FROM {db}.mast_traces
WHERE {traces}
GROUP BY service, agent
ORDER BY failing_share DESC, runs DESC, service, agent
LIMIT {limit}""")

# Each release of an agent (its resource's service.version; '' for runs that named none) in each environment, newest
# first, against the release before it (by first run in the range): the share of runs with a finding, and whether it
# moved more than chance would move it (`zscore`: the two-proportion z statistic, positive when the newer fails more;
# beyond chance at 1.96 or more either way; "too few runs" under 10 on a side). The first release in the range has no
# previous_version, and a share_change and zscore of 0. A failing run is one with a finding: for the CLI, one showing
# {mode} when it is set (RELEASES, the dashboards', has no mode).
_RELEASES = """\
SELECT service, agent, environment, version, runs, toString(toDateTime64(first_seen, 3)) AS first_run,
       toString(toDateTime64(last_seen, 3)) AS last_run, failing_runs, failing_share, top_modes, cost_per_run,
       wasted_usd, previous_version,
       if(previous_runs = 0, 0, round(failing_share - previous_failing / previous_runs, 4)) AS share_change,
       if(previous_runs = 0 OR pooled = 0 OR pooled = 1, 0,
          round((failing_runs / runs - previous_failing / previous_runs)
                / sqrt(pooled * (1 - pooled) * (1 / runs + 1 / previous_runs)), 2)) AS zscore,
       multiIf(previous_runs = 0, '', least(runs, previous_runs) < 10, 'too few runs', abs(zscore) < 1.96, 'same',
               zscore > 0, 'worse', 'better') AS against_previous
FROM (
    SELECT *, lagInFrame(version) OVER release AS previous_version,
           lagInFrame(runs) OVER release AS previous_runs, lagInFrame(failing_runs) OVER release AS previous_failing,
           (failing_runs + previous_failing) / (runs + previous_runs) AS pooled
    FROM (
        SELECT service, agent, environment, version, count() AS runs, min(started_at) AS first_seen,
               max(started_at) AS last_seen, countIf(<failing>) AS failing_runs,
               round(failing_runs / runs, 4) AS failing_share, topKArray(3)(failure_modes) AS top_modes,
               round(sum(cost_usd) / runs, 6) AS cost_per_run, round(sum(wasted_cost_usd), 6) AS wasted_usd
        FROM {db}.mast_traces
        WHERE {traces}
        GROUP BY service, agent, environment, version)
    WINDOW release AS (PARTITION BY service, agent, environment ORDER BY first_seen
                       ROWS BETWEEN 1 PRECEDING AND CURRENT ROW))
ORDER BY service, agent, environment, first_seen DESC
LIMIT {limit}"""
VERSIONS = Query(_RELEASES.replace("<failing>",
                                   "{mode} = '' AND notEmpty(failure_modes) OR has(failure_modes, {mode})"))
RELEASES = Query(_RELEASES.replace("<failing>", "notEmpty(failure_modes)"))

# When each release first ran (whenever that was, shown if in the range): the dashboards' release markers.
RELEASE_MARKERS = Query("""\
SELECT started_at AS time, concat(agent, ' ', version, if(environment = '', '', concat(' in ', environment))) AS text
FROM (SELECT service, agent, environment, version, min(started_at) AS started_at
      FROM {db}.mast_traces
      WHERE {match} AND version != ''
      GROUP BY service, agent, environment, version)
WHERE {range}
ORDER BY time""", limit=200)

# Traces with findings, latest first: each mode with its basis and reason, and the evidence span ids.
RECENT_FAILING_TRACES = Query("""\
SELECT min(started_at) AS time, service, agent, arrayStringConcat(arraySort(groupArray(failure_mode)), ' ') AS modes,
       max(confidence) AS top_confidence,
       arrayStringConcat(arraySort(groupArray(concat(failure_mode, ' (', basis, '): ', reason))), ' | ') AS reasons,
       arrayStringConcat(arraySort(arrayDistinct(arrayFlatten(groupArray(evidence)))), ' ') AS evidence_spans, trace_id
FROM {db}.mast_findings
WHERE {rows}
GROUP BY trace_id, service, agent
ORDER BY time DESC, trace_id
LIMIT {limit}""", limit=200)

# Failing traces (those showing {mode} when set), most wasteful first.
TRACES = Query("""\
SELECT trace_id, toString(toDateTime64(started_at, 3)) AS started, service, agent, version, failure_modes, steps,
       repeated_steps, round(cost_usd, 6) AS cost_usd, round(wasted_cost_usd, 6) AS wasted_cost_usd,
       round(wasted_seconds, 3) AS wasted_seconds
FROM {db}.mast_traces
WHERE {traces}
  AND notEmpty(failure_modes)
  AND ({mode} = '' OR trace_id GLOBAL IN (
      SELECT trace_id FROM {db}.mast_findings WHERE failure_mode = {mode} AND {range}))
ORDER BY wasted_cost_usd DESC, cost_usd DESC, started_at DESC, trace_id
LIMIT {limit}""")

RECENT_TRACES = Query("""\
SELECT started_at AS time, dateDiff('millisecond', started_at, ended_at) / 1000 AS duration,
       arrayStringConcat(failure_modes, ' ') AS modes, version, arrayStringConcat(models, ' ') AS model_list, steps,
       llm_calls, tool_calls, input_tokens + output_tokens AS tokens, cost_usd, repeated_steps, wasted_cost_usd,
       wasted_seconds, completion, trace_id
FROM {db}.mast_traces
WHERE {traces}
ORDER BY started_at DESC
LIMIT {limit}""", limit=200)

# Runs, failing or not, those that made the most model calls first: what MastRunsGettingLonger points at.
LONGEST_RUNS = Query("""\
SELECT trace_id, toString(toDateTime64(started_at, 3)) AS started, service, agent, llm_calls, tool_calls, steps,
       round(dateDiff('millisecond', started_at, ended_at) / 1000, 3) AS seconds, round(cost_usd, 6) AS cost_usd,
       failure_modes, completion
FROM {db}.mast_traces
WHERE {traces}
ORDER BY llm_calls DESC, tool_calls DESC, started_at DESC, trace_id
LIMIT {limit}""")

# The judge's verdicts by mode (judged traces are a sample: judge.sample_rate, and those with unsure findings).
JUDGE_VERDICTS = Query("""\
SELECT failure_mode, uniqExact(trace_id) AS judged, countIf(verdict = 'confirmed') AS confirmed,
       countIf(verdict = 'rejected') AS rejected, countIf(verdict = 'found') AS found,
       countIf(verdict = 'not_found') AS not_found,
       round(confirmed / greatest(confirmed + rejected, 1), 3) AS agreement
FROM {db}.mast_judgements
WHERE {rows}
GROUP BY failure_mode
ORDER BY judged DESC, failure_mode
LIMIT {limit}""")

# People's reviews per failure mode (each run's latest review of a mode counts): the runs it was found in, the findings
# reviewed and the share confirmed, the misses reported and the share of the runs reviewed as showing the mode that it
# was found in; the reviewed runs the judge also read and the share where it said what the reviewer did (confirmed
# or found / rejected / found a miss); the latest dismissal's note. Modes found but not reviewed are listed too: what
# is left to review.
REVIEWS = Query("""\
SELECT failure_mode, found.runs AS found_runs, latest.n_confirmed + latest.n_dismissed AS reviewed,
       latest.n_confirmed AS confirmed, latest.n_dismissed AS dismissed,
       round(confirmed / greatest(reviewed, 1), 3) AS confirmed_share, latest.n_missed AS missed,
       round(confirmed / greatest(confirmed + missed, 1), 3) AS found_share, latest.n_judged AS judged,
       round(latest.n_agreed / greatest(judged, 1), 3) AS judge_agreement, latest.dismissal AS latest_dismissal
FROM (SELECT failure_mode, uniqExact(trace_id) AS runs
      FROM {db}.mast_findings WHERE {rows} AND {modes} GROUP BY failure_mode) AS found
FULL OUTER JOIN (
    SELECT failure_mode, countIf(verdict = 'confirmed') AS n_confirmed, countIf(verdict = 'dismissed') AS n_dismissed,
           countIf(verdict = 'missed') AS n_missed, countIf(judge != '') AS n_judged,
           countIf(verdict = 'confirmed' AND judge IN ('confirmed', 'found') OR verdict = 'dismissed'
                   AND judge = 'rejected' OR verdict = 'missed' AND judge = 'found') AS n_agreed,
           argMaxIf(why, at, verdict = 'dismissed') AS dismissal
    FROM (SELECT trace_id, failure_mode, argMax(verdict, reviewed_at) AS verdict, argMax(note, reviewed_at) AS why,
                 max(reviewed_at) AS at
          FROM {db}.mast_reviews WHERE {rows} AND {modes} GROUP BY trace_id, failure_mode) AS person
    LEFT JOIN (SELECT trace_id, failure_mode, argMax(verdict, judged_at) AS judge
               FROM {db}.mast_judgements WHERE {rows} AND {modes} GROUP BY trace_id, failure_mode) AS model
    USING (trace_id, failure_mode)
    GROUP BY failure_mode) AS latest USING failure_mode
ORDER BY reviewed DESC, missed DESC, found_runs DESC, failure_mode
LIMIT {limit}""")

# --- repeated-step spend --------------------------------------------------------------------------------------

# wasted_time_share: the repeated steps' time (and their model calls') over the runs' durations; steps run in
# parallel can take more than the run's wall time.
SPEND_SUMMARY = Query("""\
SELECT count() AS runs, countIf(notEmpty(failure_modes)) / runs AS failing_share, sum(cost_usd) AS spend_usd,
       sum(wasted_cost_usd) AS wasted_usd, wasted_usd / spend_usd AS wasted_share,
       sum(wasted_seconds) AS wasted_time, wasted_time / (sum(dateDiff('millisecond', started_at, ended_at)) / 1000)
           AS wasted_time_share
FROM {db}.mast_traces
WHERE {traces}""")

WASTED_OVER_TIME = Query("""\
SELECT {bucket} AS time, agent, sum(wasted_cost_usd) AS wasted_usd
FROM {db}.mast_traces
WHERE {traces}
GROUP BY time, agent
ORDER BY time""", "timeseries")

WASTED_BY_AGENT = Query("""\
SELECT service, agent, count() AS runs, countIf(repeated_steps > 0) AS looping_runs, sum(repeated_steps) AS repeated,
       sum(wasted_input_tokens + wasted_output_tokens) AS wasted_tokens, sum(cost_usd) AS spend_usd,
       sum(wasted_cost_usd) AS wasted_usd, if(spend_usd > 0, wasted_usd / spend_usd, 0) AS wasted_share,
       round(sum(wasted_seconds), 3) AS wasted_seconds,
       sum(dateDiff('millisecond', started_at, ended_at)) / 1000 AS run_seconds,
       if(run_seconds > 0, round(wasted_seconds / run_seconds, 4), 0) AS wasted_time_share
FROM {db}.mast_traces
WHERE {traces}
GROUP BY service, agent
ORDER BY wasted_usd DESC
LIMIT {limit}""", limit=100)

COSTLIEST_LOOPS = Query("""\
SELECT started_at AS time, service, agent, arrayStringConcat(models, ' ') AS model_list, repeated_steps,
       wasted_input_tokens + wasted_output_tokens AS wasted_tokens, wasted_cost_usd, round(wasted_seconds, 3)
           AS wasted_seconds, cost_usd, trace_id
FROM {db}.mast_traces
WHERE {traces} AND repeated_steps > 0
ORDER BY wasted_cost_usd DESC, repeated_steps DESC
LIMIT {limit}""", limit=50)

# Repeated steps by agent and tool; agents ordered by their total waste, each agent's tools by theirs.
# unpriced_repeats: repeats whose model calls used tokens but had no price (a model genai-prices does not know),
# so that their 0 USD is not read as free.
WASTE = Query("""\
SELECT service, agent, tool, count() AS repeated_steps, uniqExact(trace_id) AS traces,
       sum(uncached_input_tokens + cache_read_tokens + cache_write_tokens) AS wasted_input_tokens,
       sum(output_tokens) AS wasted_output_tokens, round(sum(cost_usd), 6) AS wasted_cost_usd,
       countIf(cost_usd = 0 AND uncached_input_tokens + output_tokens > 0) AS unpriced_repeats,
       round(sum(seconds), 3) AS wasted_seconds,
       round(sum(sum(cost_usd)) OVER (PARTITION BY service, agent), 6) AS agent_wasted_cost_usd
FROM {db}.mast_repeated_steps
WHERE {steps}
GROUP BY service, agent, tool
ORDER BY agent_wasted_cost_usd DESC, service, agent, wasted_cost_usd DESC, repeated_steps DESC, tool
LIMIT {limit}""")

# Repeated steps by agent and the model whose calls produced them, tokens by type.
WASTE_BY_MODEL = Query("""\
SELECT service, agent, model, count() AS repeated_steps, uniqExact(trace_id) AS traces,
       sum(uncached_input_tokens) AS wasted_uncached_input_tokens, sum(output_tokens) AS wasted_output_tokens,
       sum(cache_read_tokens) AS wasted_cache_read_tokens, sum(cache_write_tokens) AS wasted_cache_write_tokens,
       wasted_uncached_input_tokens + wasted_output_tokens + wasted_cache_read_tokens + wasted_cache_write_tokens
           AS wasted_tokens,
       round(sum(cost_usd), 6) AS wasted_cost_usd,
       countIf(cost_usd = 0 AND uncached_input_tokens + output_tokens > 0) AS unpriced_repeats
FROM {db}.mast_repeated_steps
WHERE {steps}
GROUP BY service, agent, model
ORDER BY wasted_cost_usd DESC, wasted_tokens DESC, service, agent, model
LIMIT {limit}""")

# The tools repeated most, fleet-wide, with what their repeats cost.
WASTE_BY_TOOL = Query("""\
SELECT tool, count() AS repeated_steps, uniqExact(trace_id) AS traces, uniqExact(service, agent) AS agents,
       sum(uncached_input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) AS wasted_tokens,
       round(sum(cost_usd), 6) AS wasted_cost_usd, round(sum(seconds), 3) AS wasted_seconds
FROM {db}.mast_repeated_steps
WHERE {steps}
GROUP BY tool
ORDER BY repeated_steps DESC, wasted_cost_usd DESC, tool
LIMIT {limit}""")

SPEND_OVER_TIME = Query("""\
SELECT {bucket} AS time, model, round(sum(cost_usd), 6) AS spend_usd
FROM {db}.mast_model_spend
WHERE {steps}
GROUP BY time, model
ORDER BY time""", "timeseries")

# Spend per agent and model over every run (mast_model_spend), with the share its repeated steps burnt.
# unpriced_runs: runs whose calls of the model had no price (a model genai-prices does not know): their 0 USD is
# not free.
SPEND_BY_MODEL = Query("""\
SELECT service, agent, model, uniqExact(trace_id) AS runs, sum(calls) AS model_calls,
       round(sum(seconds) / greatest(model_calls, 1), 3) AS mean_call_seconds,
       sum(uncached_input_tokens + cache_read_tokens + cache_write_tokens) AS input_token_count,
       sum(output_tokens) AS output_token_count, round(sum(cost_usd), 6) AS spend_usd,
       countIf(NOT priced) AS unpriced_runs, sum(repeated_steps) AS repeated,
       round(sum(wasted_cost_usd), 6) AS wasted_usd,
       if(spend_usd > 0, round(wasted_usd / spend_usd, 4), 0) AS wasted_share
FROM {db}.mast_model_spend
WHERE {steps}
GROUP BY service, agent, model
ORDER BY spend_usd DESC, wasted_usd DESC, service, agent, model
LIMIT {limit}""")

# `mastwatch top <name>`
# --- failure signatures ---------------------------------------------------------------------------------------

# Recurring problems: each signature seen in the range (its runs there), with what mast_signatures keeps of it
# for all time: runs, first and last sighting, waste, models, an example trace, and the reviews of its findings (each
# run's latest: confirmed, dismissed; a signature dismissed before is likely a false alarm again), and its state: open,
# muted, resolved (marked fixed, not seen since) or regressed. {new_since}: first seen since; {state}: in that state.
# Each signature's reviews, each run's latest per mode: n_confirmed, n_dismissed (<which>: the signatures wanted).
_SIGNATURE_REVIEWS = """(SELECT f.signature AS signature, countIf(v.verdict = 'confirmed') AS n_confirmed,
           countIf(v.verdict = 'dismissed') AS n_dismissed
    FROM (SELECT trace_id, failure_mode, argMax(verdict, reviewed_at) AS verdict
          FROM {db}.mast_reviews GROUP BY trace_id, failure_mode) AS v
    INNER JOIN (SELECT DISTINCT trace_id, failure_mode, signature FROM {db}.mast_findings
                WHERE <which> AND trace_id GLOBAL IN (SELECT trace_id FROM {db}.mast_reviews)) AS f
    USING (trace_id, failure_mode)
    GROUP BY signature)"""

# --- muted signatures -----------------------------------------------------------------------------------------

NO_END = "toDateTime64('2262-01-01 00:00:00', 9, 'UTC')"  # a mute without an end (DateTime64's last years)


def _findings_since(table: str, in_force: str) -> str:
    """The findings (signature, trace_id, started_at) of the signatures a decision `table` holds rows `in_force` of,
    since the earliest of those rows: what each decision's runs since are counted from."""
    return (f"(SELECT signature, trace_id, started_at FROM {{db}}.mast_findings\n"
            f"               WHERE signature GLOBAL IN (SELECT signature FROM {{db}}.{table} WHERE {in_force})\n"
            f"                 AND started_at >= (SELECT min(changed_at) FROM {{db}}.{table} WHERE {in_force}))")

# Each signature's latest mute or unmute: whether it is muted, since when, until when (and until how many runs), by
# whom and why.
LATEST_MUTES = """\
SELECT signature, argMax(failure_mode, changed_at) AS mode, argMax(service, changed_at) AS service_name,
       argMax(agent, changed_at) AS agent_name, argMax(muted, changed_at) AS is_muted,
       argMax(until, changed_at) AS ends, argMax(max_runs, changed_at) AS runs_cap, max(changed_at) AS changed,
       argMax(changed_by, changed_at) AS muted_by, argMax(note, changed_at) AS why
FROM {db}.mast_mutes
GROUP BY signature"""

# The signatures muted now, with their mute's fields and the runs each has shown in since it was muted: a mute ends
# at its time, or when its signature has shown in `max_runs` runs since (<which>: the signatures wanted).
MUTED_NOW = f"""(SELECT m.signature AS signature, m.mode AS mode, m.service_name AS service_name,
           m.agent_name AS agent_name, m.changed AS changed, m.muted_by AS muted_by, m.why AS why,
           m.runs_cap AS runs_cap, uniqExactIf(f.trace_id, f.started_at >= m.changed) AS runs_since,
           if(m.ends >= {NO_END}, '', toString(toDateTime64(m.ends, 3))) AS until_text
    FROM ({LATEST_MUTES}) AS m
    LEFT JOIN {_findings_since("mast_mutes", "muted AND until > now64(9)")} AS f ON f.signature = m.signature
    WHERE m.is_muted AND m.ends > now64(9) AND <which>
    GROUP BY m.signature, m.mode, m.service_name, m.agent_name, m.changed, m.ends, m.muted_by, m.why, m.runs_cap
    HAVING m.runs_cap = 0 OR runs_since < m.runs_cap)"""

# `mastwatch top mutes`: the signatures muted now, the latest first, with the runs each has shown in since (whatever
# the time range: a mute is not of a range).
MUTES = Query(f"""\
SELECT signature, mode, service_name, agent_name, toString(toDateTime64(changed, 3)) AS muted_at,
       until_text AS muted_until, runs_cap AS until_runs, muted_by, runs_since, why AS note
FROM {MUTED_NOW.replace("<which>", "1 = 1")}
ORDER BY changed DESC, signature
LIMIT {{limit}}""")

# A run's findings' signatures muted now.
RUN_MUTES = f"""\
SELECT signature, toString(toDateTime64(changed, 3)) AS muted_at, until_text AS muted_until,
       runs_cap AS until_runs, runs_since, muted_by, why AS note
FROM {MUTED_NOW.replace("<which>", "m.signature IN {signatures:Array(String)}")}"""

# --- resolved signatures --------------------------------------------------------------------------------------

# Each signature's latest resolution: whether it is resolved, since when, by whom and why.
LATEST_RESOLUTIONS = """\
SELECT signature, argMax(failure_mode, changed_at) AS mode, argMax(service, changed_at) AS service_name,
       argMax(agent, changed_at) AS agent_name, argMax(resolved, changed_at) AS is_resolved,
       max(changed_at) AS changed, argMax(changed_by, changed_at) AS resolved_by, argMax(note, changed_at) AS why
FROM {db}.mast_resolutions
GROUP BY signature"""

# The signatures resolved now, with the runs each has shown in since: a regression when there are any (<which>: the
# signatures wanted).
RESOLVED_NOW = f"""(SELECT r.signature AS signature, r.mode AS mode, r.service_name AS service_name,
           r.agent_name AS agent_name, r.changed AS changed, r.resolved_by AS resolved_by, r.why AS why,
           uniqExactIf(f.trace_id, f.started_at >= r.changed) AS runs_since,
           maxIf(f.started_at, f.started_at >= r.changed) AS last_since
    FROM ({LATEST_RESOLUTIONS}) AS r
    LEFT JOIN {_findings_since("mast_resolutions", "resolved")} AS f ON f.signature = r.signature
    WHERE r.is_resolved AND <which>
    GROUP BY r.signature, r.mode, r.service_name, r.agent_name, r.changed, r.resolved_by, r.why)"""

# `mastwatch top resolutions`: the signatures marked fixed, the latest first, with the runs each has shown in since:
# 0 while the fix holds (whatever the time range: a resolution is not of a range).
RESOLUTIONS = Query(f"""\
SELECT signature, mode, service_name, agent_name, toString(toDateTime64(changed, 3)) AS resolved_at, resolved_by,
       runs_since, if(runs_since = 0, '', toString(toDateTime64(last_since, 3))) AS last_seen_since, why AS note
FROM {RESOLVED_NOW.replace("<which>", "1 = 1")}
ORDER BY runs_since > 0 DESC, changed DESC, signature
LIMIT {{limit}}""")

# A run's findings' signatures resolved now.
RUN_RESOLUTIONS = f"""\
SELECT signature, toString(toDateTime64(changed, 3)) AS resolved_at, resolved_by, runs_since, why AS note
FROM {RESOLVED_NOW.replace("<which>", "r.signature IN {signatures:Array(String)}")}"""

SIGNATURES = Query("""\
SELECT s.signature AS signature, s.failure_mode AS mode, s.service AS service_name, s.agent AS agent_name,
       r.runs_in_range AS runs_in_range, s.all_runs AS runs_all_time, r.versions_in_range AS versions,
       toString(toDateTime64(s.first, 3)) AS first_seen_at, toString(toDateTime64(s.last, 3)) AS last_seen_at,
       round(s.wasted, 6) AS wasted_usd, s.model_list AS model_list, s.example AS trace_id,
       rv.n_confirmed AS confirmed_reviews, rv.n_dismissed AS dismissed_reviews,
       if(mu.signature = '', 'no', concat('yes', if(mu.until_text = '', '', concat(', until ', mu.until_text)),
          if(mu.runs_cap = 0, '', concat(', for ', toString(mu.runs_cap - mu.runs_since), ' more runs')))) AS muted,
       if(rs.signature = '', '', if(rs.runs_since = 0, concat('since ', toString(toDateTime64(rs.changed, 3))),
          concat('regressed: ', toString(rs.runs_since), ' runs since ', toString(toDateTime64(rs.changed, 3)))))
           AS resolved,
       multiIf(rs.signature != '' AND rs.runs_since > 0, 'regressed', mu.signature != '', 'muted',
               rs.signature != '', 'resolved', 'open') AS state,
       s.sample_reason AS latest_reason
FROM (SELECT signature, failure_mode, service, agent, uniqMerge(runs) AS all_runs, min(first_seen) AS first,
             max(last_seen) AS last, sum(wasted_cost_usd) AS wasted, groupUniqArrayArray(models) AS model_list,
             arraySort(groupUniqArrayMerge(5)(examples))[1] AS example, anyLast(reason) AS sample_reason
      FROM {db}.mast_signatures
      GROUP BY signature, failure_mode, service, agent) AS s
INNER JOIN (SELECT signature, uniqExact(trace_id) AS runs_in_range,
                   arraySort(arrayFilter(v -> v != '', groupUniqArray(version))) AS versions_in_range
            FROM {db}.mast_findings
            WHERE {rows} AND signature != '' AND {modes}
            GROUP BY signature) AS r ON s.signature = r.signature
LEFT JOIN <reviews> AS rv ON s.signature = rv.signature
LEFT JOIN <mutes> AS mu ON s.signature = mu.signature
LEFT JOIN <resolutions> AS rs ON s.signature = rs.signature
WHERE s.first >= {new_since} AND ({state} = '' OR state = {state})
ORDER BY runs_in_range DESC, s.last DESC, s.signature
LIMIT {limit}""".replace("<reviews>", _SIGNATURE_REVIEWS.replace("<which>", "signature != ''")).replace(
    "<mutes>", MUTED_NOW.replace("<which>", "1 = 1")).replace(
    "<resolutions>", RESOLVED_NOW.replace("<which>", "1 = 1")))

QUERIES = {"agents": AGENT_FAILURES, "spend": SPEND_BY_MODEL, "waste": WASTE, "models": WASTE_BY_MODEL,
           "tools": WASTE_BY_TOOL, "failures": FAILURES, "traces": TRACES, "judge": JUDGE_VERDICTS,
           "signatures": SIGNATURES, "reviews": REVIEWS, "runs": LONGEST_RUNS, "mutes": MUTES,
           "resolutions": RESOLUTIONS, "versions": VERSIONS}


SIGNATURE_STATES = ("", "open", "muted", "resolved", "regressed")  # '': every state


@dataclass(frozen=True)
class Filters:
    since_ns: int
    until_ns: int
    service: str = ""
    agent: str = ""
    model: str = ""
    mode: str = ""
    limit: int = 20
    new_since_ns: int = 0
    state: str = ""

    def query(self) -> dict[str, str]:
        """The filters as URL query parameters (`from_query` reads them back)."""
        return {k: str(v) for k, v in asdict(self).items()}

    @classmethod
    def from_query(cls, query: dict[str, str]) -> Filters:
        """ValueError when a parameter is missing or not of its type."""
        if query.get("state", "") not in SIGNATURE_STATES:
            raise ValueError(f"state is one of {', '.join(s for s in SIGNATURE_STATES if s)}")
        try:
            return cls(since_ns=int(query["since_ns"]), until_ns=int(query["until_ns"]),
                       service=query.get("service", ""), agent=query.get("agent", ""), model=query.get("model", ""),
                       mode=query.get("mode", ""), limit=int(query.get("limit", "20")),
                       new_since_ns=int(query.get("new_since_ns", "0")), state=query.get("state", ""))
        except KeyError as e:
            raise ValueError(f"missing query parameter {e}") from None

    def params(self) -> dict[str, Any]:
        values = asdict(self)
        values["since"], values["until"] = _datetime64(values.pop("since_ns")), _datetime64(values.pop("until_ns"))
        values["new_since"] = _datetime64(values.pop("new_since_ns"))
        return values


def _datetime64(ns: int) -> str:
    seconds, fraction = divmod(ns, 1_000_000_000)
    return f"{datetime.fromtimestamp(seconds, tz=timezone.utc):%Y-%m-%d %H:%M:%S}.{fraction:09d}"


def store_tables(engine: Engine, database: str) -> set[str]:
    """The tables the store's database has (none: no mastwatch has written to it)."""
    return {t["name"] for t in engine.query("SELECT name FROM system.tables WHERE database = {db:String}",
                                            {"db": database})}


class TableMissing(LookupError):
    """The store predates a table the query reads: a store written by an older mastwatch, not upgraded yet."""


def run(engine: Engine, database: str, name: str, filters: Filters) -> list[dict[str, Any]]:
    """Rows of `mastwatch top` query `name` as dicts, columns in SELECT order (TableMissing: the store has not
    got every table the query reads yet)."""
    query = QUERIES[name]
    tables = store_tables(engine, database)
    if not tables:
        raise TableMissing(f"the store has no database {database} with mastwatch's tables: no mastwatch has written "
                           "to it yet (`mastwatch serve` or demo creates them), or exporters.store.database names "
                           "another")
    missing = sorted(set(re.findall(r"\{db\}\.(\w+)", query.sql)) - tables)
    if missing:
        raise TableMissing(f"the store has no table {', '.join(missing)} yet: it was written by an older "
                           "mastwatch; start this version's `mastwatch serve` (or demo) on it once to upgrade it")
    return engine.query(PARAMETERS.render(query, database), filters.params())


def time_bound(text: str, now_ns: int) -> int:
    """`now`, a duration back from now (`24h`, `7d`, `30m`), or a UTC date or time (`2026-05-01T12:00`)."""
    text = text.strip()
    if text == "now":
        return now_ns
    days = re.fullmatch(r"(\d+(?:\.\d+)?)d", text)
    if days:
        return now_ns - int(float(days.group(1)) * 86_400 * 1e9)
    try:
        return now_ns - int(parse_duration(text) * 1e9)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.removesuffix("Z"))
    except ValueError:
        raise ValueError(f"{text!r} is not now, a duration (24h, 7d) or a UTC time (2026-05-01T12:00)") from None
    return int(moment.replace(tzinfo=moment.tzinfo or timezone.utc).timestamp()) * 1_000_000_000 \
        + moment.microsecond * 1000


# --- one run -------------------------------------------------------------------------------------------------------

TRACE_ID = re.compile(r"[0-9a-f]{32}")
STEPS_VERSION = 6  # the schema migration that added mast_steps

# Times as nanoseconds since the epoch (Int64): every engine returns them as the same number.
RUN = """\
SELECT trace_id, service, agent, models, toUnixTimestamp64Nano(started_at) AS started_ns,
       toUnixTimestamp64Nano(ended_at) AS ended_ns, completion, steps, llm_calls, tool_calls, input_tokens,
       output_tokens, cost_usd, failure_modes, repeated_steps, wasted_input_tokens, wasted_output_tokens,
       wasted_cost_usd, wasted_seconds, version, environment
FROM {db}.mast_traces
WHERE trace_id = {trace_id:String}
ORDER BY started_at
LIMIT 1"""

RUN_FINDINGS = """\
SELECT failure_mode, name, category, confidence, basis, evidence, reason, signature
FROM {db}.mast_findings
WHERE trace_id = {trace_id:String}
ORDER BY failure_mode, basis
LIMIT 1 BY failure_mode, basis"""

# A run's steps lie within its start and end: the time bounds leave out the other days' partitions.
RUN_STEPS = """\
SELECT span_id, parent_span_id, kind, name, service, agent, model, tool,
       toUnixTimestamp64Nano(started_at) AS started_ns, toUnixTimestamp64Nano(ended_at) AS ended_ns, error,
       error_type, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, args_fingerprint,
       args_preview, result_preview
FROM {db}.mast_steps
WHERE trace_id = {trace_id:String}
  AND started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')
ORDER BY started_at, span_id
LIMIT 1 BY span_id"""


# A run's spend per model, by model name (a retried insert's copy left out).
RUN_SPEND = """\
SELECT model, calls, cost_usd, priced
FROM {db}.mast_model_spend
WHERE trace_id = {trace_id:String} AND started_at = fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
ORDER BY model
LIMIT 1 BY model"""


# A run's reviews: the latest per mode.
RUN_REVIEWS = """\
SELECT failure_mode, argMax(verdict, reviewed_at) AS verdict, argMax(reviewer, reviewed_at) AS reviewer,
       argMax(note, reviewed_at) AS note, toUnixTimestamp64Nano(max(reviewed_at)) AS reviewed_ns
FROM {db}.mast_reviews
WHERE trace_id = {trace_id:String} AND started_at = fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
GROUP BY failure_mode
ORDER BY failure_mode"""


# The signatures of a run's findings: their runs and first sighting (all time) and their reviews.
RUN_SIGNATURES = """\
SELECT s.signature AS signature, s.runs AS runs, toUnixTimestamp64Nano(s.first) AS first_ns,
       rv.n_confirmed AS confirmed, rv.n_dismissed AS dismissed
FROM (SELECT signature, uniqMerge(runs) AS runs, min(first_seen) AS first FROM {db}.mast_signatures
      WHERE signature IN {signatures:Array(String)} GROUP BY signature) AS s
LEFT JOIN <reviews> AS rv ON s.signature = rv.signature""".replace(
    "<reviews>", _SIGNATURE_REVIEWS.replace("<which>", "signature IN {signatures:Array(String)}"))


@dataclass
class StoredRun:
    """One run as the store holds it: its mast_traces row, its findings (the judge's too) and its steps in start
    order; `no_steps` says why a run has no step rows; `spend`, its calls and USD per model (none for runs stored
    before schema version 7); `reviews`, people's latest word on each mode reviewed; `recurrence`, by signature of
    its findings, the runs that showed it and when first, their reviews (confirmed, dismissed) and, when it is muted
    now, its mute (`mute`: muted_at, muted_until, until_runs, runs_since, muted_by, note) and when it is resolved,
    its resolution (`resolution`: resolved_at, resolved_by, runs_since, note)."""

    run: dict[str, Any]
    findings: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    no_steps: str = ""
    marks: dict[str, list[str]] = field(default_factory=dict)  # span id -> the modes it is evidence of
    spend: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    recurrence: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in self.findings:
            for span in f["evidence"]:
                codes = self.marks.setdefault(span, [])
                if f["failure_mode"] not in codes:
                    codes.append(f["failure_mode"])

    def offset_s(self, ns: int) -> float:
        """Seconds since the run started."""
        return (int(ns) - int(self.run["started_ns"])) / 1e9


def trace_id_of(text: str) -> str:
    """A trace id as the store writes it (32 lowercase hex digits); ValueError naming what is wrong."""
    trace_id = text.strip().lower()
    if not TRACE_ID.fullmatch(trace_id) or trace_id == "0" * 32:
        raise ValueError(f"{text!r} is not a trace id: 32 hexadecimal digits, not all zero")
    return trace_id


def stored_run(engine: Engine, database: str, trace_id: str, steps_setting: str = "findings") -> StoredRun | None:
    """The run `trace_id` (as `trace_id_of` gives it) as the store holds it; None when the store has no row of it.
    `steps_setting` (exporters.store.steps of the reader) only words why a run has no step rows."""
    params: dict[str, Any] = {"trace_id": trace_id}
    rows = engine.query(RUN.replace("{db}", database), params)
    if not rows:
        return None
    run = rows[0]
    findings = engine.query(RUN_FINDINGS.replace("{db}", database), params)
    for f in findings:  # a Float32: a server's client widens it to a double, chDB's JSON prints it shortest
        f["confidence"] = round(float(f["confidence"]), 3)
    tables = store_tables(engine, database)
    spend = engine.query(RUN_SPEND.replace("{db}", database), {**params, "since_ns": int(run["started_ns"])}) \
        if "mast_model_spend" in tables else []
    for s in spend:
        s["priced"] = bool(s["priced"])
    reviews, recurrence = [], {}
    if "mast_reviews" in tables:
        reviews = engine.query(RUN_REVIEWS.replace("{db}", database), {**params, "since_ns": int(run["started_ns"])})
        signatures = sorted({f["signature"] for f in findings if f["signature"]})
        if signatures:
            recurrence = {r.pop("signature"): r for r in engine.query(RUN_SIGNATURES.replace("{db}", database),
                                                                      {"signatures": signatures})}
        for table, query, key in (("mast_mutes", RUN_MUTES, "mute"), ("mast_resolutions", RUN_RESOLUTIONS,
                                                                       "resolution")):
            if signatures and table in tables:
                for row in engine.query(query.replace("{db}", database), {"signatures": signatures}):
                    if row["signature"] in recurrence:
                        recurrence[row.pop("signature")][key] = row
    if "mast_steps" not in tables:
        return StoredRun(run, findings, [], "this store has no table of steps yet: a mastwatch serve of schema "
                         f"version {STEPS_VERSION} or later adds it, and keeps the steps of the runs stored then on",
                         spend=spend, reviews=reviews, recurrence=recurrence)
    steps = engine.query(RUN_STEPS.replace("{db}", database), {**params, "since_ns": int(run["started_ns"]),
                                                           "until_ns": int(run["ended_ns"])})
    for s in steps:
        s["error"] = bool(s["error"])
    return StoredRun(run, findings, steps, "" if steps else _why_no_steps(findings, steps_setting), spend=spend,
                     reviews=reviews, recurrence=recurrence)


def _why_no_steps(findings: list[dict[str, Any]], steps_setting: str) -> str:
    """Why a run has no step rows, as far as the reader can tell (the writer's setting then is not stored)."""
    if not findings and steps_setting != "all":
        return "steps are kept only for runs with findings (exporters.store.steps: findings)"
    return (f"no step rows for this run: it was stored before mastwatch kept steps (schema version {STEPS_VERSION}), "
            "or while exporters.store.steps was off")
