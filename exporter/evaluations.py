"""Findings as OpenTelemetry GenAI evaluation events (`gen_ai.evaluation.result`), sent over OTLP logs to the
user's Collector, so that a trace UI (Tempo, Jaeger, Langfuse, Phoenix) shows them on the spans they are about.
One event per finding of each final verdict, parented to the finding's first evidence span (its trace and span
id); the attribute names are the semantic conventions' own (opentelemetry-semantic-conventions). The SDK's
batching log processor sends them: a slow or absent endpoint never holds up the processor (its queue drops)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_NAME,
    GEN_AI_EVALUATION_EXPLANATION,
    GEN_AI_EVALUATION_NAME,
    GEN_AI_EVALUATION_SCORE_LABEL,
    GEN_AI_EVALUATION_SCORE_VALUE,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from pydantic import BaseModel, ConfigDict, Field

from mastwatch import __version__
from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.published import Increment
from mastwatch.collector.model.verdict import Verdict

log = logging.getLogger(__name__)
EVENT = "gen_ai.evaluation.result"  # semantic conventions, model/gen-ai/events.yaml


class EvaluationEventsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(False, description="send findings as gen_ai.evaluation.result events over OTLP logs")
    endpoint: str = Field("http://localhost:4318/v1/logs", description="the OTLP logs endpoint (a Collector's): "
                          "the full URL for http/protobuf, host:port for grpc")
    protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    insecure: bool = Field(True, description="grpc without TLS")
    headers: dict[str, str] = Field(default_factory=dict, description="sent with each export (e.g. authorization)")


def _exporter(config: EvaluationEventsConfig) -> LogRecordExporter:
    if config.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter

        return GrpcLogExporter(endpoint=config.endpoint, insecure=config.insecure, headers=config.headers or None)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter

    return HttpLogExporter(endpoint=config.endpoint, headers=config.headers or None)


def event_attributes(verdict: Verdict, code: str, confidence: float, reason: str, basis: str,
                     evidence: list[bytes]) -> dict[str, Any]:
    mode = MODES[code]
    return {GEN_AI_EVALUATION_NAME: code, GEN_AI_EVALUATION_SCORE_LABEL: mode.name,
            GEN_AI_EVALUATION_SCORE_VALUE: confidence, GEN_AI_EVALUATION_EXPLANATION: reason,
            GEN_AI_AGENT_NAME: verdict.agent, "mastwatch.failure_mode.category": mode.category,
            "mastwatch.basis": basis, "mastwatch.evidence.span_ids": [s.hex() for s in evidence]}


class EvaluationEventsExporter:
    """Implements the processor's Exporter protocol (final verdicts only: live findings may still change)."""

    def __init__(self, config: EvaluationEventsConfig, exporter: LogRecordExporter | None = None) -> None:
        self.config = config
        self.provider = LoggerProvider(resource=Resource.create({"service.name": "mastwatch",
                                                                 "service.version": __version__}))
        self.provider.add_log_record_processor(BatchLogRecordProcessor(exporter or _exporter(config)))
        self.logger = self.provider.get_logger("mastwatch", __version__)

    def export_increments(self, increments: list[Increment]) -> None:
        pass

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        for verdict in verdicts:
            trace_id = int(verdict.trace_id, 16)
            for code, finding in verdict.findings.items():
                span_id = int.from_bytes(finding.evidence[0], "big") if finding.evidence else 0
                context = None
                if span_id:
                    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
                    context = set_span_in_context(NonRecordingSpan(parent))
                self.logger.emit(event_name=EVENT, context=context, timestamp=verdict.ended_at_ns,
                                 severity_number=SeverityNumber.INFO, attributes=event_attributes(
                                     verdict, code, finding.confidence, finding.reason, finding.basis,
                                     finding.evidence))

    def flush(self, timeout_ms: int = 10_000) -> bool:
        return self.provider.force_flush(timeout_ms)

    def shutdown(self) -> None:
        self.provider.shutdown()
