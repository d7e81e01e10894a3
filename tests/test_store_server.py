"""The clickhouse-connect engine end to end, against ClickHouse's HTTP interface served on chDB: rows arrive
whole in Native over lz4, queries agree with chDB's own answers, and no verdict is lost or doubled when the
server goes away under load or when mastwatch is killed with rows queued."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from prometheus_client import CollectorRegistry

from mastwatch.collector.processor import NO_INCREMENT
from mastwatch.exporter.prometheus import SelfMetrics
from mastwatch.exporter.store import StoreConfig, StoreExporter
from mastwatch.exporter.store.clickhouse_engine import ClickhouseEngine
from mastwatch.exporter.store.mutes import Mute, set_mute
from mastwatch.exporter.store.queries import PARAMETERS, QUERIES, Filters, run
from mastwatch.exporter.store.resolutions import Resolution, set_resolution
from tests.clickhouse_http import ClickHouseHTTP
from tests.conftest import free_port
from tests.test_lifecycle import MASTWATCH, _wait_http
from tests.test_receiver import post, request_of
from tests.test_store import check_upgrade, export_and_check_times, make_verdict
from tests.test_store_queries import DAY, T0, fill

PASSWORD = "s3cret"


@pytest.fixture
def endpoint(tmp_path):
    endpoint = ClickHouseHTTP(str(tmp_path / "clickhouse"), password=PASSWORD)
    endpoint.start()
    yield endpoint
    endpoint.close()


def server_store(endpoint: ClickHouseHTTP, tmp_path: Path, telemetry=None, **settings) -> StoreExporter:
    settings = {"flush_interval": 0.05, **settings}
    return StoreExporter(StoreConfig(engine="clickhouse", url=endpoint.url, password=PASSWORD,
                                     path=str(tmp_path / "local"), **settings), telemetry)


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.02)


def test_rows_arrive_whole_in_native_and_queries_agree_with_chdb(endpoint, tmp_path) -> None:
    store = server_store(endpoint, tmp_path)
    try:
        verdict = make_verdict(agent='agent \'x\' \\ "y"')
        store.export_verdicts([verdict], [NO_INCREMENT])
        fill(store)
        assert store.flush()
        (loop,) = store.engine.query("SELECT DISTINCT signature FROM mastwatch.mast_findings WHERE trace_id = "
                                     f"'{1:032x}' AND failure_mode = 'FM-1.3' AND basis != 'judge'")
        set_mute(store.engine, "mastwatch", Mute(loop["signature"], seconds=86_400, note="it's 'known'"))
        set_resolution(store.engine, "mastwatch", Resolution(loop["signature"], note="fixed \\ 'for good'"))
        for name in QUERIES:  # the same SQL, over HTTP and Native, and straight on chDB
            for filters in (Filters(T0, T0 + DAY), Filters(0, T0, agent=verdict.agent), Filters(T0, T0 + DAY,
                                                                                                   mode="FM-3.3")):
                over_http = run(store.engine, "mastwatch", name, filters)
                assert over_http == endpoint.query(PARAMETERS.render(QUERIES[name], "mastwatch"), filters.params())
                assert over_http or (name == "judge" and filters.agent), name  # the judge read none of its
    finally:
        store.shutdown()
    (trace,) = endpoint.query(f"SELECT * FROM mastwatch.mast_traces WHERE trace_id = '{verdict.trace_id}'")
    assert trace["agent"] == verdict.agent and trace["started_at"] == "2023-11-14 22:13:20.123456789"
    steps = endpoint.query(f"SELECT args_fingerprint, cost_usd FROM mastwatch.mast_repeated_steps "
                           f"WHERE trace_id = '{verdict.trace_id}' ORDER BY started_at")
    assert steps == [{"args_fingerprint": r.step.args_fingerprint, "cost_usd": r.cost_usd} for r in verdict.waste.steps]
    assert {(fmt, encoding) for _, fmt, encoding in endpoint.inserts} == {("Native", "lz4")}
    tokens = [token for token, _, _ in endpoint.inserts]
    assert len(set(tokens)) == len(tokens)


def test_times_are_exact_and_a_batch_may_span_any_days(endpoint, tmp_path) -> None:
    store = server_store(endpoint, tmp_path, flush_interval=60)  # one batch
    try:
        export_and_check_times(store)
    finally:
        store.shutdown()


def test_records_of_versions_1_and_2_still_queued_are_written_after_an_upgrade(endpoint, tmp_path) -> None:
    check_upgrade(tmp_path / "local" / "queue", lambda: server_store(endpoint, tmp_path))


def test_server_errors_keep_their_code(endpoint) -> None:
    engine = ClickhouseEngine("127.0.0.1", endpoint.port, False, "default", "wrong")
    with pytest.raises(DatabaseError) as wrong:
        engine.command("SELECT 1")
    assert wrong.value.code == 516
    engine = ClickhouseEngine("127.0.0.1", endpoint.port, False, "default", PASSWORD)
    with pytest.raises(DatabaseError) as missing:
        engine.query("SELECT * FROM system.nothing_here")
    assert missing.value.code == 60
    engine.close()


def _exactly_once(endpoint: ClickHouseHTTP, traces: int, findings: int, steps: int, run_steps: int = 0) -> None:
    """Each table holds its rows once (`run_steps`: mast_steps rows, checked when not 0)."""
    tables = [("mast_traces", traces), ("mast_findings", findings), ("mast_repeated_steps", steps)]
    for table, expected in tables + ([("mast_steps", run_steps)] if run_steps else []):
        key = "trace_id, failure_mode" if table == "mast_findings" else "trace_id, span_id" \
            if table in ("mast_repeated_steps", "mast_steps") else "trace_id"
        (row,) = endpoint.query(f"SELECT count() AS n, uniqExact({key}) AS distinct FROM mastwatch.{table}")
        assert row == {"n": expected, "distinct": expected}, table


def test_outage_under_load_every_verdict_arrives_exactly_once(endpoint, tmp_path) -> None:
    telemetry = SelfMetrics(CollectorRegistry())
    store = server_store(endpoint, tmp_path, telemetry, batch_rows=400)
    phases = [threading.Event() for _ in range(3)]
    per_phase = 400

    def produce() -> None:
        for phase, go in enumerate(phases):
            go.wait(30)
            for i in range(per_phase):
                store.export_verdicts([make_verdict(phase * per_phase + i + 1, agent=f"agent-{i % 7}")], [NO_INCREMENT])

    lost_answers: list[str] = []

    def lose_first_answer(token: str) -> bool:  # committed, but the answer never arrives
        if lost_answers:
            return True
        lost_answers.append(token)
        return False

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        phases[0].set()  # verdicts flow, the server takes them
        wait_for(lambda: len(endpoint.inserts) >= 3)
        endpoint.stop()
        phases[1].set()  # verdicts keep flowing into the queue while the server is away
        wait_for(lambda: telemetry.store_errors._value.get() >= 3)
        endpoint.on_insert = lose_first_answer
        endpoint.start()
        phases[2].set()
        producer.join(60)
        assert store.flush(60)
    finally:
        for go in phases:
            go.set()
        producer.join(60)
        store.shutdown()
    total = len(phases) * per_phase
    _exactly_once(endpoint, traces=total, findings=total, steps=2 * total)
    tokens = [token for token, _, _ in endpoint.inserts]
    assert tokens.count(lost_answers[0]) >= 2  # sent again with the same token, and dropped by the server
    assert telemetry.store_retries._value.get() >= 1
    assert telemetry.store_queue_rows.collect()[0].samples[0].value == 0
    assert sum(telemetry.store_rows.labels(t)._value.get() for t in ("mast_traces",)) == total


def _metric(metrics_url: str, name: str) -> float:
    """The sum of the samples of `name`."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in _wait_http(metrics_url).splitlines()
               if line.startswith((name + " ", name + "{")))


def test_killed_with_rows_queued_then_restarted_nothing_lost_or_doubled(endpoint, tmp_path) -> None:
    grpc_port, http_port, metrics_port = free_port(), free_port(), free_port()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    command = [*MASTWATCH, "serve", "--grpc-endpoint", f"127.0.0.1:{grpc_port}", "--http-endpoint",
               f"127.0.0.1:{http_port}", "--metrics-endpoint", f"127.0.0.1:{metrics_port}", "--store-path",
               str(tmp_path / "local"), "--set", "processor.decision_wait=200ms", "--set", "processor.tick=50ms",
               "--set", "exporters.store.engine=clickhouse", "--set", f"exporters.store.url={endpoint.url}",
               "--set", f"exporters.store.password={PASSWORD}", "--set", "exporters.store.flush_interval=100ms",
               "--set", "exporters.store.batch_rows=20",
               "--set", 'processor.detectors={"FM-1.3": {"unknown_args_min_run": 5}}']  # arguments not captured
    held, release = threading.Event(), threading.Event()

    def hold(token: str) -> bool:  # the insert is committed; mastwatch dies before it hears so
        held.set()
        release.wait(60)
        return False

    endpoint.on_insert = hold
    first = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    try:
        _wait_http(metrics)
        traces = 30
        for trace in range(1, traces + 1):  # five calls of one tool in a row: FM-1.3, four repeated steps
            assert post(f"http://127.0.0.1:{http_port}/v1/traces", request_of(5, trace=trace).SerializeToString())[
                0] == 200
        wait_for(lambda: _metric(metrics, "mast_traces_total") == traces)
        assert held.wait(30)
        queued = _metric(metrics, "mastwatch_store_queue_rows")
        # nothing acknowledged: the first batch's answer never came (a trace, a finding, four repeated steps and the
        # run's five steps each)
        assert queued == traces * (1 + 1 + 4 + 5)
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        first.kill()
        release.set()
    assert len(endpoint.inserts) == 1
    endpoint.on_insert = None
    second = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        _wait_http(metrics)
        wait_for(lambda: _metric(metrics, "mastwatch_store_queue_rows") == 0)
        assert _metric(metrics, "mastwatch_store_retries_total") == 1  # the batch found sealed at start
        second.send_signal(signal.SIGTERM)
        _, stderr = second.communicate(timeout=60)
    finally:
        second.kill()
    assert second.returncode == 0, stderr
    _exactly_once(endpoint, traces=traces, findings=traces, steps=4 * traces, run_steps=5 * traces)
    tokens = [token for token, _, _ in endpoint.inserts]
    assert tokens[1] == tokens[0]  # the batch of the first run, again: dropped by the server as a duplicate


def test_a_run_reads_back_the_same_from_a_server_as_from_chdb(endpoint, tmp_path) -> None:
    """`mastwatch show` and the trace page read a server's typed answers as chDB's JSON: the same run."""
    from mastwatch.collector.assemble import END_OF_INPUT
    from mastwatch.collector.config import ProcessorConfig
    from mastwatch.collector.processor import Processor
    from mastwatch.collector.receiver.decode import decode
    from mastwatch.exporter.store.queries import stored_run
    from tests.test_modes import Sink
    from tests.test_trace_view import recorded

    store, sink = server_store(endpoint, tmp_path), Sink()
    try:
        processor = Processor(ProcessorConfig(), [store, sink])
        for request in recorded():
            processor.process(decode(request.SerializeToString()).spans, now=0.0)
        processor.drain(END_OF_INPUT)
        assert store.flush()
        for verdict in sink.verdicts:
            over_http = stored_run(store.engine, "mastwatch", verdict.trace_id)
            assert over_http == stored_run(endpoint, "mastwatch", verdict.trace_id)  # type: ignore[arg-type]
            assert over_http is not None and len(over_http.steps) == (verdict.steps if verdict.findings else 0)
            assert all(isinstance(s["error"], bool) and isinstance(s["started_ns"], int) for s in over_http.steps)
    finally:
        store.shutdown()


def test_reviews_are_written_and_read_over_http(endpoint, tmp_path) -> None:
    """A review's insert (its values as query parameters, the finding's bases as an array) through
    clickhouse-connect, and `top reviews` reading it back."""
    from mastwatch.exporter.store.reviews import Review, add_review

    store = server_store(endpoint, tmp_path)
    try:
        fill(store)
        note = "polling, not a loop: it's \\ 'fine'\n"
        assert add_review(store.engine, "mastwatch", Review(f"{1:032x}", "FM-1.3", "dismissed", "o'neil", note)) == [
            "judge", "structure"]
        rows = {r["failure_mode"]: r for r in run(store.engine, "mastwatch", "reviews", Filters(T0, T0 + DAY))}
        assert (rows["FM-1.3"]["dismissed"], rows["FM-1.3"]["latest_dismissal"]) == (1, note)
        assert endpoint.query("SELECT reviewer, bases FROM mastwatch.mast_reviews") == [
            {"reviewer": "o'neil", "bases": ["judge", "structure"]}]
    finally:
        store.shutdown()
