"""Configuration: defaults < YAML file < MASTWATCH_* environment < --set; errors name the setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mastwatch.collector.durations import parse_duration
from mastwatch.config import Config, ConfigError, load, set_overrides

MASTWATCH = Path(sys.executable).with_name("mastwatch")


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "mastwatch.yaml"
    path.write_text(text)
    return str(path)


def file_error(path: str) -> str:
    with pytest.raises(ConfigError) as raised:
        load(path, environ={})
    return str(raised.value)


def test_defaults() -> None:
    config = load(None, environ={})
    assert isinstance(config, Config)
    assert config.processor.decision_wait == 5.0 and config.processor.detectors == {}
    assert config.receiver.grpc.endpoint == "127.0.0.1:4317" and config.receiver.http.endpoint == "127.0.0.1:4318"


def test_yaml_file(tmp_path: Path) -> None:
    path = write(tmp_path, "receiver:\n  http:\n    endpoint: 0.0.0.0:14318\nprocessor:\n  decision_wait: 10s\n"
                           "  max_traces: 7\n  detectors:\n    FM-1.3:\n      polling_tools: [get_*_status]\n")
    config = load(path, environ={})
    assert config.receiver.http.endpoint == "0.0.0.0:14318"
    assert (config.processor.decision_wait, config.processor.max_traces) == (10.0, 7)
    assert config.processor.detectors == {"FM-1.3": {"polling_tools": ["get_*_status"]}}
    assert load(None, environ={"MASTWATCH_CONFIG": path}).processor.max_traces == 7


def test_environment_overrides_file(tmp_path: Path) -> None:
    path = write(tmp_path, "processor:\n  decision_wait: 10s\n")
    env = {"MASTWATCH_PROCESSOR__DECISION_WAIT": "2s", "MASTWATCH_PROCESSOR__DETECTORS__FM_1_3__MIN_OCCURRENCES": "4",
           "MASTWATCH_UNRELATED": "x", "OTHER__VAR": "y"}
    config = load(path, environ=env)
    assert config.processor.decision_wait == 2.0
    assert config.processor.detectors == {"FM-1.3": {"min_occurrences": 4}}


def test_set_overrides_beat_environment() -> None:
    env = {"MASTWATCH_PROCESSOR__DECISION_WAIT": "2s", "MASTWATCH_PROCESSOR__MAX_TRACES": "9"}
    config = load(None, set_overrides(["processor.decision_wait=500ms",
                                       "processor.detectors.FM-1.3.min_occurrences=5"]), environ=env)
    assert (config.processor.decision_wait, config.processor.max_traces) == (0.5, 9)
    assert config.processor.detectors == {"FM-1.3": {"min_occurrences": 5}}


@pytest.mark.parametrize(("text", "seconds"), [("500ms", 0.5), ("1m", 60.0), ("10s", 10.0), ("1.5h", 5400.0),
                                               (" 2 s ", 2.0), (3, 3.0), (0.25, 0.25)])
def test_durations(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert load(None, {"processor": {"tick": text}}, environ={}).processor.tick == seconds


@pytest.mark.parametrize("bad", ["5 parsecs", "1d", "-1s", "ms", True])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize(("doc", "where"), [
    ({"processor": {"bogus": 1}}, "processor.bogus"),
    ({"processor": {"decision_wait": "5 parsecs"}}, "processor.decision_wait"),
    ({"processor": {"queue_spans": -1}}, "processor.queue_spans"),
    ({"processor": {"detectors": {"FM-9.9": {}}}}, "processor.detectors.FM-9.9"),
    ({"processor": {"detectors": {"FM-1.3": {"min_occurrences": 1}}}}, "processor.detectors.FM-1.3.min_occurrences"),
    ({"processor": {"detectors": {"FM-1.3": {"no_such_setting": 1}}}}, "processor.detectors.FM-1.3.no_such_setting"),
    ({"processor": {"agents": [{"match": ["batch-*"], "detectors": {"FM-1.3": {"min_occurrences": 0}}}]}},
     "processor.agents[0].detectors.FM-1.3.min_occurrences"),
    ({"processor": {"agents": [{"match": ["batch-*"], "detectors": {"FM-9.9": {}}}]}},
     "processor.agents[0].detectors.FM-9.9"),
    ({"processor": {"agents": [{"match": [], "detectors": {}}]}}, "processor.agents.0.match"),
    ({"receiver": {"http": {"endpoint": "localhost"}}}, "receiver.http.endpoint"),
    ({"exporters": {"prometheus": {"endpoint": "0.0.0.0:99999"}}}, "exporters.prometheus.endpoint"),
])
def test_errors_name_the_setting(doc: dict, where: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(None, doc, environ={})
    assert f"{where}:" in str(raised.value)


def test_errors_in_environment_name_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"processor\.max_traces"):
        load(None, environ={"MASTWATCH_PROCESSOR__MAX_TRACES": "0"})
    with pytest.raises(ConfigError, match="MASTWATCH_PROCESSOR__DECISION_WAIT"):
        load(None, environ={"MASTWATCH_PROCESSOR__DECISION_WAIT": "[1s"})
    with pytest.raises(ConfigError, match="--set"):
        set_overrides(["processor.decision_wait"])


def test_every_problem_is_reported_at_once_with_what_was_meant() -> None:
    """The model's, the detectors' settings' and the endpoints' problems in one message; a mistyped key names the
    key it resembles, and a value the environment set names its variable."""
    doc = {"receiver": {"http": {"endpont": "127.0.0.1:4318"}, "grpc": {"endpoint": "127.0.0.1:99999"}},
           "processor": {"decision_wait": "soon", "detectors": {"FM-1.3": {"min_occurences": 3}}}}
    with pytest.raises(ConfigError) as raised:
        load(None, doc, environ={"MASTWATCH_PROCESSOR__MAX_TRACE": "7"})
    lines = str(raised.value).splitlines()[1:]
    assert len(lines) == 5, lines
    assert "  receiver.http.endpont: Extra inputs are not permitted (got '127.0.0.1:4318'); did you mean " \
        "receiver.http.endpoint?" in lines
    assert any(line.startswith("  processor.decision_wait:") for line in lines)
    assert "  processor.detectors.FM-1.3.min_occurences: Extra inputs are not permitted (got 3); did you mean " \
        "processor.detectors.FM-1.3.min_occurrences?" in lines
    assert "  receiver.grpc.endpoint: port 99999 of '127.0.0.1:99999' is not between 0 and 65535" in lines
    assert "  processor.max_trace: Extra inputs are not permitted (got 7); did you mean processor.max_traces? " \
        "(from $MASTWATCH_PROCESSOR__MAX_TRACE)" in lines


def test_file_errors(tmp_path: Path) -> None:
    missing = str(tmp_path / "absent.yaml")
    assert missing in file_error(missing)
    assert "not valid YAML" in file_error(write(tmp_path, "processor: [unclosed\n"))
    assert "mapping at the top level" in file_error(write(tmp_path, "- just\n- a list\n"))
    assert load(write(tmp_path, ""), environ={}).processor.decision_wait == 5.0  # empty file: defaults


def test_cli_reports_a_bad_config_and_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, "processor:\n  detectors:\n    FM-1.3:\n      min_occurrences: 1\n")
    done = subprocess.run([str(MASTWATCH), "serve", "--config", path], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    assert "processor.detectors.FM-1.3.min_occurrences" in done.stderr and done.stdout == ""
