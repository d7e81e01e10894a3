"""Each way a user can get a command wrong gets one line saying what is wrong and what to do, and a non-zero exit:
no traceback, no silent success, nothing created where nothing was asked for."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.test_lifecycle import MASTWATCH, _wait_http

CHDB_OWN = "DB::Exception: Cannot lock file"  # chDB's own line when its directory is locked; ours follows


def _run(*args: str, cwd: Path) -> tuple[int, list[str]]:
    result = subprocess.run([*MASTWATCH, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    lines = [line for line in result.stderr.splitlines() if line.strip() and CHDB_OWN not in line]
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, lines


@pytest.mark.parametrize(("args", "says"), [
    (("replay", "empty.json"), "empty.json: no spans in it"),
    (("replay", "text.txt"), "text.txt:1: not OTLP/JSON"),
    (("top", "traces", "--mode", "FM-9.9"), "'FM-9.9' is not a MAST failure mode"),
    (("top", "traces", "--limit", "0"), "--limit: 0 must be at least 1"),
    (("top", "traces", "--store-path", "missing"), "no store at"),
    (("report", "--out", "r.html", "--store-path", "missing"), "no store at"),
    (("show", "0" * 31 + "1", "--store-path", "missing"), "no store at"),
    (("show", "4bf92f35"), "'4bf92f35' is not a trace id: 32 hexadecimal digits"),
    (("report", "--out", "r.html", "--trace", "0" * 32), "is not a trace id: 32 hexadecimal digits, not all zero"),
    (("report", "--out", "r.html", "--trace", "0" * 31 + "1", "--png", "r.png"), "--png draws the dashboards'"),
    (("demo", "--pace", "-1"), "--pace: -1 must be at least 0.001"),
    (("demo", "--duration", "nan"), "--duration: nan must be at least 0"),
    (("demo", "--duration", "two minutes"), "--duration: 'two minutes' is not a number of seconds nor a duration"),
], ids=["replay-empty", "replay-not-otlp", "top-bad-mode", "top-bad-limit", "top-no-store", "report-no-store",
        "show-no-store", "show-bad-id", "report-trace-bad-id", "report-trace-png", "demo-negative-pace",
        "demo-nan-duration", "demo-bad-duration"])
def test_a_wrong_command_is_one_clear_line(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "text.txt").write_text("hello world\n")
    code, lines = _run(*args, cwd=tmp_path)
    assert code != 0
    # one line says it (argparse's usage lines come before it, as for any argument error)
    assert lines[-1].startswith("mastwatch") and says in lines[-1], lines
    assert all(line.startswith(("usage:", " ")) for line in lines[:-1]), lines
    assert not (tmp_path / "missing").exists()  # a reader creates no store


def test_a_store_another_process_holds_is_one_clear_line(tmp_path: Path) -> None:
    store = str(tmp_path / "held")
    ports = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    first = subprocess.Popen([*MASTWATCH, "serve", "--grpc-endpoint", ports[0], "--http-endpoint", ports[1],
                              "--metrics-endpoint", ports[2], "--store-path", store], stderr=subprocess.DEVNULL)
    try:
        _wait_http(f"http://{ports[2]}/metrics")
        for args in (("serve", "--grpc-endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
                      "--metrics-endpoint", "127.0.0.1:0", "--store-path", store),
                     ("report", "--out", "r.html", "--store-path", store),
                     ("top", "traces", "--store-path", store), ("show", "0" * 31 + "1", "--store-path", store)):
            code, lines = _run(*args, cwd=tmp_path)
            # top and show ask the server at the configured metrics endpoint, which is not this one's
            assert code == 1 and len(lines) == 1, (args, lines)
            assert "in use by another process" in lines[0] or "held by another process" in lines[0], (args, lines)
    finally:
        first.terminate()
        first.wait(60)


def test_durations_are_written_as_the_settings_write_them() -> None:
    from mastwatch.cli import _seconds

    assert _seconds(0)("120") == _seconds(0)("2m") == 120.0 and _seconds(0.001)("250ms") == 0.25


def test_a_bad_line_in_a_replay_loses_nothing_read_before_it(tmp_path: Path) -> None:
    """The runs read before the bad line are classified, printed and stored; the store is closed cleanly (the
    process exits with the error's status, not a crash), and a bad first line is named as a line."""
    from mastwatch.collector.receiver.otlp_json import to_json
    from tests.test_receiver import request_of

    (tmp_path / "runs.jsonl").write_text(to_json(request_of(3, trace=77)) + "\nnot json\n")
    store = str(tmp_path / "store")
    result = subprocess.run([*MASTWATCH, "replay", "runs.jsonl", "--store", store], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 2, result
    assert "runs.jsonl:2: not JSON" in result.stderr.splitlines()[-1]
    (verdict,) = [line for line in result.stdout.splitlines() if line.strip()]
    assert (77).to_bytes(16, "big").hex() in verdict
    shown = subprocess.run([*MASTWATCH, "show", (77).to_bytes(16, "big").hex(), "--store-path", store],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert shown.returncode == 0 and "3 tool calls" in shown.stdout, shown
    (tmp_path / "first.jsonl").write_text("not json\n")
    code, lines = _run("replay", "first.jsonl", cwd=tmp_path)
    assert code == 2 and lines[-1].startswith("mastwatch replay: first.jsonl:1: not OTLP/JSON"), lines
