"""Findings reach the user's own tools as OpenTelemetry GenAI evaluation events: a running mastwatch sends them over
OTLP logs to an OTLP logs endpoint (a gRPC LogsService on loopback, from opentelemetry-proto's own service
definition), each parented to the span that shows the finding, with the semantic conventions' attribute names."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv

from mastwatch.exporter.evaluations import EVENT
from tests.sdk_agents import agent_run, provider, step


class LogsEndpoint(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self) -> None:
        self.requests: list[logs_service_pb2.ExportLogsServiceRequest] = []
        self.arrived = threading.Event()

    def Export(self, request, context):
        self.requests.append(request)
        self.arrived.set()
        return logs_service_pb2.ExportLogsServiceResponse()

    def records(self):
        return [(resource_logs.resource, record) for request in self.requests
                for resource_logs in request.resource_logs for scope in resource_logs.scope_logs
                for record in scope.log_records]


@pytest.fixture
def logs_endpoint() -> Iterator[tuple[str, LogsEndpoint]]:
    endpoint = LogsEndpoint()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(endpoint, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", endpoint
    server.stop(0)


def _value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind)


def test_findings_arrive_as_evaluation_events_on_their_evidence_spans(start_server, logs_endpoint) -> None:
    address, endpoint = logs_endpoint
    running = start_server(exporters__evaluations={"enabled": True, "protocol": "grpc", "endpoint": address})
    tp = provider("grpc", running.grpc_endpoint)
    tracer = tp.get_tracer("looping-agent")
    with agent_run(tracer) as root:
        trace_id = root.get_span_context().trace_id
        for _ in range(4):
            step(tracer, "kubectl_get_pods", {"namespace": "prod"})
    tp.shutdown()
    running.wait_for(lambda: running.sample("mast_traces_total") == 1)
    running.service.stop()  # flushes the events' batch
    assert endpoint.arrived.wait(10)
    events = {}
    for resource, record in endpoint.records():
        assert record.event_name == EVENT
        attributes = {a.key: _value(a.value) for a in record.attributes}
        events[attributes[semconv.GEN_AI_EVALUATION_NAME]] = (record, attributes)
        assert {a.key: _value(a.value) for a in resource.attributes}["service.name"] == "mastwatch"
    record, attributes = events["FM-1.3"]
    assert int.from_bytes(record.trace_id, "big") == trace_id
    assert record.span_id.hex() == attributes["mastwatch.evidence.span_ids"][0]
    assert attributes[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "Step repetition"
    assert 0 < attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] <= 1
    assert "kubectl_get_pods" in attributes[semconv.GEN_AI_EVALUATION_EXPLANATION]
    assert attributes[semconv.GEN_AI_AGENT_NAME] == "sre-bot"
    # the names are the conventions' (v1.41: gen_ai.evaluation.name, .score.value, .score.label, .explanation)
    assert {semconv.GEN_AI_EVALUATION_NAME, semconv.GEN_AI_EVALUATION_SCORE_VALUE,
            semconv.GEN_AI_EVALUATION_SCORE_LABEL, semconv.GEN_AI_EVALUATION_EXPLANATION} == {
        "gen_ai.evaluation.name", "gen_ai.evaluation.score.value", "gen_ai.evaluation.score.label",
        "gen_ai.evaluation.explanation"}
