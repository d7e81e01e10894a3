"""ClickHouse tables of verdicts and findings. Trace ids are lowercase hex, as in the `otel_traces` table
of the OpenTelemetry Collector's ClickHouse exporter (TraceId), so the two join."""

from __future__ import annotations

TRACES = "mast_traces"
FINDINGS = "mast_findings"
JUDGEMENTS = "mast_judgements"


TRACE_COLUMNS = ("trace_id", "service", "agent", "models", "started_at", "ended_at", "completion", "steps",
                 "llm_calls", "tool_calls", "input_tokens", "output_tokens", "cost_usd", "failure_modes",
                 "repeated_steps", "wasted_input_tokens", "wasted_output_tokens", "wasted_cost_usd")
FINDING_COLUMNS = ("trace_id", "service", "agent", "started_at", "failure_mode", "category", "name", "confidence",
                   "basis", "evidence", "reason")
JUDGEMENT_COLUMNS = ("trace_id", "service", "agent", "started_at", "judged_at", "model", "failure_mode", "category",
                     "verdict", "structural_confidence", "confidence", "evidence", "reason")
COLUMNS = {TRACES: TRACE_COLUMNS, FINDINGS: FINDING_COLUMNS, JUDGEMENTS: JUDGEMENT_COLUMNS}


def ddl(database: str) -> list[str]:
    return [
        f"CREATE DATABASE IF NOT EXISTS {database}",
        f"""CREATE TABLE IF NOT EXISTS {database}.{TRACES} (
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
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1
) ENGINE = MergeTree
PARTITION BY toDate(started_at)
ORDER BY (service, agent, started_at)""",
        f"""CREATE TABLE IF NOT EXISTS {database}.{FINDINGS} (
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
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1
) ENGINE = MergeTree
PARTITION BY toDate(started_at)
ORDER BY (failure_mode, service, agent, started_at)""",
        f"""CREATE TABLE IF NOT EXISTS {database}.{JUDGEMENTS} (
    trace_id String CODEC(ZSTD(1)),
    service LowCardinality(String),
    agent LowCardinality(String),
    started_at DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1)),
    judged_at DateTime64(9, 'UTC'),
    model LowCardinality(String),
    failure_mode LowCardinality(String),
    category LowCardinality(String),
    verdict LowCardinality(String),
    structural_confidence Nullable(Float32),
    confidence Float32,
    evidence Array(String),
    reason String CODEC(ZSTD(3)),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1
) ENGINE = MergeTree
PARTITION BY toDate(started_at)
ORDER BY (failure_mode, service, agent, started_at)""",
    ]
