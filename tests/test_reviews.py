"""People's reviews of findings: written to chDB, refused when they contradict the run, added up per mode by `top
reviews`, shown by `show` and the trace page, and sent through a running server that holds the store."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mastwatch.exporter.store.queries import Filters, run, stored_run
from mastwatch.exporter.store.reviews import Review, ReviewRefused, add_review
from tests.sdk_agents import agent_run, provider, step
from tests.test_store_queries import DAY, RANGE, T0, filled_for_the_cli

ONE, TWO, FOUR, FIVE = (f"{n:032x}" for n in (1, 2, 4, 5))  # fill(): 1 loops (FM-1.3, judged too), 4 FM-3.3, 5 clean


def by_mode(rows: list[dict]) -> dict[str, dict]:
    return {r["failure_mode"]: r for r in rows}


def test_reviews_add_up_per_mode_the_latest_of_each_run_counting(store) -> None:
    engine = store.engine
    assert add_review(engine, "mastwatch", Review(ONE, "fm-1.3", "dismissed", "ana")) == ["judge", "structure"]
    assert add_review(engine, "mastwatch", Review(ONE, "FM-1.3", "confirmed", "bo", "same call five times")) == [
        "judge", "structure"]  # bo's later word replaces ana's in the figures
    add_review(engine, "mastwatch", Review(f"{3:032x}", "FM-1.3", "confirmed", "bo"))
    passed = "the check passed:\tit's \\ 'fine'\n"  # kept as written
    add_review(engine, "mastwatch", Review(FOUR, "FM-3.3", "dismissed", "bo", passed))
    assert add_review(engine, "mastwatch", Review(TWO, "FM-2.5", "missed", "ana", "ignored the error")) == []
    rows = by_mode(run(engine, "mastwatch", "reviews", RANGE))
    loop = rows["FM-1.3"]
    assert (loop["found_runs"], loop["reviewed"], loop["confirmed"], loop["dismissed"]) == (3, 2, 2, 0)
    assert (loop["confirmed_share"], loop["missed"], loop["found_share"]) == (1, 0, 1)
    check = rows["FM-3.3"]
    assert (check["reviewed"], check["confirmed_share"], check["latest_dismissal"]) == (1, 0, passed)
    miss = rows["FM-2.5"]
    assert (miss["found_runs"], miss["reviewed"], miss["missed"], miss["found_share"]) == (0, 0, 1, 0)
    assert rows["FM-2.3"]["found_runs"] == 1 and rows["FM-2.3"]["reviewed"] == 0  # found, left to review
    # the judge read runs 1 and 4: it confirmed FM-1.3 in 1 (reviewed confirmed: agreed) and rejected FM-3.3 in 4
    # (reviewed dismissed: agreed); it read none of the other runs reviewed
    assert (loop["judged"], loop["judge_agreement"]) == (1, 1) and (check["judged"], check["judge_agreement"]) == (1, 1)
    assert (miss["judged"], miss["judge_agreement"]) == (0, 0)
    add_review(engine, "mastwatch", Review(FOUR, "FM-2.3", "dismissed"))  # what the judge alone found: wrong
    drift = by_mode(run(engine, "mastwatch", "reviews", RANGE))["FM-2.3"]
    assert (drift["reviewed"], drift["dismissed"], drift["judged"], drift["judge_agreement"]) == (1, 1, 1, 0)
    assert list(rows)[:2] == ["FM-1.3", "FM-3.3"]  # the most reviewed first
    only = run(engine, "mastwatch", "reviews", Filters(T0, T0 + DAY, mode="FM-3.3"))
    assert [r["failure_mode"] for r in only] == ["FM-3.3"]
    assert run(engine, "mastwatch", "reviews", Filters(T0 + DAY, T0 + 2 * DAY)) == []  # by the runs' start
    data_bot = by_mode(run(engine, "mastwatch", "reviews", Filters(T0, T0 + DAY, agent="data-bot")))
    assert data_bot["FM-1.3"]["reviewed"] == 1 and "FM-2.5" not in data_bot  # trace 3 is data-bot's, 2 sre-bot's
    history = engine.query("SELECT reviewer, verdict, bases FROM mastwatch.mast_reviews WHERE trace_id = {t:String} "
                           "ORDER BY reviewed_at", {"t": ONE})
    assert history == [{"reviewer": "ana", "verdict": "dismissed", "bases": ["judge", "structure"]},
                       {"reviewer": "bo", "verdict": "confirmed", "bases": ["judge", "structure"]}]
    (row,) = engine.query("SELECT service, agent, toUnixTimestamp64Nano(started_at) AS ns FROM mastwatch.mast_reviews "
                          "WHERE trace_id = {t:String} AND failure_mode = 'FM-3.3'", {"t": FOUR})
    assert (row["service"], row["agent"], row["ns"]) == ("data", "data-bot", T0 + 4)  # the run's, from mast_traces
    signatures = {r["signature"]: r for r in run(engine, "mastwatch", "signatures", RANGE)}

    def signature(trace_id: str, mode: str) -> dict:
        (row,) = engine.query("SELECT DISTINCT signature FROM mastwatch.mast_findings WHERE trace_id = {t:String} "
                              "AND failure_mode = {m:String} AND basis != 'judge'", {"t": trace_id, "m": mode})
        return signatures[row["signature"]]

    assert (signature(ONE, "FM-1.3")["confirmed_reviews"], signature(ONE, "FM-1.3")["dismissed_reviews"]) == (1, 0)
    assert (signature(FOUR, "FM-3.3")["confirmed_reviews"], signature(FOUR, "FM-3.3")["dismissed_reviews"]) == (0, 1)
    # runs 1 and 3 (FM-1.3) and 4 (FM-3.3); the judge's FM-2.3 finding has no signature and a miss no finding
    assert sum(r["confirmed_reviews"] + r["dismissed_reviews"] for r in signatures.values()) == 3
    shown = stored_run(engine, "mastwatch", ONE)
    assert [(r["failure_mode"], r["verdict"], r["reviewer"], r["note"]) for r in shown.reviews] == [
        ("FM-1.3", "confirmed", "bo", "same call five times")]
    # each finding's problem across runs: its signature's runs, first sighting and reviews
    (loop_finding,) = [f for f in shown.findings if f["failure_mode"] == "FM-1.3" and f["basis"] != "judge"]
    recurring = shown.recurrence[loop_finding["signature"]]
    assert (recurring["runs"], recurring["confirmed"], recurring["dismissed"]) == (
        signature(ONE, "FM-1.3")["runs_all_time"], 1, 0)
    assert recurring["first_ns"] <= T0 + 1


def test_a_review_that_contradicts_the_run_is_refused_and_writes_nothing(store) -> None:
    engine = store.engine
    with pytest.raises(ReviewRefused, match="is not in the store"):
        add_review(engine, "mastwatch", Review(f"{99:032x}", "FM-1.3", "confirmed"))
    with pytest.raises(ReviewRefused, match=r"has no FM-3.3 finding to be confirmed \(its findings: none\)"):
        add_review(engine, "mastwatch", Review(FIVE, "FM-3.3", "confirmed"))
    with pytest.raises(ReviewRefused, match=r"has an FM-1\.3 finding: confirm or dismiss it"):
        add_review(engine, "mastwatch", Review(ONE, "FM-1.3", "missed"))
    assert engine.query("SELECT count() AS n FROM mastwatch.mast_reviews") == [{"n": 0}]
    for fields, message in [({"trace_id": "xyz", "failure_mode": "FM-1.3", "verdict": "confirmed"}, "not a trace id"),
                            ({"trace_id": ONE, "failure_mode": "FM-4.1", "verdict": "confirmed"}, "not a MAST"),
                            ({"trace_id": ONE, "failure_mode": "FM-1.3", "verdict": "right"}, "not a verdict"),
                            ({"trace_id": ONE, "failure_mode": "FM-1.3", "verdict": "confirmed", "note": "x" * 2001},
                             "at most 2,000"),
                            ({"trace_id": ONE, "failure_mode": "FM-1.3"}, "missing field verdict"),
                            ({"trace_id": ONE, "failure_mode": "FM-1.3", "verdict": "confirmed", "by": "x"},
                             "unknown field by"),
                            ({"trace_id": ONE, "failure_mode": "FM-1.3", "verdict": 1}, "every field is a string"),
                            ([ONE], "JSON object")]:
        with pytest.raises(ValueError, match=message):
            Review.from_json(fields)


def test_review_then_top_reviews_and_show_from_the_command_line(tmp_path) -> None:
    top, _ = filled_for_the_cli(tmp_path)
    mastwatch = [sys.executable, "-m", "mastwatch.cli"]

    def review(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*mastwatch, "review", *args, "--store-path", str(tmp_path)], capture_output=True,
                              text=True, timeout=60)

    done = review(FOUR, "fm-3.3", "dismissed", "--note", "the check passed", "--by", "bo")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{FOUR}: FM-3.3 finding (structure) dismissed by bo"
    assert review(FIVE, "FM-2.5", "missed").returncode == 0  # by the user running it
    refused = review(FIVE, "FM-3.3", "confirmed")
    assert refused.returncode == 1 and "has no FM-3.3 finding to be confirmed" in refused.stderr
    wrong = review(FOUR, "FM-9.9", "dismissed")
    assert wrong.returncode == 2 and "is not a MAST failure mode" in wrong.stderr
    out = subprocess.run([*top, "reviews"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    header, *lines = out.stdout.splitlines()
    assert header.split()[:4] == ["failure_mode", "found_runs", "reviewed", "confirmed"]
    assert lines[0].split()[:8] == ["FM-3.3", "1", "1", "0", "1", "0", "0", "0"] and lines[0].endswith(
        "the check passed")
    shown = subprocess.run([*mastwatch, "show", FOUR, "--store-path", str(tmp_path)], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "reviews (the latest per mode):\n    FM-3.3 dismissed by bo, 20" in shown.stdout
    assert "the same problem (signature " in shown.stdout
    assert "; reviewed 0 confirmed, 1 dismissed" in shown.stdout
    assert shown.stdout.rstrip().endswith(": the check passed")


def test_review_goes_through_the_server_that_holds_the_store(server, tmp_path: Path) -> None:
    """Beside a running server the command posts the review to its metrics port, which writes it; bad bodies get a
    400, reviews that contradict the run a 409, another store's a 409, a GET a 405."""
    tp = provider("http", server.http_url)
    tracer = tp.get_tracer("test")
    with agent_run(tracer) as root:
        for _ in range(4):
            step(tracer, "kubectl_get_pods", {"namespace": "prod"})
    tp.shutdown()
    trace_id = format(root.get_span_context().trace_id, "032x")
    server.wait_for(lambda: server.rows("SELECT count() AS n FROM {db}.mast_traces")[0]["n"] == 1)
    endpoint = server.endpoint

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return server.cli(*args, cwd=tmp_path)

    done = cli("review", trace_id, "FM-1.3", "confirmed", "--by", "oncall", "--note", "looped on get_pods")
    assert done.returncode == 0 and done.stdout.strip() == f"{trace_id}: FM-1.3 finding (structure) confirmed by " \
        "oncall", done
    refused = cli("review", trace_id, "FM-3.3", "dismissed")
    assert refused.returncode == 1 and "has no FM-3.3 finding to be dismissed" in refused.stderr, refused
    assert server.rows("SELECT reviewer, note FROM {db}.mast_reviews") == [
        {"reviewer": "oncall", "note": "looped on get_pods"}]
    top = cli("top", "reviews", "--since", "7d", "--format", "json")
    assert top.returncode == 0, top
    row = by_mode([json.loads(line) for line in top.stdout.splitlines()])["FM-1.3"]
    assert (row["found_runs"], row["confirmed"], row["confirmed_share"]) == (1, 1, 1)
    shown = cli("show", trace_id)
    assert "FM-1.3 confirmed by oncall" in shown.stdout, shown

    url = f"http://{endpoint}/v1/reviews"

    def post(body: bytes, query: str = "") -> tuple[int, dict]:
        request = urllib.request.Request(url + query, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    status, body = post(b"{not json")
    assert status == 400 and "error" in body
    status, body = post(json.dumps({"trace_id": trace_id, "failure_mode": "FM-1.3", "verdict": "missed"}).encode())
    assert status == 409 and "confirm or dismiss it" in body["error"]
    status, body = post(json.dumps({"trace_id": "0" * 31 + "1", "failure_mode": "FM-1.3",
                                    "verdict": "missed"}).encode())
    assert status == 404 and "not in the store" in body["error"]
    status, body = post(json.dumps({"trace_id": trace_id, "failure_mode": "FM-1.3", "verdict": "dismissed"}).encode(),
                        f"?store={tmp_path / 'other'}")
    assert status == 409 and "it holds the store in" in body["error"]
    with pytest.raises(urllib.error.HTTPError) as get:
        urllib.request.urlopen(url, timeout=30)
    assert get.value.code == 405 and get.value.headers["Allow"] == "POST"
    assert len(server.rows("SELECT * FROM {db}.mast_reviews")) == 1  # nothing refused was written
