"""Muted failure signatures: written to chDB, read back as the signatures muted now (an unmute or an end takes one
out), and applied by a running server: a muted problem's runs are stored and counted apart, not in the series the
alerts read, and the webhook-facing live findings leave them out; `mute`, `unmute`, `top mutes`, `show` and the run
page through the server that holds the store."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from mastwatch.collector.model.published import NO_INCREMENT
from mastwatch.exporter.store import StoreConfig, StoreExporter
from mastwatch.exporter.store.mutes import Mute, SignatureNotStored, muted_signatures, set_mute
from mastwatch.exporter.store.queries import run, stored_run
from tests.sdk_agents import agent_run, chat, provider, step
from tests.test_store import make_verdict
from tests.test_store_queries import RANGE

ONE = f"{1:032x}"  # fill(): 1 loops (FM-1.3)


def loop_signature(engine, trace_id: str = ONE) -> str:
    (row,) = engine.query("SELECT DISTINCT signature FROM mastwatch.mast_findings WHERE trace_id = {t:String} AND "
                          "failure_mode = 'FM-1.3' AND basis != 'judge'", {"t": trace_id})
    return row["signature"]


def test_the_latest_mute_or_unmute_of_a_signature_decides_and_a_mute_ends(store) -> None:
    engine = store.engine
    loop = loop_signature(engine)
    assert muted_signatures(engine, "mastwatch") == frozenset()
    set_mute(engine, "mastwatch", Mute(loop.upper(), changed_by="ana", note="polls by design"))
    assert muted_signatures(engine, "mastwatch") == {loop}
    (row,) = run(engine, "mastwatch", "mutes", RANGE)
    assert (row["signature"], row["mode"], row["muted_by"], row["muted_until"], row["note"]) == (
        loop, "FM-1.3", "ana", "", "polls by design")
    assert row["runs_since"] == 0  # the runs stored were before the mute
    signatures = {r["signature"]: r for r in run(engine, "mastwatch", "signatures", RANGE)}
    assert signatures[loop]["muted"] == "yes" and signatures[loop]["state"] == "muted"
    assert {r["muted"] for s, r in signatures.items() if s != loop} == {"no"}
    assert [r["signature"] for r in run(engine, "mastwatch", "signatures", replace(RANGE, state="muted"))] == [loop]
    shown = stored_run(engine, "mastwatch", ONE)
    assert shown.recurrence[loop]["mute"]["muted_by"] == "ana"
    set_mute(engine, "mastwatch", Mute(loop, muted=False, changed_by="bo"))
    assert muted_signatures(engine, "mastwatch") == frozenset()
    assert run(engine, "mastwatch", "mutes", RANGE) == []
    assert "mute" not in stored_run(engine, "mastwatch", ONE).recurrence[loop]
    set_mute(engine, "mastwatch", Mute(loop, seconds=1))
    assert muted_signatures(engine, "mastwatch") == {loop}
    assert run(engine, "mastwatch", "signatures", RANGE)[0]["muted"].startswith("yes, until 20")
    time.sleep(1.2)
    assert muted_signatures(engine, "mastwatch") == frozenset()  # it ended
    set_mute(engine, "mastwatch", Mute(loop, runs=2, note="until it grows"))
    for n, still in ((7, True), (8, False)):  # the same problem in new runs: the second ends the mute
        store.export_verdicts([make_verdict(n, "ops", "sre-bot", time.time_ns(), ("kubectl",))], [NO_INCREMENT])
        assert store.flush()
        assert (muted_signatures(engine, "mastwatch") == {loop}) is still
        if still:
            (row,) = run(engine, "mastwatch", "mutes", RANGE)
            assert (row["until_runs"], row["runs_since"], row["muted_until"]) == (2, 1, "")
            assert stored_run(engine, "mastwatch", ONE).recurrence[loop]["mute"]["runs_since"] == 1
            assert {r["signature"]: r for r in run(engine, "mastwatch", "signatures", RANGE)}[loop]["muted"] == \
                "yes, for 1 more runs"
    history = engine.query("SELECT muted, changed_by, max_runs FROM mastwatch.mast_mutes ORDER BY changed_at")
    assert history == [{"muted": True, "changed_by": "ana", "max_runs": 0},
                       {"muted": False, "changed_by": "bo", "max_runs": 0},
                       {"muted": True, "changed_by": "", "max_runs": 0},
                       {"muted": True, "changed_by": "", "max_runs": 2}]
    (row,) = engine.query("SELECT service, agent, failure_mode FROM mastwatch.mast_mutes LIMIT 1")
    assert (row["agent"], row["failure_mode"]) == ("sre-bot", "FM-1.3")  # the signature's, from mast_signatures


def test_a_mute_that_names_no_stored_signature_or_is_malformed_is_refused(store) -> None:
    with pytest.raises(SignatureNotStored, match="has seen no finding of signature 00000000000000ff"):
        set_mute(store.engine, "mastwatch", Mute("00000000000000ff"))
    assert store.engine.query("SELECT count() AS n FROM mastwatch.mast_mutes") == [{"n": 0}]
    for body, message in [({"signature": "xyz"}, "not a failure signature"),
                          ({"signature": "0" * 16, "for": "soon"}, "duration"),
                          ({"signature": "0" * 16, "for": "0s"}, "at least a second"),
                          ({"signature": "0" * 16, "muted": False, "for": "1d"}, "an unmute takes no duration"),
                          ({"signature": "0" * 16, "muted": False, "runs": 5}, "and no runs"),
                          ({"signature": "0" * 16, "runs": "5"}, "runs is a whole number"),
                          ({"signature": "0" * 16, "runs": -1}, "from 1 to"),
                          ({"signature": "0" * 16, "muted": "no"}, "muted is true or false"),
                          ({"signature": "0" * 16, "until": "1d"}, "unknown field until"),
                          ({"signature": "0" * 16, "note": "x" * 2001}, "at most 2,000"),
                          ({}, "missing field signature"), (["0" * 16], "JSON object")]:
        with pytest.raises(ValueError, match=message):
            Mute.from_json(body)
    assert Mute.from_json({"signature": "0" * 16, "for": "7d"}).seconds == 7 * 86_400
    assert Mute.from_json(Mute("0" * 16, seconds=60, runs=3).to_json()) == Mute("0" * 16, seconds=60, runs=3)


def test_a_muted_problem_is_stored_and_counted_apart_while_the_server_runs(server, tmp_path: Path) -> None:
    """Muted through the server holding the store (the CLI posts to it), a looping agent's next run is stored with
    its finding but counted in mast_muted_failure_mode_traces_total, not in the failure-mode and failing series;
    the findings that listeners hear leave it out; unmuted, the next run counts again."""
    tp = provider("http", server.http_url)
    tracer = tp.get_tracer("test")

    def looping_run() -> str:
        with agent_run(tracer) as root:
            for _ in range(4):
                step(tracer, "kubectl_get_pods", {"namespace": "prod"})
            chat(tracer)  # the model reads the last result and answers
        return format(root.get_span_context().trace_id, "032x")

    def stored(n: int) -> None:
        server.wait_for(lambda: server.rows("SELECT count() AS n FROM {db}.mast_traces")[0]["n"] == n)

    heard: list = []
    server.service.processor.listeners.append(type("L", (), {"findings_changed": lambda self, c: heard.extend(c)})())
    first = looping_run()
    stored(1)
    (row,) = server.rows(f"SELECT signature FROM {{db}}.mast_findings WHERE trace_id = '{first}'")
    signature = row["signature"]
    endpoint = server.endpoint

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return server.cli(*args, cwd=tmp_path)

    done = cli("mute", signature, "--for", "7d", "--runs", "50", "--by", "oncall", "--note", "polls by design")
    assert done.returncode == 0, done
    assert done.stdout.startswith(f"{signature}: muted for 7d or for 50 more runs by oncall")
    assert server.service.processor.muted == {signature}  # applied at once, not at the next refresh
    assert server.sample("mastwatch_muted_signatures") == 1
    heard.clear()
    second = looping_run()
    stored(2)
    assert server.rows(f"SELECT failure_mode FROM {{db}}.mast_findings WHERE trace_id = '{second}'") == [
        {"failure_mode": "FM-1.3"}]  # still stored
    assert server.sample("mast_traces_total", agent="sre-bot") == 2
    assert server.sample("mast_failure_mode_traces_total", failure_mode="FM-1.3") == 1
    assert server.sample("mast_muted_failure_mode_traces_total", failure_mode="FM-1.3", agent="sre-bot") == 1
    assert server.sample("mast_failing_traces_total", agent="sre-bot") == 1
    assert server.sample("mast_repeated_steps_total", agent="sre-bot") == 6  # what it cost is real: 3 + 3
    assert heard and all(not change.findings for change in heard)  # a stop signal is not told of it

    top = cli("top", "mutes", "--format", "json")
    assert top.returncode == 0, top
    (row,) = [json.loads(line) for line in top.stdout.splitlines()]
    assert (row["signature"], row["muted_by"], row["runs_since"], row["note"]) == (
        signature, "oncall", 1, "polls by design")
    shown = cli("show", second)
    assert shown.returncode == 0, shown
    assert f"the same problem (signature {signature}): 2 runs since" in shown.stdout
    assert "muted by oncall since 20" in shown.stdout and ", or 49 more runs; 1 run since): polls by design: not " \
        "counted" in shown.stdout

    page_url = f"http://{endpoint}/traces/{second}"
    with urllib.request.urlopen(page_url, timeout=30) as reply:
        page = reply.read().decode()
    assert "muted by oncall" in page and "<button>Unmute</button>" in page
    form = urllib.parse.urlencode({"trace_id": second, "signature": signature, "muted": "false",
                                   "changed_by": "lead", "note": ""}).encode()
    forged = urllib.request.Request(f"http://{endpoint}/v1/mutes", data=form, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(forged, timeout=30)
    assert refused.value.code == 403
    assert server.service.processor.muted == {signature}
    same_origin = urllib.request.Request(f"http://{endpoint}/v1/mutes", data=form, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"})
    with urllib.request.urlopen(same_origin, timeout=30) as reply:  # redirected back to the run's page
        assert reply.url == page_url and "Mute this problem" in reply.read().decode()
    assert server.service.processor.muted == frozenset()
    assert server.sample("mastwatch_muted_signatures") == 0
    looping_run()
    stored(3)
    assert server.sample("mast_failure_mode_traces_total", failure_mode="FM-1.3") == 2
    assert server.sample("mast_failing_traces_total", agent="sre-bot") == 2

    muted_from_the_page = urllib.request.Request(f"http://{endpoint}/v1/mutes", data=urllib.parse.urlencode({
        "trace_id": second, "signature": signature, "for": "1d", "runs": "10", "changed_by": "lead", "note": ""
    }).encode(), headers={"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"})
    with urllib.request.urlopen(muted_from_the_page, timeout=30) as reply:
        assert "<button>Unmute</button>" in reply.read().decode()
    assert server.service.processor.muted == {signature}
    assert server.rows("SELECT max_runs, until > now64(9) + toIntervalHour(23) AS a_day FROM {db}.mast_mutes "
                       "ORDER BY changed_at DESC LIMIT 1") == [{"max_runs": 10, "a_day": 1}]
    unknown = cli("mute", "00000000000000ff")
    assert unknown.returncode == 1 and "has seen no finding of signature 00000000000000ff" in unknown.stderr
    wrong = cli("unmute", "xyz")
    assert wrong.returncode == 2 and "is not a failure signature" in wrong.stderr
    status = urllib.request.Request(f"http://{endpoint}/v1/mutes", data=b'{"signature": "0"}',
                                    headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(status, timeout=30)
    assert bad.value.code == 400
    tp.shutdown()


def test_a_server_reads_the_store_s_mutes_at_start(start_server, tmp_path) -> None:
    """A mute written while no server ran (or by another replica) applies from the start."""
    first = start_server()
    tp = provider("http", first.http_url)
    tracer = tp.get_tracer("test")
    with agent_run(tracer):
        for _ in range(4):
            step(tracer, "kubectl_get_pods", {"namespace": "prod"})
    tp.shutdown()
    first.wait_for(lambda: first.rows("SELECT count() AS n FROM {db}.mast_traces")[0]["n"] == 1)
    (row,) = first.rows("SELECT signature FROM {db}.mast_findings WHERE failure_mode = 'FM-1.3'")
    first.service.stop()
    engine = StoreExporter(StoreConfig(path=str(tmp_path / "store")))
    set_mute(engine.engine, "mastwatch", Mute(row["signature"]))
    engine.shutdown()
    again = start_server()
    assert again.service.processor.muted == {row["signature"]}
