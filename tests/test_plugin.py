"""A detector added from outside the package, as a user adds one: one module (tests/plugin/mastwatch_withholding.py,
its rule, settings and description) declared under the `mastwatch.detectors` entry point group of an installed
distribution. Its settings are validated with the config, it is reported not assessed when disabled, and
`mastwatch eval` scores it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mastwatch.collector.assemble import END_OF_INPUT
from mastwatch.collector.classify.detectors import builtin_detectors, load_detectors
from mastwatch.collector.classify.engine import ClassifierEngine
from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.processor import Processor
from mastwatch.collector.receiver.decode import records
from mastwatch.config import ConfigError, load
from tests.otlp_corpus import to_otlp_json_line
from tests.scenarios import Run
from tests.test_modes import Sink

ROOT = Path(__file__).parent.parent
PLUGIN = Path(__file__).parent / "plugin"  # the plugin's module, outside the mastwatch package
MASTWATCH = [sys.executable, "-m", "mastwatch.cli"]


def install(site: Path, name: str, entry: str) -> None:
    """What installing a distribution that declares the entry point leaves on the path: its metadata."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[mastwatch.detectors]\n{name} = {entry}\n")


@pytest.fixture
def plugin_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The plugin installed, in this process and for the commands run (their environment)."""
    site = tmp_path / "site"
    install(site, "mastwatch_withholding", "mastwatch_withholding")
    monkeypatch.syspath_prepend(str(PLUGIN))
    monkeypatch.syspath_prepend(str(site))
    paths = [str(site), str(PLUGIN), os.environ.get("PYTHONPATH", "")]  # no empty entry: it would mean the cwd
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def warned(name: str, passed_on: bool) -> Run:
    """A run whose tool warned the agent; its answer passes the warning on or not."""
    run = Run(name).call("get_account", {"account_id": "A-7"}, "Warning: the card on file expires tomorrow")
    return run.answer("Your account is in good standing." + (" Warning: your card expires tomorrow." if passed_on
                                                            else ""))


def classify(run: Run, config: ProcessorConfig) -> Verdict:
    sink = Sink()
    processor = Processor(config, [sink])
    processor.process(records(run.request()).spans, now=0.0)
    processor.drain(END_OF_INPUT)
    (verdict,) = sink.verdicts
    return verdict


def test_the_plugin_joins_the_builtin_detectors(plugin_env: dict[str, str]) -> None:
    detectors = load_detectors()
    assert detectors["FM-2.4"].__module__ == "mastwatch_withholding"
    assert "FM-2.4" not in builtin_detectors() and set(builtin_detectors()) < set(detectors)
    verdict = classify(warned("warned", passed_on=False), ProcessorConfig())
    assert set(verdict.findings) == {"FM-2.4"} and "FM-2.4" not in verdict.not_assessed
    assert not classify(warned("passed on", passed_on=True), ProcessorConfig()).findings


def test_its_settings_are_validated_with_the_config(plugin_env: dict[str, str]) -> None:
    config = load(overrides={"processor": {"detectors": {"FM-2.4": {"words": ["beware"]}}}}, environ={})
    assert "FM-2.4" not in classify(warned("warned", passed_on=False), config.processor).findings  # not a warning
    for bad, key in (({"words": []}, "FM-2.4.words"), ({"no_such_setting": 1}, "FM-2.4.no_such_setting")):
        with pytest.raises(ConfigError, match=f"processor.detectors.{key}"):
            load(overrides={"processor": {"detectors": {"FM-2.4": bad}}}, environ={})
    refused = subprocess.run([*MASTWATCH, "schema", "--set", "processor.detectors.FM-2.4.words=[]"],
                             capture_output=True, text=True, timeout=120, env=plugin_env)
    assert refused.returncode == 2 and "processor.detectors.FM-2.4.words" in refused.stderr, refused.stderr
    unknown = subprocess.run([*MASTWATCH, "schema", "--set", "processor.detectors.FM-2.4.words=[]"],
                             capture_output=True, text=True, timeout=120)  # not installed: no detector for FM-2.4
    assert unknown.returncode == 2 and "no detector for this failure mode" in unknown.stderr


def test_it_is_not_assessed_when_disabled(plugin_env: dict[str, str]) -> None:
    assert "FM-2.4" not in ClassifierEngine().not_assessed
    assert "FM-2.4" in ClassifierEngine({"FM-2.4": {"enabled": False}}).not_assessed
    off = ProcessorConfig(detectors={"FM-2.4": {"enabled": False}})
    verdict = classify(warned("warned", passed_on=False), off)
    assert not verdict.findings and "FM-2.4" in verdict.not_assessed


def test_eval_scores_it(plugin_env: dict[str, str], tmp_path: Path) -> None:
    blind = tmp_path / "blind"
    blind.mkdir()
    runs = {"withholds-a-warning": (warned("withholds-a-warning", passed_on=False), ["FM-2.4"]),
            "passes-a-warning-on": (warned("passes-a-warning-on", passed_on=True), [])}
    (blind / "runs.otlp.jsonl").write_text("".join(to_otlp_json_line(r.request()) + "\n" for r, _ in runs.values()))
    (blind / "labels.json").write_text(json.dumps({r.trace_id.hex(): {"name": name, "modes": modes}
                                                   for name, (r, modes) in runs.items()}))
    done = subprocess.run([*MASTWATCH, "eval", "--corpus", "blind", "--blind", str(blind), "--json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=plugin_env)
    assert done.returncode == 0, done.stderr
    parts = [part for key, part in json.loads(done.stdout).items() if key in ("blind_dev", "blind_test")]
    assert all("FM-2.4" not in part["not_assessed"] for part in parts)
    assert sum(p["modes"]["FM-2.4"]["tp"] for p in parts) == 1 and sum(p["modes"]["FM-2.4"]["fp"] for p in parts) == 0
    table = subprocess.run([*MASTWATCH, "eval", "--corpus", "scenarios"], capture_output=True, text=True,
                           timeout=300, cwd=ROOT, env=plugin_env)
    assert table.returncode == 0, table.stderr
    (line,) = [line for line in table.stdout.splitlines() if line.startswith("FM-2.4")]
    assert "not assessed" not in line


def test_mastwatch_docs_describes_it(plugin_env: dict[str, str]) -> None:
    done = subprocess.run([*MASTWATCH, "docs"], capture_output=True, text=True, timeout=120, env=plugin_env)
    assert done.returncode == 0, done.stderr
    assert "| FM-2.4 Information withholding | a tool result that warns" in done.stdout  # the README's table
    assert "| FM-2.3 | not assessed from spans" in done.stdout
    assert "### FM-2.4 Information withholding\n\nThe run kept from the user a warning" in done.stdout
    assert '`processor.detectors."FM-2.4"`:' in done.stdout and "| `words` | `warning`, `caution`, `deprecated` |" \
        in done.stdout


@pytest.mark.parametrize(("code", "error"), [("FM-1.3", "two detectors for FM-1.3"),
                                             ("FM-9.9", "'FM-9.9' is not a MAST failure mode")])
def test_a_plugin_that_cannot_be_used_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str,
                                                        error: str) -> None:
    site, module = tmp_path / "site", "plugin_" + code.replace("-", "_").replace(".", "_").lower()
    install(site, module, f"{module}:Clash")
    (site / f"{module}.py").write_text("from mastwatch.collector.classify.detector import Detector\n\n\n"
                                       f"class Clash(Detector):\n    code = {code!r}\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ConfigError, match=re.escape(error)):
        load(environ={})
