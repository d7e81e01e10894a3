"""One run next to its findings: recorded runs classified into the real store (chDB) write a mast_steps row per step
for the runs with findings (every run, or none, as `exporters.store.steps` says); `mastwatch show` prints the steps
in the order they started with the evidence of each finding marked by its mode; `mastwatch report --trace` writes
the same run as one HTML page; a running server serves it at /traces/{trace_id}, with the metrics token."""

from __future__ import annotations

import html
import http.client
import json
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mastwatch.collector.assemble import END_OF_INPUT
from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.processor import Processor
from mastwatch.collector.receiver.decode import decode
from mastwatch.exporter.store import StoreConfig, StoreExporter
from tests.otlp_corpus import DATA_DIR, tau2_requests
from tests.test_lifecycle import MASTWATCH
from tests.test_modes import Sink
from tests.test_receiver import post

# Recorded tau2-bench runs: a retail run showing three modes, one showing none, and a short priced run (FM-1.5).
RETAIL = DATA_DIR / "runs/tau2-bench" / ("ft_gpt-4.1-2025-04-14_sierra_tau2-full-sft_BzrYdMNm_retail_default_"
                                         "gpt-4.1_1trials.json")
PRICED = DATA_DIR / "runs/tau2/mock-gpt41mini-20260531-042306-420109.json"


def recorded() -> list[ExportTraceServiceRequest]:
    retail = tau2_requests(RETAIL)
    return [retail[0][1], retail[5][1], tau2_requests(PRICED)[0][1]]


def fill(path: Path, **store: object) -> list[Verdict]:
    """The recorded runs classified into a store in `path` through the store exporter; their verdicts."""
    sink = Sink()
    exporter = StoreExporter(StoreConfig(path=str(path), flush_interval=0.05, **store))
    processor = Processor(ProcessorConfig(), [exporter, sink])
    for request in recorded():
        processor.process(decode(request.SerializeToString()).spans, now=0.0)
    processor.drain(END_OF_INPUT)
    exporter.shutdown()
    return sink.verdicts


def rows(path: Path, sql: str) -> list[dict]:
    from mastwatch.exporter.store.chdb_engine import ChdbEngine

    engine = ChdbEngine(str(path), create=False)
    try:
        return engine.query(sql)
    finally:
        engine.close()


def in_start_order(verdict: Verdict) -> list[str]:
    return [s.span_id.hex() for s in sorted(verdict.trace_steps, key=lambda s: (s.start_ns, s.span_id.hex()))]


def marks(verdict: Verdict) -> dict[str, list[str]]:
    """Span id -> the modes it is evidence of."""
    out: dict[str, list[str]] = {}
    for code, finding in sorted(verdict.findings.items()):
        for span in finding.evidence:
            out.setdefault(span.hex(), []).append(code)
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, list[Verdict]]:
    """A store holding the recorded runs (default settings), and their verdicts."""
    path = tmp_path_factory.mktemp("store")
    return path, fill(path)


def test_the_recorded_runs_are_one_with_findings_one_without_and_one_priced(store) -> None:
    _, (healthy, failing, priced) = store
    assert not healthy.findings and len(failing.findings) >= 2 and priced.findings and priced.cost_usd > 0
    assert set(marks(failing)) <= set(in_start_order(failing))  # evidence is among the steps


def test_steps_are_stored_for_the_runs_with_findings_by_default(store) -> None:
    path, (_, failing, priced) = store
    stored = rows(path, "SELECT * EXCEPT (started_at, ended_at), toUnixTimestamp64Nano(started_at) AS start, "
                        "toUnixTimestamp64Nano(ended_at) AS end FROM mastwatch.mast_steps ORDER BY trace_id, "
                        "started_at, span_id")
    by_trace: dict[str, list[dict]] = {}
    for row in stored:
        by_trace.setdefault(row["trace_id"], []).append(row)
    assert set(by_trace) == {failing.trace_id, priced.trace_id}  # none for the run without findings
    for verdict in (failing, priced):
        got = by_trace[verdict.trace_id]
        assert [r["span_id"] for r in got] == in_start_order(verdict) and len(got) == verdict.steps
        steps = {s.span_id.hex(): s for s in verdict.trace_steps}
        for r in got:
            s = steps[r["span_id"]]
            assert (r["parent_span_id"], r["kind"], r["name"], r["service"], r["start"], r["end"], r["error"]) == \
                (s.parent_span_id.hex(), s.kind.name.lower(), s.name, s.service, s.start_ns, s.end_ns, s.error)
            assert (r["model"], r["tool"], r["agent"], r["error_type"]) == \
                (s.model or "", s.tool or "", s.agent or "", s.error_type or "")
            assert (r["input_tokens"], r["output_tokens"]) == (s.input_tokens, s.output_tokens)
            assert r["args_fingerprint"] == (s.args.fingerprint if s.args is not None else 0)
            assert r["args_preview"] == r["result_preview"] == ""  # content is not stored by default
        assert sum(r["cost_usd"] for r in got) == pytest.approx(verdict.cost_usd)  # priced as the verdict
    assert any(r["error"] for r in by_trace[failing.trace_id]) and any(r["args_fingerprint"] for r in stored)


def test_every_run_has_its_spend_per_model_adding_up_to_its_verdict(store) -> None:
    """mast_model_spend: every run (findings or not), its model calls, tokens and price per model summing to the
    verdict's and mast_traces' figures."""
    path, verdicts = store
    spend = rows(path, "SELECT trace_id, model, calls, uncached_input_tokens + cache_read_tokens + cache_write_tokens "
                       "AS input, output_tokens, cost_usd, priced, wasted_cost_usd FROM mastwatch.mast_model_spend")
    traces = {r["trace_id"]: r for r in rows(path, "SELECT trace_id, wasted_cost_usd FROM mastwatch.mast_traces")}
    assert {r["trace_id"] for r in spend} == {v.trace_id for v in verdicts}
    for v in verdicts:
        its = [r for r in spend if r["trace_id"] == v.trace_id]
        assert sorted(r["model"] for r in its) == sorted(v.models)
        assert sum(r["calls"] for r in its) == v.llm_calls > 0
        assert (sum(r["input"] for r in its), sum(r["output_tokens"] for r in its)) == (v.input_tokens,
                                                                                        v.output_tokens)
        assert sum(r["cost_usd"] for r in its) == pytest.approx(v.cost_usd)
        assert sum(r["wasted_cost_usd"] for r in its) == pytest.approx(traces[v.trace_id]["wasted_cost_usd"])
        assert all(r["priced"] == (r["model"] in v.cost) for r in its)
    assert any(r["priced"] and r["cost_usd"] > 0 for r in spend)


@pytest.mark.parametrize(("setting", "stepped"), [("all", 3), ("off", 0)])
def test_the_steps_setting_chooses_whose_steps_are_stored(tmp_path, setting: str, stepped: int) -> None:
    verdicts = fill(tmp_path, steps=setting)
    counts = rows(tmp_path, "SELECT trace_id, count() AS n FROM mastwatch.mast_steps GROUP BY trace_id")
    assert len(counts) == stepped
    assert sum(r["n"] for r in counts) == (sum(v.steps for v in verdicts) if stepped else 0)


def test_content_storage_opted_in_stores_the_previews(tmp_path) -> None:
    fill(tmp_path, store_content=True)
    stored = rows(tmp_path, "SELECT kind, args_preview, result_preview FROM mastwatch.mast_steps")
    assert any(r["kind"] == "tool" and r["args_preview"].startswith("{") for r in stored)
    assert any(r["kind"] == "llm" and r["result_preview"] for r in stored)


def show(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MASTWATCH, "show", *args, "--store-path", str(path)], capture_output=True, text=True,
                          timeout=120)


def test_show_prints_every_step_in_start_order_and_marks_the_evidence(store) -> None:
    path, (_, failing, _) = store
    result = show(path, failing.trace_id.upper())  # any case
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(rf"^trace +{failing.trace_id}$", out, re.M) and "tau2-retail-agent" in out
    assert re.search(r"^findings +" + " ".join(sorted(failing.findings)) + "$", out, re.M)
    lines = {}
    for line in out.splitlines():
        found = re.search(r" ([0-9a-f]{16}) ", line)
        if found and re.match(r" +(\* +)?\+\d+\.\d{3}s ", line):
            lines[found.group(1)] = line
    assert list(lines) == in_start_order(failing)  # every step, once, in the order they started
    expected = marks(failing)
    for span, line in lines.items():
        codes = re.findall(r"FM-\d\.\d", line)
        assert codes == expected.get(span, []), line
        assert line.lstrip().startswith("*") == (span in expected)
    for finding in failing.findings.values():  # then each finding: reason and evidence
        assert f"reason: {finding.reason}" in out
        assert f"evidence: {' '.join(e.hex() for e in finding.evidence)}" in out


def test_show_gives_each_model_its_calls_and_cost(store) -> None:
    """A run's models with what each cost (a model without a price says so, rather than $0)."""
    from mastwatch.show import plural, usd

    path, (_, failing, priced) = store
    (model,) = priced.models
    out = show(path, priced.trace_id).stdout
    calls = plural(priced.llm_calls, "call")
    assert re.search(rf"^models +{re.escape(model)} \({calls}, {re.escape(usd(priced.cost_usd))}\)$", out, re.M), out
    (unpriced,) = failing.models
    assert not failing.cost
    assert re.search(rf"^models +{re.escape(unpriced)} \({plural(failing.llm_calls, 'call')}, no price\)$",
                     show(path, failing.trace_id).stdout, re.M)


def test_show_says_why_a_run_has_no_steps(store) -> None:
    path, (healthy, _, _) = store
    result = show(path, healthy.trace_id)
    assert result.returncode == 0, result.stderr
    assert "steps: not stored. steps are kept only for runs with findings" in result.stdout
    assert "findings: none" in result.stdout


def test_show_of_a_trace_not_in_the_store_is_one_line_and_fails(store) -> None:
    path, _ = store
    result = show(path, "0" * 31 + "1")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == f"mastwatch show: trace {'0' * 31}1 is not in the store ({path})"


def test_report_trace_writes_the_run_as_one_page(store, tmp_path) -> None:
    path, (_, failing, _) = store
    out = tmp_path / "run.html"
    result = subprocess.run([*MASTWATCH, "report", "--trace", failing.trace_id, "--store-path", str(path), "--out",
                             str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    check_page(page, failing)
    # a file has no server to post to: it names the command instead of the served page's forms
    assert f"<code>mastwatch review {failing.trace_id} FM-x.y confirmed|dismissed|missed</code>" in page
    assert "<form" not in page


def check_page(page: str, verdict: Verdict) -> None:
    """The run's page: each step a table row in start order, evidence rows highlighted with the finding's reason,
    a timeline bar per step, each finding with links to its evidence; nothing loaded from elsewhere."""
    assert page.startswith("<!doctype html>") and f"<code>{verdict.trace_id}</code>" in page
    rows = re.findall(r'<tr id="span-([0-9a-f]{16})"( class=evidence)?>(.*?)</tr>', page)
    assert [span for span, _, _ in rows] == in_start_order(verdict)
    expected = marks(verdict)
    for span, evidence, cells in rows:
        assert bool(evidence) == (span in expected)
        for code in expected.get(span, []):
            reason = html.escape(verdict.findings[code].reason)
            assert f'<a class="code" href="#finding-{code}">{code}</a> {reason}' in cells
    assert page.count("<rect ") == len(verdict.trace_steps) and page.count('stroke="#e02f44"') == len(expected)
    for code, finding in verdict.findings.items():
        section = re.search(rf'<div class="finding" id="finding-{code}">(.*?)</div>(?:<form class="review".*?</form>)?'
                            '</div>', page).group(1)
        assert all(f'href="#span-{e.hex()}"' in section for e in finding.evidence)
    assert not re.search(r"<script|<link|<img|<iframe|src=|@import|url\(", page)  # self-contained


def test_the_server_serves_the_trace_page_with_the_metrics_token(start_server) -> None:
    running = start_server(exporters__prometheus__auth={"token": "t0ken"})
    requests = recorded()
    for request in requests:
        assert post(running.http_url, request.SerializeToString())[0] == 200
    running.wait_for(lambda: len(running.rows("SELECT trace_id FROM {db}.mast_traces")) >= len(requests), timeout=60)
    (healthy, failing, _) = [classify(request) for request in requests]
    host, port = running.service.metrics_address
    base = f"http://{host}:{port}/traces/"

    def get(path: str, token: str | None = "t0ken") -> tuple[int, str, dict]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers), timeout=30) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    status, page, headers = get(failing.trace_id)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    check_page(page, failing)
    status, page, _ = get(healthy.trace_id)
    assert status == 200 and "Not stored: steps are kept only for runs with findings" in page
    assert get(failing.trace_id, token=None)[0] == 401  # stored data: the token /metrics asks for
    assert get("0" * 31 + "1")[0] == 404
    assert get("not-a-trace")[0] == 400

    code = sorted(failing.findings)[0]

    def review(token: str | None) -> int:  # `mastwatch review` beside the server: a write, behind the same token
        body = json.dumps({"trace_id": failing.trace_id, "failure_mode": code, "verdict": "confirmed",
                           "reviewer": "sre"}).encode()
        headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
        try:
            with urllib.request.urlopen(urllib.request.Request(f"http://{host}:{port}/v1/reviews", body, headers),
                                        timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    assert review(None) == 401 and review("wrong") == 401
    assert review("t0ken") == 200
    assert f"Reviewed: {code} confirmed by sre, 20" in get(failing.trace_id)[1]

    # the page served has a form per finding (Right / Wrong) and one to report a miss, posted to the same origin
    page = get(failing.trace_id)[1]
    assert page.count('<form class="review" method="post" action="/v1/reviews">') == len(failing.findings) + 1
    assert f'<input type="hidden" name="failure_mode" value="{code}">' in page
    assert '<button name="verdict" value="dismissed">Wrong</button>' in page and ">Report missed</button>" in page
    assert f'<option value="{code}">' not in page  # a mode found is not offered as missed

    def form(fields: dict[str, str], site: str | None = "same-origin", kind: str = "application/x-www-form-urlencoded"
             ) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection(host, port, timeout=30)
        headers = {"Content-Type": kind, "Authorization": "Bearer t0ken", **({"Sec-Fetch-Site": site} if site else {})}
        connection.request("POST", "/v1/reviews", urllib.parse.urlencode(fields), headers)
        reply = connection.getresponse()
        body = reply.read().decode()
        connection.close()
        return reply.status, dict(reply.headers), body

    fields = {"trace_id": failing.trace_id, "failure_mode": code, "verdict": "dismissed", "note": "a <poll>",
              "reviewer": ""}
    assert form(fields, site="cross-site")[0] == 403 and form(fields, site=None)[0] == 403  # no forged review
    assert form(fields, kind="text/plain")[0] == 415
    status, headers, _ = form(fields)
    assert status == 303 and headers["Location"] == f"/traces/{failing.trace_id}#finding-{code}"
    page = get(failing.trace_id)[1]
    assert f"Reviewed: {code} dismissed, 20" in page and ": a &lt;poll&gt;" in page
    assert '<div class="note">the same problem (signature ' in page  # how often it recurs, and its reviews
    status, _, body = form({**fields, "verdict": "missed"})
    assert status == 409 and "Review not recorded" in body and "confirm or dismiss it" in body
    assert f'<a href="/traces/{failing.trace_id}">Back to the run</a>' in body


def classify(request: ExportTraceServiceRequest) -> Verdict:
    from tests.test_modes import classify_request

    return classify_request(request)


def test_steps_off_reads_as_yaml_writes_it() -> None:
    from mastwatch.config import load, set_overrides

    assert load(None, set_overrides(["exporters.store.steps=off"]), environ={}).exporters.store.steps == "off"
    assert load(None, environ={"MASTWATCH_EXPORTERS__STORE__STEPS": "off"}).exporters.store.steps == "off"


def test_cache_reads_and_writes_are_told_apart() -> None:
    """A cache write is priced above input (Anthropic: 1.25x), a read below it: "cached" would hide which."""
    from mastwatch.show import tokens

    step = {"input_tokens": 5000, "output_tokens": 100, "cache_read_tokens": 1000, "cache_write_tokens": 4000}
    assert tokens(step) == "5,000→100 (1,000 read from cache, 4,000 written to cache)"
    assert tokens({**step, "cache_read_tokens": 0, "cache_write_tokens": 0}) == "5,000→100"


def test_show_names_the_release_a_run_came_from(store) -> None:
    """The version and environment its resource named, one phrase; no line when it named neither."""
    from mastwatch.exporter.store.queries import stored_run
    from mastwatch.show import header, release

    path, (_, failing, _) = store
    from mastwatch.exporter.store.chdb_engine import ChdbEngine

    engine = ChdbEngine(str(path), create=False)
    try:
        stored = stored_run(engine, "mastwatch", failing.trace_id)
    finally:
        engine.close()
    assert stored is not None and "release" not in dict(header(stored))  # the recorded runs named none
    stored.run.update(version="3.2.0", environment="production")
    assert dict(header(stored))["release"] == "3.2.0 in production"
    assert [release({"version": v, "environment": e}) for v, e in (("3.2.0", ""), ("", "staging"))] == [
        "3.2.0", "(no version) in staging"]
