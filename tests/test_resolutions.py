"""Failure signatures marked fixed: written to chDB, read back as the signatures resolved now (a reopen takes one
out), shown as regressed once a run after shows them; a running server counts a regression once per resolution, and
`resolve`, `reopen`, `top signatures`, `show` and the run page go through the server that holds the store."""

from __future__ import annotations

import time
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from mastwatch.collector.model.published import NO_INCREMENT
from mastwatch.exporter.store.mutes import SignatureNotStored
from mastwatch.exporter.store.queries import Filters, run, stored_run
from mastwatch.exporter.store.resolutions import Resolution, resolved_signatures, set_resolution
from tests.sdk_agents import agent_run, chat, provider, step
from tests.test_mutes import ONE, loop_signature
from tests.test_store import make_verdict
from tests.test_store_queries import RANGE


def test_a_resolved_signature_shows_as_regressed_once_a_later_run_shows_it(store) -> None:
    engine = store.engine
    loop = loop_signature(engine)
    assert resolved_signatures(engine, "mastwatch") == {}
    before = time.time_ns()
    set_resolution(engine, "mastwatch", Resolution(loop.upper(), changed_by="ana", note="new prompt"))
    (resolved_ns,) = resolved_signatures(engine, "mastwatch").values()
    assert before <= resolved_ns <= time.time_ns()

    def shown() -> str:
        return {r["signature"]: r for r in run(engine, "mastwatch", "signatures", RANGE)}[loop]["resolved"]

    def state() -> str:
        """The loop's state, and the one `--state` finds it under (and only it)."""
        (row,) = [r for r in run(engine, "mastwatch", "signatures", RANGE) if r["signature"] == loop]
        holding = {s for s in ("open", "muted", "resolved", "regressed")
                   if loop in {r["signature"] for r in run(engine, "mastwatch", "signatures", replace(RANGE, state=s))}}
        assert holding == {row["state"]}
        return row["state"]

    assert shown().startswith("since 20") and state() == "resolved"  # the runs stored were before it
    (held,) = run(engine, "mastwatch", "resolutions", RANGE)
    assert (held["signature"], held["mode"], held["agent_name"], held["resolved_by"], held["runs_since"],
            held["last_seen_since"], held["note"]) == (loop, "FM-1.3", "sre-bot", "ana", 0, "", "new prompt")
    resolution = stored_run(engine, "mastwatch", ONE).recurrence[loop]["resolution"]
    assert (resolution["resolved_by"], resolution["note"], resolution["runs_since"]) == ("ana", "new prompt", 0)
    store.export_verdicts([make_verdict(7, "ops", "sre-bot", time.time_ns(), ("kubectl",))], [NO_INCREMENT])
    assert store.flush()
    assert shown().startswith("regressed: 1 runs since 20") and state() == "regressed"
    (broke,) = run(engine, "mastwatch", "resolutions", RANGE)
    assert broke["runs_since"] == 1 and broke["last_seen_since"] >= broke["resolved_at"]
    assert stored_run(engine, "mastwatch", ONE).recurrence[loop]["resolution"]["runs_since"] == 1
    set_resolution(engine, "mastwatch", Resolution(loop, resolved=False, changed_by="bo"))
    assert resolved_signatures(engine, "mastwatch") == {}
    assert shown() == "" and "resolution" not in stored_run(engine, "mastwatch", ONE).recurrence[loop]
    assert state() == "open"
    with pytest.raises(ValueError, match="state is one of open, muted"):
        Filters.from_query({**RANGE.query(), "state": "closed"})
    assert run(engine, "mastwatch", "resolutions", RANGE) == []


def test_a_resolution_of_an_unknown_or_malformed_signature_is_refused(store) -> None:
    with pytest.raises(SignatureNotStored, match="has seen no finding of signature 00000000000000ff"):
        set_resolution(store.engine, "mastwatch", Resolution("00000000000000ff"))
    assert store.engine.query("SELECT count() AS n FROM mastwatch.mast_resolutions") == [{"n": 0}]
    for body, message in [({"signature": "xyz"}, "not a failure signature"),
                          ({"signature": "0" * 16, "resolved": "yes"}, "resolved is true or false"),
                          ({"signature": "0" * 16, "for": "1d"}, "unknown field for"),
                          ({"signature": "0" * 16, "changed_by": "x" * 101}, "at most 100")]:
        with pytest.raises(ValueError, match=message):
            Resolution.from_json(body)
    assert Resolution.from_json(Resolution("0" * 16, False, "ana").to_json()) == Resolution("0" * 16, False, "ana")


def test_a_regression_is_counted_once_per_resolution_while_the_server_runs(server, tmp_path: Path) -> None:
    tp = provider("http", server.http_url)
    tracer = tp.get_tracer("test")
    runs = 0

    def looping_run() -> str:
        nonlocal runs
        with agent_run(tracer) as root:
            for _ in range(4):
                step(tracer, "kubectl_get_pods", {"namespace": "prod"})
            chat(tracer)
        runs += 1
        server.wait_for(lambda: server.rows("SELECT count() AS n FROM {db}.mast_traces")[0]["n"] == runs)
        return format(root.get_span_context().trace_id, "032x")

    def regressions() -> float:
        return server.sample("mast_regressed_failure_signatures_total", agent="sre-bot", failure_mode="FM-1.3")

    first = looping_run()
    (row,) = server.rows(f"SELECT signature FROM {{db}}.mast_findings WHERE trace_id = '{first}'")
    signature = row["signature"]
    done = server.cli("resolve", signature, "--by", "dev", "--note", "stop rule added", cwd=tmp_path)
    assert done.returncode == 0, done
    assert done.stdout.startswith(f"{signature}: marked fixed by dev")
    assert signature in server.service.new_signatures.resolved  # applied at once
    second = looping_run()
    assert regressions() == 1
    looping_run()
    assert regressions() == 1  # once per resolution
    shown = server.cli("show", second, cwd=tmp_path)
    assert "marked fixed by dev at 20" in shown.stdout and ": stop rule added; regressed: 2 runs since" in shown.stdout
    top = server.cli("top", "signatures", "--format", "csv", cwd=tmp_path)
    assert top.returncode == 0 and "regressed: 2 runs since" in top.stdout, top

    page_url = f"http://{server.endpoint}/traces/{second}"
    with urllib.request.urlopen(page_url, timeout=30) as reply:
        page = reply.read().decode()
    assert "marked fixed by dev" in page and "<button>Reopen</button>" in page

    def post(fields: dict[str, str]) -> str:
        request = urllib.request.Request(f"http://{server.endpoint}/v1/resolutions",
                                         data=urllib.parse.urlencode({"trace_id": second, "signature": signature,
                                                                      **fields}).encode(),
                                         headers={"Content-Type": "application/x-www-form-urlencoded",
                                                  "Sec-Fetch-Site": "same-origin"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.read().decode()

    assert "<button>Mark fixed</button>" in post({"resolved": "false", "changed_by": "dev"})  # reopened
    assert server.service.new_signatures.resolved == {}
    looping_run()
    assert regressions() == 1  # open: no regression
    assert "<button>Reopen</button>" in post({"changed_by": "dev", "note": "second try"})  # fixed again
    looping_run()
    assert regressions() == 2
    unknown = server.cli("resolve", "00000000000000ff", cwd=tmp_path)
    assert unknown.returncode == 1 and "has seen no finding of signature 00000000000000ff" in unknown.stderr
    tp.shutdown()
