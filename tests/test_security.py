"""TLS and bearer tokens on everything mastwatch serves: the OpenTelemetry SDK's gRPC and HTTP exporters get through
with the CA and the token, and nothing without them; client certificates when a client CA is set; /metrics over
HTTPS with a token; refused attempts counted. Certificates are made with openssl for each test run."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.sdk_agents import agent_run, step
from tests.test_receiver import grpc_export, request_of

TOKEN = "s3cret-token"
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificates")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, all from the CA."""
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=mastwatch-test-ca", cwd=d)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth"),
                      ("client", "extendedKeyUsage=clientAuth")):
        (d / f"{name}.ext").write_text(ext + "\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                 f"/CN={name}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    return d


def _tls(pki: Path, client_ca: bool = False) -> dict:
    tls = {"cert_file": str(pki / "server.pem"), "key_file": str(pki / "server.key")}
    if client_ca:
        tls["client_ca_file"] = str(pki / "ca.pem")
    return tls


def _get(url: str, context: ssl.SSLContext, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _sample(text: str, line_start: str) -> float:
    return sum(float(line.rpartition(" ")[2]) for line in text.splitlines() if line.startswith(line_start))


def test_tls_and_a_bearer_token_on_grpc_http_and_metrics(start_server, pki: Path, tmp_path: Path,
                                                         monkeypatch) -> None:
    # requests lets REQUESTS_CA_BUNDLE override the CA a session was given (the HTTP exporter's certificate_file)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    auth = {"token": TOKEN}
    server = start_server(receiver__grpc__tls=_tls(pki), receiver__grpc__auth=auth,
                          receiver__http__tls=_tls(pki), receiver__http__auth={"filename": str(token_file)},
                          exporters__prometheus__tls=_tls(pki), exporters__prometheus__auth=auth)
    service = server.service
    grpc_endpoint = f"127.0.0.1:{service.grpc.port}"
    http_url = f"https://127.0.0.1:{service.http.port}/v1/traces"
    host, port = service.metrics_address
    metrics_url = f"https://{host}:{port}/metrics"
    ca = (pki / "ca.pem").read_bytes()
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))

    tp = TracerProvider(resource=Resource.create({"service.name": "secure-agents"}))
    tp.add_span_processor(SimpleSpanProcessor(GrpcExporter(
        endpoint=grpc_endpoint, credentials=grpc.ssl_channel_credentials(ca),
        headers=(("authorization", f"Bearer {TOKEN}"),))))
    tp.add_span_processor(SimpleSpanProcessor(HttpExporter(
        endpoint=http_url, certificate_file=str(pki / "ca.pem"), headers={"Authorization": f"Bearer {TOKEN}"})))
    tracer = tp.get_tracer("test")
    with agent_run(tracer):
        step(tracer, "get_status", {"id": 1})
    tp.shutdown()

    # without the token: refused and counted, on each
    channel = grpc.secure_channel(grpc_endpoint, grpc.ssl_channel_credentials(ca))
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export", request_serializer=None,
                            response_deserializer=None)(request_of(1, trace=501).SerializeToString(), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    channel.close()
    request = urllib.request.Request(http_url, data=request_of(1, trace=502).SerializeToString(), method="POST",
                                     headers={"Content-Type": "application/x-protobuf", "Authorization": "Bearer no"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10, context=context)
    assert refused.value.code == 401 and "Bearer" in refused.value.headers["WWW-Authenticate"]
    assert _get(metrics_url, context)[0] == 401
    assert _get(metrics_url.replace("/metrics", "/healthz"), context)[0] == 200  # probes have no token to send
    from tests.test_deploy import healthcheck  # the image's own probe, as it runs in the container

    probe = healthcheck()
    probe[0] = sys.executable
    env = {**os.environ, "MASTWATCH_HEALTH_URL": metrics_url.replace("/metrics", "/healthz")}
    assert subprocess.run(probe, env=env, capture_output=True, timeout=30).returncode == 0
    with pytest.raises(grpc.RpcError):  # plain text to the TLS port
        grpc_export(grpc_endpoint, request_of(1, trace=503).SerializeToString(), timeout=3)
    with pytest.raises(urllib.error.URLError):  # and an unknown CA
        urllib.request.urlopen(metrics_url, timeout=10, context=ssl.create_default_context())

    # the token file is read again when it changes
    token_file.write_text("rotated\n")
    rotated = urllib.request.Request(http_url, data=request_of(1, trace=504).SerializeToString(), method="POST",
                                     headers={"Content-Type": "application/x-protobuf",
                                              "Authorization": "Bearer rotated"})
    with urllib.request.urlopen(rotated, timeout=10, context=context) as r:
        assert r.status == 200

    def metrics() -> str:
        status, text = _get(metrics_url, context, TOKEN)
        assert status == 200
        return text

    deadline = time.monotonic() + 15
    while _sample(metrics(), 'mast_traces_total{agent="sre-bot",service="secure-agents"}') < 1:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    text = metrics()
    sent = _sample(text, 'mastwatch_spans_received_total{protocol="grpc"}')
    assert sent >= 2 and _sample(text, 'mastwatch_spans_received_total{protocol="http"}') == sent + 1  # + rotated
    assert _sample(text, 'mastwatch_requests_rejected_total{reason="unauthenticated"}') == 3


def test_client_certificates_when_a_client_ca_is_set(start_server, pki: Path) -> None:
    server = start_server(receiver__http__tls=_tls(pki, client_ca=True), receiver__grpc__tls=_tls(pki, client_ca=True))
    service = server.service
    url = f"https://127.0.0.1:{service.http.port}/v1/traces"
    body = request_of(1, trace=601).SerializeToString()
    anonymous = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
        urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/x-protobuf"}), timeout=10, context=anonymous)
    known = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    known.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    with urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/x-protobuf"}), timeout=10, context=known) as r:
        assert r.status == 200
    credentials = grpc.ssl_channel_credentials((pki / "ca.pem").read_bytes(), (pki / "client.key").read_bytes(),
                                               (pki / "client.pem").read_bytes())
    with grpc.secure_channel(f"127.0.0.1:{service.grpc.port}", credentials) as channel:
        channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export", request_serializer=None,
                            response_deserializer=None)(request_of(1, trace=602).SerializeToString(), timeout=5)


def test_tls_and_auth_settings_that_cannot_work_are_refused_at_start(start_server, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no file"):
        start_server(receiver__http__tls={"cert_file": str(tmp_path / "none.pem"), "key_file": "x"})
    with pytest.raises(ValueError, match="one of token or filename"):
        start_server(receiver__grpc__auth={})
