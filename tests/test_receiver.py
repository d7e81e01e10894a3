"""The OTLP receiver per the specification: partial success, malformed and oversized requests, backpressure."""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.processor import Processor
from mastwatch.collector.receiver import GrpcConfig, HttpConfig
from mastwatch.collector.receiver.decode import decode
from mastwatch.collector.receiver.grpc_server import METHOD, GrpcReceiver
from mastwatch.collector.receiver.http_server import OtlpHttpServer
from mastwatch.collector.receiver.otlp_json import to_json
from mastwatch.exporter.prometheus import PrometheusExporter, PrometheusExporterConfig
from tests.sdk_agents import agent_run, provider, step


def request_of(n_spans: int, trace: int = 1, root: bool = True) -> ExportTraceServiceRequest:
    spans = []
    for i in range(n_spans):
        span = Span(trace_id=trace.to_bytes(16, "big"), span_id=(i + 1).to_bytes(8, "big"), name="execute_tool t",
                    start_time_unix_nano=1_000 + i, end_time_unix_nano=2_000 + i,
                    attributes=[KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="execute_tool")),
                                KeyValue(key="gen_ai.tool.name", value=AnyValue(string_value="t"))])
        if i or not root:
            span.parent_span_id = (1).to_bytes(8, "big")
        spans.append(span)
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])


def post(url: str, body: bytes, content_type: str = "application/x-protobuf", **headers: str):
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def grpc_export(endpoint: str, body: bytes, timeout: float = 5.0):
    with grpc.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        return call.with_call(body, timeout=timeout)


def test_http_protobuf_json_and_gzip_are_accepted(server) -> None:
    status, headers, body = post(server.http_url, request_of(3, trace=10).SerializeToString())
    assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
    assert ExportTraceServiceResponse.FromString(body) == ExportTraceServiceResponse()
    status, headers, body = post(server.http_url, gzip.compress(to_json(request_of(2, trace=11)).encode()),
                                 "application/json", **{"Content-Encoding": "gzip"})
    assert status == 200 and headers["Content-Type"] == "application/json" and json.loads(body) == {}
    server.wait_for(lambda: server.sample("mast_traces_total") == 2)
    assert server.sample("mastwatch_spans_processed_total") == 5


def test_invalid_spans_are_rejected_with_partial_success_and_the_rest_kept(server) -> None:
    request = request_of(4, trace=20)
    request.resource_spans[0].scope_spans[0].spans[2].span_id = b"\x01\x02"  # not 8 bytes
    request.resource_spans[0].scope_spans[0].spans[3].trace_id = bytes(16)  # all zero
    status, _, body = post(server.http_url, request.SerializeToString())
    response = ExportTraceServiceResponse.FromString(body)
    assert status == 200 and response.partial_success.rejected_spans == 2
    assert "trace_id must be 16 bytes" in response.partial_success.error_message
    raw, _ = grpc_export(server.grpc_endpoint, request.SerializeToString())
    assert ExportTraceServiceResponse.FromString(raw).partial_success.rejected_spans == 2
    server.wait_for(lambda: server.sample("mastwatch_spans_processed_total") == 4)
    assert server.sample("mastwatch_spans_rejected_total", reason="invalid_id") == 4


def test_malformed_requests_get_invalid_argument_and_the_stream_goes_on(server) -> None:
    status, _, body = post(server.http_url, b"\xff\xff\xff garbage")
    assert status == 400 and Status.FromString(body).code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    status, _, body = post(server.http_url, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
                           "application/json")
    assert status == 400 and "not hex" in json.loads(body)["message"]
    status, _, body = post(server.http_url, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "abc"}]}]}]}',
                           "application/json")
    assert status == 400 and "'abc' has an odd number of hex digits" in json.loads(body)["message"]
    status, _, _ = post(server.http_url, b"not gzip", **{"Content-Encoding": "gzip"})
    assert status == 400
    status, _, _ = post(server.http_url, b"{}", "text/plain")
    assert status == 415
    status, _, body = post(server.http_url, b"{}", "application/json", **{"Content-Encoding": "br"})
    assert status == 415 and "unsupported Content-Encoding 'br'" in json.loads(body)["message"]
    with pytest.raises(grpc.RpcError) as err:
        grpc_export(server.grpc_endpoint, b"\xff\xff\xff garbage")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert server.sample("mastwatch_requests_rejected_total", reason="malformed") == 5
    # the same connections and server carry on with good traffic
    assert post(server.http_url, request_of(2, trace=30).SerializeToString())[0] == 200
    grpc_export(server.grpc_endpoint, request_of(2, trace=31).SerializeToString())
    server.wait_for(lambda: server.sample("mast_traces_total") == 2)


def test_oversized_requests_are_refused(start_server) -> None:
    server = start_server(receiver__http__max_request_body_mib=1, receiver__grpc__max_recv_msg_size_mib=1)
    big = request_of(1, trace=40)
    big.resource_spans[0].scope_spans[0].spans[0].attributes.add(
        key="gen_ai.tool.call.arguments", value=AnyValue(string_value="x" * (2 * 1024 * 1024)))
    status, _, _ = post(server.http_url, big.SerializeToString())
    assert status == 413
    bomb = gzip.compress(big.SerializeToString())  # small on the wire, too large once decompressed
    assert len(bomb) < 1024 * 1024
    assert post(server.http_url, bomb, **{"Content-Encoding": "gzip"})[0] == 413
    with pytest.raises(grpc.RpcError) as err:  # over twice the limit: gRPC refuses it before mastwatch sees it
        grpc_export(server.grpc_endpoint, big.SerializeToString())
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    over = request_of(1, trace=42)
    over.resource_spans[0].scope_spans[0].spans[0].attributes.add(
        key="gen_ai.tool.call.arguments", value=AnyValue(string_value="x" * (1536 * 1024)))
    with pytest.raises(grpc.RpcError) as err:  # over the limit: refused by the receiver, and counted
        grpc_export(server.grpc_endpoint, over.SerializeToString())
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_recv_msg_size_mib" in err.value.details()
    assert post(server.http_url, request_of(1, trace=41).SerializeToString())[0] == 200
    assert server.sample("mastwatch_requests_rejected_total", reason="too_large") == 3


@contextlib.contextmanager
def receivers(processor: Processor, telemetry, grpc_retry_after: float = 1.0) -> Iterator[tuple[str, str]]:
    """The gRPC and HTTP receivers on free ports, feeding `processor`: (HTTP URL, gRPC endpoint)."""
    grpc_rx = GrpcReceiver(GrpcConfig(endpoint="127.0.0.1:0"), processor, telemetry, retry_after=grpc_retry_after)
    http_rx = OtlpHttpServer(HttpConfig(endpoint="127.0.0.1:0"), processor, telemetry, retry_after=1)
    grpc_rx.start()
    http_rx.start()
    try:
        yield f"http://127.0.0.1:{http_rx.port}/v1/traces", f"127.0.0.1:{grpc_rx.port}"
    finally:
        grpc_rx.stop()
        http_rx.stop()


class _Discard:
    def export_increments(self, increments) -> None: ...
    def export_verdicts(self, verdicts, increments) -> None:
        self.verdicts = getattr(self, "verdicts", 0) + len(verdicts)
    def shutdown(self) -> None: ...


def test_full_queue_is_backpressure_and_clients_retry() -> None:
    """With the processor not yet draining, the queue fills: HTTP 429 + Retry-After, gRPC RESOURCE_EXHAUSTED
    with RetryInfo. The SDK's gRPC exporter retries, and every span arrives once the processor runs."""
    metrics = PrometheusExporter(PrometheusExporterConfig())
    telemetry = metrics.self_metrics
    sink = _Discard()
    processor = Processor(ProcessorConfig(queue_spans=10, decision_wait=0.1, tick=0.05), [sink], telemetry)
    with receivers(processor, telemetry, grpc_retry_after=0.2) as (url, endpoint):
        assert post(url, request_of(8, trace=50).SerializeToString())[0] == 200
        status, headers, body = post(url, request_of(8, trace=51).SerializeToString())
        assert status == 429 and headers["Retry-After"] == "1"
        assert Status.FromString(body).code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
        with pytest.raises(grpc.RpcError) as err:
            grpc_export(endpoint, request_of(8, trace=52).SerializeToString())
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        retry = dict(err.value.trailing_metadata())["google.rpc.retryinfo-bin"]  # where the Python SDK reads it
        assert RetryInfo.FromString(retry).retry_delay.ToNanoseconds() == 200_000_000
        # where a Go client (the Collector's OTLP exporter) reads it: the status details, `grpc-status-details-bin`,
        # whose code and message must match the call's or status.FromError ignores them
        status = rpc_status.from_call(err.value)
        assert status is not None and status.code == code_pb2.RESOURCE_EXHAUSTED
        infos = [d for d in status.details if d.Is(RetryInfo.DESCRIPTOR)]
        assert len(infos) == 1
        info = RetryInfo()
        infos[0].Unpack(info)
        assert info.retry_delay.ToNanoseconds() == 200_000_000
        assert processor.queued_spans == 8  # bounded: the refused requests took no memory

        tp = provider("grpc", endpoint)
        tracer = tp.get_tracer("test")
        exported = threading.Thread(target=lambda: _one_run(tracer))
        exported.start()  # refused at first: the SDK exporter backs off and retries
        threading.Timer(0.5, processor.start).start()
        exported.join(30)
        tp.shutdown()
        processor.shutdown()
        assert sink.verdicts == 2  # trace 50 and the SDK's run; nothing lost
        assert telemetry.rejected.labels("queue_full")._value.get() > 16  # the SDK was refused, then retried


def collector_style_export(endpoint: str, body: bytes, deadline: float = 30.0) -> bool:
    """Export as the Collector's Go OTLP exporter does: RESOURCE_EXHAUSTED is retried only when the status details
    (`grpc-status-details-bin`) carry RetryInfo, after its delay; without it, or on any other error, the batch is
    dropped (False)."""
    end = time.monotonic() + deadline
    with grpc.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        while time.monotonic() < end:
            try:
                call(body, timeout=5)
                return True
            except grpc.RpcError as e:
                status = rpc_status.from_call(e)
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or status is None:
                    return False
                infos = [d for d in status.details if d.Is(RetryInfo.DESCRIPTOR)]
                if not infos:
                    return False
                info = RetryInfo()
                infos[0].Unpack(info)
                time.sleep(info.retry_delay.ToNanoseconds() / 1e9)
    return False


def test_a_collector_style_client_loses_nothing_in_a_queue_full_burst() -> None:
    """Eight senders burst 80 requests at a queue with room for two: refused requests are retried after the
    RetryInfo delay found in the status details, and every trace arrives."""
    metrics = PrometheusExporter(PrometheusExporterConfig())
    telemetry = metrics.self_metrics
    sink = _Discard()
    processor = Processor(ProcessorConfig(queue_spans=16, decision_wait=0.05, tick=0.02), [sink], telemetry)
    processor.start()
    with receivers(processor, telemetry, grpc_retry_after=0.05) as (_, endpoint):
        results: list[bool] = []

        def send(first: int) -> None:
            results.extend(collector_style_export(endpoint, request_of(8, trace=first + i).SerializeToString())
                           for i in range(10))

        senders = [threading.Thread(target=send, args=(1000 + 100 * t,)) for t in range(8)]
        for t in senders:
            t.start()
        for t in senders:
            t.join(60)
    processor.shutdown()
    assert results == [True] * 80
    assert sink.verdicts == 80  # every trace classified: none dropped
    assert telemetry.rejected.labels("queue_full")._value.get() > 0  # the burst did meet backpressure


def test_queue_is_bounded_by_bytes_too() -> None:
    """Captured content makes spans large and is kept whole until normalised: the queue refuses a request by its
    bytes (processor.queue_mib) as well as by its spans, over gRPC and HTTP alike."""
    metrics = PrometheusExporter(PrometheusExporterConfig())
    telemetry = metrics.self_metrics
    processor = Processor(ProcessorConfig(queue_spans=1000, queue_mib=1), [_Discard()], telemetry)
    with receivers(processor, telemetry) as (url, endpoint):
        large = []
        for trace in (53, 54):
            request = request_of(2, trace=trace)
            request.resource_spans[0].scope_spans[0].spans[1].attributes.append(KeyValue(
                key="gen_ai.tool.call.result", value=AnyValue(string_value="x" * 700_000)))
            large.append(request.SerializeToString())
        assert post(url, large[0])[0] == 200  # 0.7 MiB queued: the queue was empty
        assert post(url, large[1])[0] == 429  # 1.4 MiB would be queued, though 4 spans are far below 1,000
        with pytest.raises(grpc.RpcError) as err:
            grpc_export(endpoint, large[1])
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert post(url, request_of(2, trace=55).SerializeToString())[0] == 200  # a small request still fits
        assert processor.queued_spans == 4
        processor.start()
        processor.shutdown()  # processes what is queued: the queue is empty again
        assert processor.queued_spans == 0


def test_a_full_queue_refuses_protobuf_requests_before_decoding_them(monkeypatch) -> None:
    """An overloaded receiver spends nothing on decoding what it refuses: the spans are counted from the request's
    framing (received, and rejected as queue_full, a bad id among them too). A request whose framing is broken is
    still told so, not told to retry."""
    from mastwatch.collector.receiver import grpc_server, http_server

    decoded: list[int] = []

    def counting_decode(data: bytes):
        decoded.append(len(data))
        return decode(data)

    monkeypatch.setattr(grpc_server, "decode", counting_decode)
    monkeypatch.setattr(http_server, "decode", counting_decode)
    metrics = PrometheusExporter(PrometheusExporterConfig())
    telemetry = metrics.self_metrics
    processor = Processor(ProcessorConfig(queue_spans=10), [_Discard()], telemetry)
    with receivers(processor, telemetry) as (url, endpoint):
        assert post(url, request_of(8, trace=56).SerializeToString())[0] == 200
        assert len(decoded) == 1
        refused = request_of(7, trace=57)
        refused.resource_spans[0].scope_spans[0].spans[3].span_id = b"short"  # would be rejected as invalid_id
        refused.resource_spans.append(ResourceSpans(scope_spans=[ScopeSpans(spans=[Span()] * 2), ScopeSpans()]))
        assert post(url, refused.SerializeToString())[0] == 429
        with pytest.raises(grpc.RpcError) as err:
            grpc_export(endpoint, refused.SerializeToString())
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert len(decoded) == 1  # neither refused request was decoded
        assert telemetry.rejected.labels("queue_full")._value.get() == 18  # 9 spans twice
        assert telemetry.rejected.labels("invalid_id")._value.get() == 0
        assert telemetry.received.labels("http")._value.get() == 8 + 9
        assert telemetry.received.labels("grpc")._value.get() == 9

        broken = request_of(1, trace=58).SerializeToString()[:-3]  # a length past the end
        assert post(url, broken)[0] == 400
        with pytest.raises(grpc.RpcError) as err:
            grpc_export(endpoint, broken)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert telemetry.requests_rejected.labels("malformed")._value.get() == 2
        assert processor.queued_spans == 8


def _one_run(tracer) -> None:
    with agent_run(tracer):
        step(tracer, "t", {"a": 1})


def _port(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


def test_chunked_bodies_and_keep_alive(server) -> None:
    """Bodies streamed chunked (as the JavaScript SDK sends them), plain or gzip, are taken like any other, and one
    connection carries several requests."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", _port(server.http_url), timeout=5)
    body = request_of(2, trace=90).SerializeToString()
    conn.request("POST", "/v1/traces", body=iter([body[:10], body[10:]]), encode_chunked=True,
                 headers={"Content-Type": "application/x-protobuf"})
    response = conn.getresponse()
    assert response.status == 200 and ExportTraceServiceResponse.FromString(response.read()) == \
        ExportTraceServiceResponse()
    packed = gzip.compress(request_of(3, trace=91).SerializeToString())
    conn.request("POST", "/v1/traces", body=iter([packed[:7], packed[7:]]), encode_chunked=True,
                 headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
    response = conn.getresponse()
    assert response.status == 200
    response.read()
    sock = conn.sock
    conn.request("POST", "/v1/traces", body=request_of(1, trace=92).SerializeToString(),
                 headers={"Content-Type": "application/x-protobuf"})
    assert conn.getresponse().status == 200 and conn.sock is sock  # the same connection all along
    conn.close()
    server.wait_for(lambda: server.sample("mastwatch_spans_processed_total") == 6)


def _raw(port: int, data: bytes) -> bytes:
    """Send bytes as they are and read the answer until the server closes or 2 s pass."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(data)
        out = b""
        with contextlib.suppress(TimeoutError, ConnectionError):
            while chunk := sock.recv(65536):
                out += chunk
    return out


@pytest.mark.parametrize("headers", [
    b"Content-Length: 5\r\nContent-Length: 6\r\n",  # conflicting lengths: which body ends where?
    b"Transfer-Encoding : chunked\r\n",  # a space before the colon
    b"Content-Length: +1_0\r\n",  # not digits only
    b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",  # both framings at once
], ids=["two-lengths", "te-space", "length-not-digits", "length-and-chunked"])
def test_ambiguous_framing_is_refused_and_counted(server, headers: bytes) -> None:
    """Headers a proxy and the receiver could read differently (request smuggling) get 400 and are counted."""
    port = _port(server.http_url)
    before = server.sample("mastwatch_requests_rejected_total", reason="bad_http") or 0
    answer = _raw(port, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n" + headers +
                  b"\r\n0\r\n\r\nhello")
    assert answer.split(b" ", 2)[1] == b"400", answer[:80]
    assert server.sample("mastwatch_requests_rejected_total", reason="bad_http") == before + 1
    assert post(server.http_url, request_of(1, trace=93).SerializeToString())[0] == 200




JS_CLIENTS = Path(__file__).parent / "js"


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
@pytest.mark.parametrize(("encoding", "compression"), [("proto", "none"), ("proto", "gzip"), ("json", "gzip")])
def test_the_javascript_sdk_gets_every_span_through(server, encoding: str, compression: str) -> None:
    """The OpenTelemetry JavaScript SDK's OTLP/HTTP exporters (which stream their bodies chunked) deliver every run,
    each classified under its agent."""
    if not (JS_CLIENTS / "node_modules").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=JS_CLIENTS, check=True, capture_output=True,
                       timeout=300)
    sent = subprocess.run(["node", "export_runs.mjs", server.http_url, encoding, compression, "20"], cwd=JS_CLIENTS,
                          capture_output=True, text=True, timeout=60)
    assert sent.returncode == 0, sent.stderr
    assert len(sent.stdout.split()) == 20
    server.wait_for(lambda: server.sample("mast_traces_total", service="js-support-agent",
                                          agent="js-support-agent") == 20)
    assert server.sample("mastwatch_spans_received_total", protocol="http") == 20 * 7
    assert not server.sample("mastwatch_requests_rejected_total", reason="bad_http")


def test_hostile_bodies_get_400_and_odd_attribute_types_are_read_around(server, caplog) -> None:
    """JSON nested 999 deep, a double of 401 digits: 400, counted, the server unharmed; attributes of the wrong type
    (an array where a string belongs) do not cost the span; a thousand bad requests log one line, not a thousand."""
    deep = ('{"resourceSpans":' + "[" * 999 + "]" * 999 + "}").encode()
    huge = ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":'
            '"0102030405060708","name":"x","attributes":[{"key":"a","value":{"doubleValue":' + "9" * 401 +
            "}}]}]}]}]}").encode()
    for body in (deep, huge):
        status, _, answer = post(server.http_url, body, "application/json")
        assert status == 400 and json.loads(answer)["code"] == 3
    request = request_of(3, trace=94)
    for span in request.resource_spans[0].scope_spans[0].spans:
        del span.attributes[:]
        span.attributes.append(KeyValue(key="gen_ai.operation.name", value=AnyValue(
            array_value=ArrayValue(values=[AnyValue(string_value="chat")]))))
        span.attributes.append(KeyValue(key="gen_ai.tool.name", value=AnyValue(
            kvlist_value=KeyValueList(values=[KeyValue(key="a", value=AnyValue(int_value=1))]))))
        span.attributes.append(KeyValue(key="gen_ai.usage.input_tokens", value=AnyValue(string_value="many")))
    assert post(server.http_url, request.SerializeToString())[0] == 200
    server.wait_for(lambda: server.sample("mast_traces_total") == 1)
    assert not server.sample("mastwatch_spans_rejected_total", reason="unreadable")
    with caplog.at_level(logging.WARNING, logger="mastwatch.collector.receiver.http_server"):
        for _ in range(200):
            assert post(server.http_url, b"\xff garbage")[0] == 400
    assert server.sample("mastwatch_requests_rejected_total", reason="malformed") == 202
    assert len([r for r in caplog.records if "(malformed)" in r.getMessage()]) <= 1


def test_every_refusal_reason_is_counted_from_zero(server) -> None:
    """A series made at its first increment shows no increase to Prometheus: every reason a request or a span is
    refused for is on /metrics at 0 from the start, and the code refuses for no other."""
    import re

    from mastwatch.collector.receiver.refusals import REASONS, SPAN_REASONS

    root = Path(__file__).resolve().parents[1]
    source = "\n".join(p.read_text() for d in ("collector", "exporter", "mastwatch") for p in (root / d).rglob("*.py"))
    used = set(re.findall(r"refuse\((?:request, )?\"(\w+)\"", source)) | {"bad_http", "server_error"}
    assert used <= set(REASONS), used - set(REASONS)
    assert set(re.findall(r"spans_rejected\(\"(\w+)\"", source)) == set(SPAN_REASONS)
    shown = set(re.findall(r'^mastwatch_requests_rejected_total\{reason="(\w+)"\}', server.metrics(), re.M))
    assert shown >= set(REASONS)  # each at 0 unless refused since
    assert re.search(r'^mastwatch_spans_rejected_total\{reason="unreadable"\} 0\.0$', server.metrics(), re.M)
