"""ClickHouse tables of verdicts, findings, repeated steps, the judge's assessments, the steps of runs, their spend
per model, people's reviews of findings and the failure signatures muted and resolved, their versioned migrations,
and the DDL for one server (MergeTree) or a cluster (ReplicatedMergeTree plus Distributed tables).

Trace ids are lowercase hex, as in the `otel_traces` table of the OpenTelemetry Collector's ClickHouse
exporter (TraceId), so the two join. Every table is partitioned by day and ordered for the dashboards'
filters (service, agent, time; findings first by failure mode), with a bloom-filter skip index on trace_id;
mast_steps, read one trace at a time, is ordered by trace id.

Migrations are applied in order at start and recorded in `mast_schema_migrations`; each statement is
idempotent, so a migration interrupted half way, or run by two replicas at once, is simply run again.
On a cluster the tables' real data lives in `<table>_local` (ReplicatedMergeTree, ON CLUSTER) and `<table>`
is a Distributed table over them, sharded by trace id so a trace's rows share a shard: inserts and queries
use the same names in both layouts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Engine

TRACES = "mast_traces"
FINDINGS = "mast_findings"
REPEATED_STEPS = "mast_repeated_steps"
JUDGEMENTS = "mast_judgements"
SIGNATURES = "mast_signatures"
STEPS = "mast_steps"
MODEL_SPEND = "mast_model_spend"
REVIEWS = "mast_reviews"
MUTES = "mast_mutes"
RESOLUTIONS = "mast_resolutions"
MIGRATIONS_TABLE = "mast_schema_migrations"

# Blocks whose deduplication tokens a plain MergeTree remembers: a retried batch with the same token is
# dropped. ReplicatedMergeTree deduplicates by default (replicated_deduplication_window).
DEDUP_WINDOW = 1000
TIME = "DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1))"
COUNT = "UInt32 CODEC(T64, ZSTD(1))"


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # with its codec, as written in CREATE TABLE

    @property
    def type_name(self) -> str:
        """The type alone (what a client encodes values as)."""
        return self.type.split(" CODEC(")[0]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    order_by: str

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _columns(spec: str) -> tuple[Column, ...]:
    """'name Type CODEC(...),\\n...' -> Columns (one per line)."""
    return tuple(Column(*line.strip().rstrip(",").split(" ", 1)) for line in spec.strip().splitlines())


TABLES = {t.name: t for t in (
    Table(TRACES, _columns("""
        trace_id String CODEC(ZSTD(1)),
        service LowCardinality(String),
        agent LowCardinality(String),
        models Array(LowCardinality(String)),
        started_at DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1)),
        ended_at DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1)),
        completion LowCardinality(String),
        steps UInt32,
        llm_calls UInt32,
        tool_calls UInt32,
        input_tokens UInt64,
        output_tokens UInt64,
        cost_usd Float64,
        failure_modes Array(LowCardinality(String)),
        repeated_steps UInt32,
        wasted_input_tokens UInt64,
        wasted_output_tokens UInt64,
        wasted_cost_usd Float64,
        wasted_seconds Float64,
        version LowCardinality(String),
        environment LowCardinality(String)"""), "(service, agent, started_at)"),
    Table(FINDINGS, _columns("""
        trace_id String CODEC(ZSTD(1)),
        service LowCardinality(String),
        agent LowCardinality(String),
        started_at DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1)),
        failure_mode LowCardinality(String),
        category LowCardinality(String),
        name LowCardinality(String),
        confidence Float32,
        basis LowCardinality(String),
        evidence Array(String),
        reason String CODEC(ZSTD(3)),
        signature String CODEC(ZSTD(1)),
        models Array(LowCardinality(String)),
        wasted_cost_usd Float64,
        wasted_seconds Float64,
        version LowCardinality(String)"""), "(failure_mode, service, agent, started_at)"),
    # One row per repeated step. Tokens and cost are those of the model call that produced the step,
    # counted at the first repeated step it produced (0 at the others), so sums match the verdict's waste.
    # uncached_input + output + cache_read + cache_write tokens are all the tokens of that call. Seconds are
    # the step's own time, plus that call's where its tokens are counted.
    Table(REPEATED_STEPS, _columns(f"""
        trace_id String CODEC(ZSTD(1)),
        span_id String CODEC(ZSTD(1)),
        service LowCardinality(String),
        agent LowCardinality(String),
        failure_mode LowCardinality(String),
        tool LowCardinality(String),
        args_fingerprint UInt64 CODEC(ZSTD(1)),
        model LowCardinality(String),
        uncached_input_tokens {COUNT},
        output_tokens {COUNT},
        cache_read_tokens {COUNT},
        cache_write_tokens {COUNT},
        cost_usd Float64 CODEC(Gorilla, ZSTD(1)),
        started_at {TIME},
        seconds Float64 CODEC(Gorilla, ZSTD(1))"""), "(service, agent, tool, started_at)"),
    # One row per mode the judge assessed in a trace: its verdict against the structural one
    # (found, confirmed, rejected, not_found); its positive answers are also mast_findings rows, basis judge.
    Table(JUDGEMENTS, _columns(f"""
        trace_id String CODEC(ZSTD(1)),
        service LowCardinality(String),
        agent LowCardinality(String),
        started_at {TIME},
        judged_at DateTime64(9, 'UTC'),
        model LowCardinality(String),
        failure_mode LowCardinality(String),
        category LowCardinality(String),
        verdict LowCardinality(String),
        structural_confidence Nullable(Float32),
        confidence Float32,
        evidence Array(String),
        reason String CODEC(ZSTD(3))"""), "(failure_mode, service, agent, started_at)"),
    # One row per step of a run (exporters.store.steps: the runs with findings by default), for reading one run:
    # the step's own service and agent (the span's), its tokens (input: all of them, cache reads and writes
    # included) and its price when its model has one. The previews are captured content: empty unless content
    # storage is opted in.
    Table(STEPS, _columns(f"""
        trace_id String CODEC(ZSTD(1)),
        span_id String CODEC(ZSTD(1)),
        parent_span_id String CODEC(ZSTD(1)),
        kind LowCardinality(String),
        name LowCardinality(String),
        service LowCardinality(String),
        agent LowCardinality(String),
        model LowCardinality(String),
        tool LowCardinality(String),
        started_at {TIME},
        ended_at {TIME},
        error Bool,
        error_type LowCardinality(String),
        input_tokens {COUNT},
        output_tokens {COUNT},
        cache_read_tokens {COUNT},
        cache_write_tokens {COUNT},
        cost_usd Float64 CODEC(Gorilla, ZSTD(1)),
        args_fingerprint UInt64 CODEC(ZSTD(1)),
        args_preview String CODEC(ZSTD(3)),
        result_preview String CODEC(ZSTD(3))"""), "(trace_id, started_at, span_id)"),
    # One row per model a run called: its calls and their seconds, its tokens by type (as mast_repeated_steps),
    # its price (priced false: a model without one, cost 0), and what its repeated steps burnt (as mast_traces'
    # wasted_* columns, for this model), so that spend and waste sum per model over every run, not only looping ones.
    Table(MODEL_SPEND, _columns(f"""
        trace_id String CODEC(ZSTD(1)),
        service LowCardinality(String),
        agent LowCardinality(String),
        model LowCardinality(String),
        started_at {TIME},
        calls {COUNT},
        seconds Float64 CODEC(Gorilla, ZSTD(1)),
        uncached_input_tokens UInt64 CODEC(T64, ZSTD(1)),
        output_tokens UInt64 CODEC(T64, ZSTD(1)),
        cache_read_tokens UInt64 CODEC(T64, ZSTD(1)),
        cache_write_tokens UInt64 CODEC(T64, ZSTD(1)),
        cost_usd Float64 CODEC(Gorilla, ZSTD(1)),
        priced Bool,
        repeated_steps {COUNT},
        wasted_input_tokens UInt64 CODEC(T64, ZSTD(1)),
        wasted_output_tokens UInt64 CODEC(T64, ZSTD(1)),
        wasted_cost_usd Float64 CODEC(Gorilla, ZSTD(1))"""), "(service, agent, model, started_at)"),
    # One row per review: a person's word on a run's finding (confirmed, dismissed) or on a mode the run shows that
    # nothing found (missed), with the run's service, agent and start, and the bases of the finding reviewed. A
    # later review of the same run and mode replaces an earlier one in the figures (argMax by reviewed_at); the
    # rows stay, as the history.
    Table(REVIEWS, _columns(f"""
        trace_id String CODEC(ZSTD(1)),
        service LowCardinality(String),
        agent LowCardinality(String),
        started_at {TIME},
        failure_mode LowCardinality(String),
        verdict LowCardinality(String),
        bases Array(LowCardinality(String)),
        reviewer LowCardinality(String),
        reviewed_at DateTime64(9, 'UTC'),
        note String CODEC(ZSTD(3))"""), "(failure_mode, service, agent, started_at)"),
)}
COLUMNS = {name: t.column_names for name, t in TABLES.items()}


@dataclass(frozen=True)
class Layout:
    """Where the tables live: a database, optionally on a cluster; rows expire after `ttl_days` (0: never), a
    table's after its own days when `table_ttl_days` names it."""

    database: str = "mastwatch"
    cluster: str = ""
    ttl_days: int = 0
    table_ttl_days: tuple[tuple[str, int], ...] = ()  # (table, days), days 0: kept

    def ttl_for(self, table: str) -> int:
        return dict(self.table_ttl_days).get(table, self.ttl_days)

    def on_cluster(self) -> str:
        return f" ON CLUSTER {quote(self.cluster)}" if self.cluster else ""

    def storage(self, table: str) -> str:
        """The table that holds the rows: `<table>_local` on a cluster."""
        return f"{self.database}.{table}_local" if self.cluster else f"{self.database}.{table}"


def quote(identifier: str) -> str:
    return identifier if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", identifier) else \
        "`" + identifier.replace("\\", "\\\\").replace("`", "\\`") + "`"


def create_table(table: Table, layout: Layout, dedup: bool = True) -> list[str]:
    """CREATE TABLE statements for `table`: one, or the local and Distributed tables on a cluster."""
    body = ",\n".join([f"    {c.name} {c.type}" for c in table.columns]
                      + ["    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1"])
    engine = "ReplicatedMergeTree" if layout.cluster else "MergeTree"
    dedup = dedup and not layout.cluster
    settings = f"\nSETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}" if dedup else ""
    statements = [f"CREATE TABLE IF NOT EXISTS {layout.storage(table.name)}{layout.on_cluster()} (\n{body}\n)"
                  f" ENGINE = {engine}\nPARTITION BY toDate(started_at)\nORDER BY {table.order_by}{settings}"]
    if layout.cluster:
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {layout.database}.{table.name}{layout.on_cluster()} AS "
            f"{layout.storage(table.name)}\nENGINE = Distributed({quote(layout.cluster)}, {layout.database}, "
            f"{table.name}_local, cityHash64(trace_id))")
    return statements


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: Callable[[Layout], list[str]]


def _dedup(layout: Layout) -> list[str]:
    if layout.cluster:  # replicated tables deduplicate retried blocks already
        return []
    return [f"ALTER TABLE {layout.storage(name)} MODIFY SETTING non_replicated_deduplication_window = {DEDUP_WINDOW}"
            for name in (TRACES, FINDINGS)]


SIGNATURE_COLUMNS = ("signature", "models", "wasted_cost_usd")  # mast_findings' columns since version 5
FINDINGS_V4_WIDTH = 11  # the columns of mast_findings before them


def _signatures(layout: Layout) -> list[str]:
    """mast_findings' signature, models and waste, and mast_signatures: one row per signature, service and agent,
    kept by a materialized view from the finding rows as they are inserted (aggregate states: merged across
    inserts, parts and, through the Distributed table, shards). It has no TTL: a signature's first sighting
    outlives its findings."""
    on_cluster = layout.on_cluster()
    new = [c for c in TABLES[FINDINGS].columns if c.name in SIGNATURE_COLUMNS]
    adds = ", ".join(f"ADD COLUMN IF NOT EXISTS {c.name} {c.type}" for c in new)
    statements = [f"ALTER TABLE {layout.storage(FINDINGS)}{on_cluster} {adds}"]
    if layout.cluster:
        statements.append(f"ALTER TABLE {layout.database}.{FINDINGS}{on_cluster} {adds}")
    engine = "ReplicatedAggregatingMergeTree" if layout.cluster else "AggregatingMergeTree"
    statements.append(
        f"CREATE TABLE IF NOT EXISTS {layout.storage(SIGNATURES)}{on_cluster} (\n"
        "    signature String,\n    failure_mode LowCardinality(String),\n    service LowCardinality(String),\n"
        "    agent LowCardinality(String),\n    reason SimpleAggregateFunction(anyLast, String),\n"
        "    first_seen SimpleAggregateFunction(min, DateTime64(9, 'UTC')),\n"
        "    last_seen SimpleAggregateFunction(max, DateTime64(9, 'UTC')),\n"
        "    runs AggregateFunction(uniq, String),\n"
        "    wasted_cost_usd SimpleAggregateFunction(sum, Float64),\n"
        "    models SimpleAggregateFunction(groupUniqArrayArray, Array(String)),\n"
        "    examples AggregateFunction(groupUniqArray(5), String)\n"
        f") ENGINE = {engine}\nORDER BY (signature, failure_mode, service, agent)")
    if layout.cluster:
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {layout.database}.{SIGNATURES}{on_cluster} AS {layout.storage(SIGNATURES)}\n"
            f"ENGINE = Distributed({quote(layout.cluster)}, {layout.database}, {SIGNATURES}_local, "
            "cityHash64(signature))")
    statements.append(
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {layout.database}.{SIGNATURES}_mv{on_cluster} "
        f"TO {layout.storage(SIGNATURES)} AS\n"
        "SELECT signature, failure_mode, service, agent, anyLast(reason) AS reason, min(started_at) AS first_seen,\n"
        "       max(started_at) AS last_seen, uniqState(trace_id) AS runs, sum(wasted_cost_usd) AS wasted_cost_usd,\n"
        "       groupUniqArrayArray(models) AS models, groupUniqArrayState(5)(trace_id) AS examples\n"
        f"FROM {layout.storage(FINDINGS)}\nWHERE signature != ''\nGROUP BY signature, failure_mode, service, agent")
    return statements


# Columns added to tables after they were made: the time of repeated steps (per run, per finding and per repeated
# step), then each run's version and environment (its findings' the version: which release a problem shows in).
WASTED_TIME_COLUMNS = {TRACES: "wasted_seconds", FINDINGS: "wasted_seconds", REPEATED_STEPS: "seconds"}
RELEASE_COLUMNS: dict[str, tuple[str, ...]] = {TRACES: ("version", "environment"), FINDINGS: ("version",)}


def _add_columns(added: dict[str, tuple[str, ...]]) -> Callable[[Layout], list[str]]:
    """A migration adding these columns to their tables (empty, or 0, in the rows written before)."""
    def statements(layout: Layout) -> list[str]:
        out = []
        for table, names in added.items():
            adds = ", ".join(f"ADD COLUMN IF NOT EXISTS {c.name} {c.type}" for c in TABLES[table].columns
                             if c.name in names)
            out.append(f"ALTER TABLE {layout.storage(table)}{layout.on_cluster()} {adds}")
            if layout.cluster:
                out.append(f"ALTER TABLE {layout.database}.{table}{layout.on_cluster()} {adds}")
        return out
    return statements


def _decisions(layout: Layout, table: str, columns: str) -> list[str]:
    """A table of people's decisions on failure signatures: one row each time one is made, with the signature's
    mode, service and agent, `columns` (the decision), when, by whom and why; the latest row of a signature decides.
    Like mast_signatures it has no TTL, and on a cluster it is sharded by signature."""
    on_cluster = layout.on_cluster()
    engine = "ReplicatedMergeTree" if layout.cluster else "MergeTree"
    statements = [
        f"CREATE TABLE IF NOT EXISTS {layout.storage(table)}{on_cluster} (\n"
        "    signature String,\n    failure_mode LowCardinality(String),\n    service LowCardinality(String),\n"
        f"    agent LowCardinality(String),\n{columns}    changed_at DateTime64(9, 'UTC'),\n"
        "    changed_by LowCardinality(String),\n    note String CODEC(ZSTD(3))\n"
        f") ENGINE = {engine}\nORDER BY (signature, changed_at)"]
    if layout.cluster:
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {layout.database}.{table}{on_cluster} AS {layout.storage(table)}\n"
            f"ENGINE = Distributed({quote(layout.cluster)}, {layout.database}, {table}_local, cityHash64(signature))")
    return statements


def _mutes(layout: Layout) -> list[str]:
    """mast_mutes: a failure signature muted (a known problem not to alert on: until when, or until how many more
    runs, `max_runs`, 0 for none) or unmuted."""
    statements = _decisions(layout, MUTES, "    muted Bool,\n    until DateTime64(9, 'UTC'),\n    max_runs UInt32,\n")
    # the runs a muted signature has shown in since are read by signature: new parts (and merged ones) index it
    statements.append(f"ALTER TABLE {layout.storage(FINDINGS)}{layout.on_cluster()} ADD INDEX IF NOT EXISTS "
                      "idx_signature signature TYPE bloom_filter(0.01) GRANULARITY 1")
    return statements


def _resolutions(layout: Layout) -> list[str]:
    """mast_resolutions: a failure signature marked fixed, or reopened."""
    return _decisions(layout, RESOLUTIONS, "    resolved Bool,\n")


MIGRATIONS = (
    Migration(1, "verdicts and findings", lambda layout: create_table(TABLES[TRACES], layout, dedup=False)
              + create_table(TABLES[FINDINGS], layout, dedup=False)),
    Migration(2, "a retried insert is deduplicated by its token", _dedup),
    Migration(3, "repeated steps", lambda layout: create_table(TABLES[REPEATED_STEPS], layout)),
    Migration(4, "the judge's assessments", lambda layout: create_table(TABLES[JUDGEMENTS], layout)),
    Migration(5, "failure signatures", _signatures),
    Migration(6, "the steps of runs", lambda layout: create_table(TABLES[STEPS], layout)),
    Migration(7, "spend per run and model", lambda layout: create_table(TABLES[MODEL_SPEND], layout)),
    Migration(8, "reviews of findings", lambda layout: create_table(TABLES[REVIEWS], layout)),
    Migration(9, "muted failure signatures", _mutes),
    Migration(10, "resolved failure signatures", _resolutions),
    Migration(11, "time of repeated steps", _add_columns({t: (n,) for t, n in WASTED_TIME_COLUMNS.items()})),
    Migration(12, "the version and environment of runs", _add_columns(RELEASE_COLUMNS)),
)
VERSION = MIGRATIONS[-1].version


def bootstrap(layout: Layout) -> list[str]:
    """The database and the migrations table (on a cluster one replica set spans all shards)."""
    engine = (f"ReplicatedReplacingMergeTree('/clickhouse/tables/{{database}}/{MIGRATIONS_TABLE}', '{{replica}}')"
              if layout.cluster else "ReplacingMergeTree")
    return [f"CREATE DATABASE IF NOT EXISTS {layout.database}{layout.on_cluster()}",
            f"CREATE TABLE IF NOT EXISTS {layout.database}.{MIGRATIONS_TABLE}{layout.on_cluster()} (\n"
            "    version UInt32,\n    applied_at DateTime64(3, 'UTC') DEFAULT now64(3),\n    description String\n"
            f") ENGINE = {engine}\nORDER BY version"]


def record(layout: Layout, migration: Migration) -> str:
    description = migration.description.replace("\\", "\\\\").replace("'", "\\'")
    return (f"INSERT INTO {layout.database}.{MIGRATIONS_TABLE} (version, description) "
            f"VALUES ({migration.version}, '{description}')")


def ttl_expression(days: int) -> str:
    """As ClickHouse prints it back in system.tables.engine_full."""
    return f"toDateTime(started_at) + toIntervalDay({days})"


def ttl_statement(layout: Layout, table: str, current: str | None) -> str | None:
    """The ALTER that makes `table`'s TTL match the layout's for it, or None when it does (`current`: the
    table's TTL expression now). Altering only on a change avoids rewriting parts at every start."""
    days = layout.ttl_for(table)
    wanted = ttl_expression(days) if days else None
    if wanted == current:
        return None
    action = f"MODIFY TTL {wanted}" if wanted else "REMOVE TTL"
    return f"ALTER TABLE {layout.storage(table)}{layout.on_cluster()} {action}"


def current_ttl(engine_full: str) -> str | None:
    """The TTL expression in a table's engine_full, if any."""
    match = re.search(r"\bTTL (.+?)(?: SETTINGS |$)", engine_full)
    return match.group(1) if match else None


def ddl(layout: Layout) -> list[str]:
    """Everything mastwatch runs on an empty database, in order: what `mastwatch schema` prints."""
    statements = bootstrap(layout)
    for migration in MIGRATIONS:
        statements += migration.statements(layout)
        statements.append(record(layout, migration))
    statements += [s for s in (ttl_statement(layout, name, None) for name in TABLES) if s]
    return statements


def migrate(engine: Engine, layout: Layout) -> list[int]:
    """Apply the migrations not applied yet, then match the TTL to the configuration; returns the versions
    applied now."""
    for statement in bootstrap(layout):
        engine.command(statement)
    rows = engine.query(f"SELECT DISTINCT version FROM {layout.database}.{MIGRATIONS_TABLE}")
    applied = {int(r["version"]) for r in rows}
    done = []
    for migration in MIGRATIONS:
        if migration.version not in applied:
            for statement in migration.statements(layout):
                engine.command(statement)
            engine.command(record(layout, migration))
            done.append(migration.version)
    for name in TABLES:
        database, _, table = layout.storage(name).partition(".")
        rows = engine.query("SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {t:String}",
                            {"db": database, "t": table})
        alter = ttl_statement(layout, name, current_ttl(rows[0]["engine_full"]) if rows else None)
        if alter:
            engine.command(alter)
    return done
