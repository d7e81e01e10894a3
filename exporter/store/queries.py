"""The questions FinOps and SREs ask of the store, as parametrised SQL that the CLI (`mastwatch top`) and the
dashboards share.

Each query reads `{db}` (the database, substituted before sending) and ClickHouse query parameters:
{since:DateTime64(9, 'UTC')} and {until:DateTime64(9, 'UTC')} bound the time, {service:String},
{agent:String} and {mode:String} filter when not empty, {limit:UInt32} caps the rows. Results hold only
strings, numbers and arrays, so both engines return the same rows. On a cluster the tables are Distributed
and the trace-id subquery runs as GLOBAL IN.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from mastwatch.durations import parse_duration

from . import Engine

_RANGE = """started_at >= {since:DateTime64(9, 'UTC')} AND started_at < {until:DateTime64(9, 'UTC')}"""
_FILTERS = _RANGE + """
  AND ({service:String} = '' OR service = {service:String})
  AND ({agent:String} = '' OR agent = {agent:String})"""

# Repeated steps by agent and tool; agents ordered by their total waste, each agent's tools by theirs.
WASTE = f"""SELECT service, agent, tool,
    count() AS repeated_steps,
    uniqExact(trace_id) AS traces,
    sum(uncached_input_tokens + cache_read_tokens + cache_write_tokens) AS wasted_input_tokens,
    sum(output_tokens) AS wasted_output_tokens,
    round(sum(cost_usd), 6) AS wasted_cost_usd,
    round(sum(sum(cost_usd)) OVER (PARTITION BY service, agent), 6) AS agent_wasted_cost_usd
FROM {{db}}.mast_repeated_steps
WHERE {_FILTERS}
GROUP BY service, agent, tool
ORDER BY agent_wasted_cost_usd DESC, service, agent, wasted_cost_usd DESC, repeated_steps DESC, tool
LIMIT {{limit:UInt32}}"""

# Failure modes by the traces that show them; share is of all traces within the same filters.
FAILURES = f"""SELECT failure_mode, any(name) AS name, any(category) AS category,
    uniqExact(trace_id) AS traces,
    round(traces / greatest((SELECT count() FROM {{db}}.mast_traces WHERE {_FILTERS}), 1), 4) AS share,
    uniqExact(agent) AS agents,
    round(avg(confidence), 3) AS confidence
FROM {{db}}.mast_findings
WHERE {_FILTERS}
GROUP BY failure_mode
ORDER BY traces DESC, failure_mode
LIMIT {{limit:UInt32}}"""

# Failing traces (those showing {mode} when set), most wasteful first.
TRACES = f"""SELECT trace_id, toString(started_at) AS started, service, agent, failure_modes, steps,
    repeated_steps, round(cost_usd, 6) AS cost_usd, round(wasted_cost_usd, 6) AS wasted_cost_usd
FROM {{db}}.mast_traces
WHERE {_FILTERS}
  AND notEmpty(failure_modes)
  AND ({{mode:String}} = '' OR trace_id GLOBAL IN (
      SELECT trace_id FROM {{db}}.mast_findings WHERE failure_mode = {{mode:String}} AND {_RANGE}))
ORDER BY wasted_cost_usd DESC, cost_usd DESC, started_at DESC, trace_id
LIMIT {{limit:UInt32}}"""

QUERIES = {"waste": WASTE, "failures": FAILURES, "traces": TRACES}


@dataclass(frozen=True)
class Filters:
    since_ns: int
    until_ns: int
    service: str = ""
    agent: str = ""
    mode: str = ""
    limit: int = 20

    def params(self) -> dict[str, Any]:
        values = asdict(self)
        values["since"], values["until"] = _datetime64(values.pop("since_ns")), _datetime64(values.pop("until_ns"))
        return values


def _datetime64(ns: int) -> str:
    seconds, fraction = divmod(ns, 1_000_000_000)
    return f"{datetime.fromtimestamp(seconds, tz=timezone.utc):%Y-%m-%d %H:%M:%S}.{fraction:09d}"


def run(engine: Engine, database: str, name: str, filters: Filters) -> list[dict[str, Any]]:
    """Rows of query `name` (waste, failures, traces) as dicts, columns in SELECT order."""
    return engine.query(QUERIES[name].replace("{db}", database), filters.params())


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
