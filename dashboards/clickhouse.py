"""Every ClickHouse query of the dashboards, in one place.

Output aliases never reuse a column's name: ClickHouse resolves aliases in WHERE too, so an alias
`models` would turn a filter on the `models` array into one on a string.

Each query is a template over the store's tables (`{db}`: the database, `{where}`: the dashboard's filter on
its variables) written for Grafana's ClickHouse data source (grafana-clickhouse-datasource): time macros
($__timeFilter, $__timeInterval, $__fromTime/$__toTime) and variables (${service:sqlstring}) are expanded by
Grafana and the plugin; `macros.expand` does the same for `mastwatch report` and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Filters on the dashboards' variables. Trace rows carry the models they used; finding rows do not.
FLEET = "$__conditionalAll(service IN (${service:sqlstring}), $service)"
AGENT = "service = ${service:sqlstring} AND agent = ${agent:sqlstring}"
AGENT_MODEL = AGENT + " AND $__conditionalAll(hasAny(models, [${model:sqlstring}]), $model)"


@dataclass(frozen=True)
class Query:
    sql: str
    format: Literal["timeseries", "table"]

    def render(self, database: str, where: str) -> str:
        return self.sql.replace("{db}", database).replace("{where}", where)


FINDINGS_OVER_TIME = Query("""\
SELECT $__timeInterval(started_at) AS time, failure_mode, count() AS traces
FROM {db}.mast_findings
WHERE $__timeFilter(started_at) AND {where}
GROUP BY time, failure_mode
ORDER BY time""", "timeseries")

FAILING_SHARE_OVER_TIME = Query("""\
SELECT $__timeInterval(started_at) AS time, agent, countIf(notEmpty(failure_modes)) / count() AS failing
FROM {db}.mast_traces
WHERE $__timeFilter(started_at) AND {where}
GROUP BY time, agent
ORDER BY time""", "timeseries")

AGENTS_BY_FAILURE_RATE = Query("""\
SELECT service, agent, count() AS runs, countIf(notEmpty(failure_modes)) AS failing, failing / runs AS share,
       topKArray(3)(failure_modes) AS top_modes
FROM {db}.mast_traces
WHERE $__timeFilter(started_at) AND {where}
GROUP BY service, agent
HAVING runs >= 10
ORDER BY share DESC, runs DESC
LIMIT 20""", "table")

FINDINGS_BY_MODE = Query("""\
SELECT failure_mode, any(name) AS name, any(category) AS category, count() AS traces,
       uniqExact(service, agent) AS agents, avg(confidence) AS confidence,
       topK(1)(basis)[1] AS basis, argMax(reason, started_at) AS latest_reason
FROM {db}.mast_findings
WHERE $__timeFilter(started_at) AND {where}
GROUP BY failure_mode
ORDER BY traces DESC""", "table")

RECENT_FINDINGS = Query("""\
SELECT started_at AS time, service, agent, failure_mode, name, confidence, basis, reason,
       arrayStringConcat(evidence, ' ') AS evidence, trace_id
FROM {db}.mast_findings
WHERE $__timeFilter(started_at) AND {where}
ORDER BY started_at DESC
LIMIT 200""", "table")

RECENT_TRACES = Query("""\
SELECT started_at AS time, dateDiff('millisecond', started_at, ended_at) / 1000 AS duration,
       arrayStringConcat(failure_modes, ' ') AS modes, arrayStringConcat(models, ' ') AS model_list, steps,
       llm_calls, tool_calls, input_tokens + output_tokens AS tokens, cost_usd, repeated_steps, wasted_cost_usd,
       completion, trace_id
FROM {db}.mast_traces
WHERE $__timeFilter(started_at) AND {where}
ORDER BY started_at DESC
LIMIT 200""", "table")

SPEND_SUMMARY = Query("""\
SELECT count() AS runs, countIf(notEmpty(failure_modes)) / runs AS failing_share, sum(cost_usd) AS spend_usd,
       sum(wasted_cost_usd) AS wasted_usd, wasted_usd / spend_usd AS wasted_share
FROM {db}.mast_traces
WHERE $__timeFilter(started_at) AND {where}""", "table")

WASTED_OVER_TIME = Query("""\
SELECT $__timeInterval(started_at) AS time, agent, sum(wasted_cost_usd) AS wasted_usd
FROM {db}.mast_traces
WHERE $__timeFilter(started_at) AND {where}
GROUP BY time, agent
ORDER BY time""", "timeseries")

WASTED_BY_AGENT = Query("""\
SELECT service, agent, count() AS runs, countIf(repeated_steps > 0) AS looping_runs, sum(repeated_steps) AS repeated,
       sum(wasted_input_tokens + wasted_output_tokens) AS wasted_tokens, sum(cost_usd) AS spend_usd,
       sum(wasted_cost_usd) AS wasted_usd, if(spend_usd > 0, wasted_usd / spend_usd, 0) AS wasted_share
FROM {db}.mast_traces
WHERE $__timeFilter(started_at) AND {where}
GROUP BY service, agent
ORDER BY wasted_usd DESC""", "table")

COSTLIEST_LOOPS = Query("""\
SELECT started_at AS time, service, agent, arrayStringConcat(models, ' ') AS model_list, repeated_steps,
       wasted_input_tokens + wasted_output_tokens AS wasted_tokens, wasted_cost_usd, cost_usd, trace_id
FROM {db}.mast_traces
WHERE $__timeFilter(started_at) AND repeated_steps > 0 AND {where}
ORDER BY wasted_cost_usd DESC, repeated_steps DESC
LIMIT 50""", "table")
