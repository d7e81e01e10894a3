"""`mastwatch eval`: the classifier scored against labelled runs.

Runs go through the same Processor as `serve` and `replay`. Two corpora:
- real: the recorded runs of a checkout's `tests/data`, converted to OTLP by `tests/otlp_corpus.py`, with the
  adjudicated labels in `tests/data/labels/final.json`; split by a stable hash of the run id into a dev part
  (two thirds, for development) and a test part (one third, for reporting), stratified by label set;
- scenarios: generated runs with positive and negative variants per mode (`tests/scenarios` of the checkout: a
  module per detector);
- blind: runs written from the MAST definitions and the span conventions alone, without the detectors or the
  scenarios at hand (`tests/data/blind`: OTLP/JSON lines and `labels.json` keyed by trace id); split by a stable
  hash of the run name into a dev part (about three fifths) and a test part (the rest, for reporting only).
`--content off` strips message content, tool arguments and results from every span, as instrumentations do
by default.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mastwatch.collector.assemble import END_OF_INPUT
from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.verdict import Verdict
from mastwatch.collector.processor import Increment, Processor
from mastwatch.collector.receiver.decode import SpanRecord
from mastwatch.collector.telemetry import NullTelemetry

DEFAULT_LABELS = Path("tests/data/labels")
OUTCOME_LABELS = "tau2-bench-labels"  # beside DEFAULT_LABELS: the adjudicated labels of the runs with outcomes
NONE = "none"

# Span attributes holding content (messages, tool arguments and results) in the conventions the collector reads.
CONTENT_KEYS = frozenset({
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result", "gen_ai.prompt", "gen_ai.completion", "gen_ai.output", "gen_ai.tool.args",
    "tool_arguments", "tool_response", "gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.tool_response",
    "gcp.vertex.agent.llm_request", "gcp.vertex.agent.llm_response", "input.value", "output.value",
    "tool.parameters", "tool_call.function.arguments", "ai.response.text", "ai.response.toolCalls",
    "ai.toolCall.args", "ai.toolCall.result", "ai.prompt", "ai.prompt.messages", "langfuse.observation.input",
    "langfuse.observation.output", "pydantic_ai.all_messages", "final_result", "gen_ai.choice",
    "traceloop.entity.input", "traceloop.entity.output",
})
CONTENT_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.",
                    "ai.prompt.", "ai.response.")


class EvalError(ValueError):
    pass


@dataclass
class LabelledRun:
    run_id: str
    spans: list[SpanRecord]
    modes: frozenset[str]
    split: str  # dev | test (real and blind runs) or scenario


@dataclass
class ModeScore:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def support(self) -> int:
        return self.tp + self.fn

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / self.support if self.support else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        return None if p is None or r is None else (2 * p * r / (p + r) if p + r else 0.0)

    @property
    def kappa(self) -> float | None:
        return kappa_from_counts(self.tp, self.fp, self.fn, self.tn)

    @property
    def mcc(self) -> float:
        """Matthews correlation; 0 when a row or column of the 2x2 table is empty (a constant answer)."""
        tp, fp, fn, tn = self.tp, self.fp, self.fn, self.tn
        denominator = ((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)) ** 0.5
        return (tp * tn - fp * fn) / denominator if denominator else 0.0

    def add(self, predicted: bool, actual: bool) -> None:
        if predicted and actual:
            self.tp += 1
        elif predicted:
            self.fp += 1
        elif actual:
            self.fn += 1
        else:
            self.tn += 1


@dataclass
class Report:
    runs: int
    not_assessed: list[str]
    modes: dict[str, ModeScore]
    confusion: dict[tuple[str, str], int] = field(default_factory=dict)  # (predicted, labelled) -> runs
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (run, kind fp|fn, mode)

    def to_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)
        return {
            "runs": self.runs,
            "not_assessed": self.not_assessed,
            "modes": {code: {"precision": r(s.precision), "recall": r(s.recall), "f1": r(s.f1), "support": s.support,
                             "predicted": s.tp + s.fp, "tp": s.tp, "fp": s.fp, "fn": s.fn, "kappa": r(s.kappa)}
                      for code, s in self.modes.items()},
            "confusion": [{"predicted": p, "labelled": lab, "runs": n}
                          for (p, lab), n in sorted(self.confusion.items())],
            "errors": [{"run": run, "kind": kind, "mode": mode} for run, kind, mode in self.errors],
        }


def kappa_from_counts(both: int, only_a: int, only_b: int, neither: int) -> float | None:
    """Cohen's kappa of two binary raters from their 2x2 table; None when chance agreement is total."""
    n = both + only_a + only_b + neither
    if not n:
        return None
    observed = (both + neither) / n
    yes_a, yes_b = (both + only_a) / n, (both + only_b) / n
    expected = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    pairs = list(zip(a, b, strict=True))
    return kappa_from_counts(sum(x and y for x, y in pairs), sum(x and not y for x, y in pairs),
                             sum(y and not x for x, y in pairs), sum(not x and not y for x, y in pairs))


# --- labels and split ---------------------------------------------------------------------------------


def _read_json(path: Path, what: str, hint: str) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise EvalError(f"cannot read {what} {path}: {e.strerror} ({hint})") from None
    except ValueError as e:
        raise EvalError(f"{what} {path} are not valid JSON: {e}") from None


def load_labels(path: Path) -> dict[str, frozenset[str]]:
    """run -> labelled modes, from a label file `{run: {"modes": {code: {...}}, ...}}`."""
    data = _read_json(path, "labels", "run from a mastwatch checkout, or point --labels at its tests/data/labels")
    out = {}
    for run, entry in data.items():
        modes = frozenset((entry or {}).get("modes") or {})
        unknown = modes - set(MODES)
        if unknown:
            raise EvalError(f"labels {path}: run {run} has unknown modes {sorted(unknown)}")
        out[run] = modes
    return out


def label_key(run_id: str) -> str:
    """The key a run has in the label files (its id with '/' and ' ' replaced)."""
    return run_id.replace("/", "_").replace(" ", "_")


def split(labels: dict[str, frozenset[str]]) -> dict[str, str]:
    """run -> dev | test: in each group of runs with the same labels, ordered by a hash of the run id, every
    third run from the second on is test (so a mode labelled on two runs or more has one in each part)."""
    strata: dict[frozenset[str], list[str]] = {}
    for run, modes in labels.items():
        strata.setdefault(modes, []).append(run)
    out = {}
    for runs in strata.values():
        runs.sort(key=lambda r: hashlib.sha256(r.encode()).hexdigest())
        for i, run in enumerate(runs):
            out[run] = "test" if i % 3 == 1 else "dev"
    return out


BLIND_DEV_BELOW = 154  # first byte of SHA-256(run name) below this: dev (154 of 256 values)


def blind_split(name: str) -> str:
    """dev | test of a blind run, from a stable hash of its name (not of its labels, which stay unseen)."""
    return "dev" if hashlib.sha256(name.encode()).digest()[0] < BLIND_DEV_BELOW else "test"


def annotator_agreement(labels_dir: Path) -> dict[str, Any]:
    """Cohen's kappa of the two independent annotations over all (run, mode) decisions, and per mode."""
    a = load_labels(labels_dir / "annotator_a.json")
    b = load_labels(labels_dir / "annotator_b.json")
    if set(a) != set(b):
        raise EvalError("the two annotations label different runs")
    runs = sorted(a)
    overall = cohen_kappa([m in a[r] for r in runs for m in MODES], [m in b[r] for r in runs for m in MODES])
    per_mode = {m: {"a": sum(m in a[r] for r in runs), "b": sum(m in b[r] for r in runs),
                    "both": sum(m in a[r] and m in b[r] for r in runs)} for m in MODES}
    return {"runs": len(runs), "decisions": len(runs) * len(MODES), "kappa": overall,
            "agreed_positive": sum(len(a[r] & b[r]) for r in runs),
            "disagreed": sum(len(a[r] ^ b[r]) for r in runs), "per_mode": per_mode}


# --- runs -----------------------------------------------------------------------------------------------


def without_content(spans: Iterable[SpanRecord]) -> list[SpanRecord]:
    return [s._replace(attributes={k: v for k, v in s.attributes.items()
                                   if k not in CONTENT_KEYS and not k.startswith(CONTENT_PREFIXES)}, key_marks=-1)
            for s in spans]


def _corpus_module(labels_dir: Path) -> Any:
    """tests/otlp_corpus.py of the checkout the labels belong to (tests/data/labels -> tests/otlp_corpus.py)."""
    path = labels_dir.resolve().parent.parent / "otlp_corpus.py"
    if not path.is_file():
        raise EvalError(f"{path} not found: --labels must be the tests/data/labels folder of a mastwatch checkout")
    spec = importlib.util.spec_from_file_location("mastwatch_otlp_corpus", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _scenarios_package(labels_dir: Path) -> Any:
    """tests/scenarios of the checkout the labels belong to (tests/data/labels -> tests/scenarios), a package whose
    modules import it by name."""
    init = labels_dir.resolve().parent.parent / "scenarios" / "__init__.py"
    if not init.is_file():
        raise EvalError(f"{init.parent} not found: --labels must be the tests/data/labels folder of a mastwatch "
                        "checkout")
    name = "mastwatch_checkout_scenarios"
    loaded = sys.modules.get(name)
    if loaded is not None and loaded.__file__ == str(init):
        return loaded
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def real_runs(labels_dir: Path, content: bool = True) -> list[LabelledRun]:
    from mastwatch.collector.receiver.decode import records

    labels = load_labels(labels_dir / "final.json")
    parts = split(labels)
    corpus = _corpus_module(labels_dir).corpus(labels_dir.parent)
    runs = []
    for _, run_id, request in corpus:
        key = label_key(run_id)
        if key not in labels:
            continue
        spans = records(request).spans
        runs.append(LabelledRun(key, spans if content else without_content(spans), labels[key], parts[key]))
    missing = set(labels) - {r.run_id for r in runs}
    if missing:
        raise EvalError(f"labelled runs not in the corpus: {sorted(missing)[:5]}")
    return runs


def scenario_runs(labels_dir: Path = DEFAULT_LABELS, content: bool = True) -> list[LabelledRun]:
    """The generated scenarios of the checkout the labels belong to."""
    from mastwatch.collector.receiver.decode import records

    runs = []
    for scenario in _scenarios_package(labels_dir).scenarios():
        spans = records(scenario.request).spans
        runs.append(LabelledRun(scenario.name, spans if content else without_content(spans), scenario.modes,
                                "scenario"))
    return runs


def blind_runs(blind_dir: Path, content: bool = True) -> list[LabelledRun]:
    """The blind corpus: every trace of the OTLP/JSON lines files in `blind_dir`, labelled in its labels.json
    `{trace id hex: {"name", "modes": [code], "why"}}`; runs are named by their label's name."""
    from mastwatch.replay import ReplayError, read_requests

    path = blind_dir / "labels.json"
    labels = _read_json(path, "blind labels", "point --blind at tests/data/blind of a mastwatch checkout")
    spans: dict[str, list[SpanRecord]] = {}
    try:
        for file in sorted(blind_dir.glob("*.jsonl")):
            for request in read_requests(str(file)):
                for span in request:
                    spans.setdefault(span.trace_id.hex(), []).append(span)
    except ReplayError as e:
        raise EvalError(str(e)) from None
    if set(spans) != set(labels):
        raise EvalError(f"blind corpus {blind_dir}: traces without labels {sorted(set(spans) - set(labels))[:3]}, "
                        f"labels without traces {sorted(set(labels) - set(spans))[:3]}")
    runs = []
    for trace_id, entry in labels.items():
        modes = frozenset(entry.get("modes") or ())
        if unknown := modes - set(MODES):
            raise EvalError(f"blind labels {path}: trace {trace_id} has unknown modes {sorted(unknown)}")
        trace, name = spans[trace_id], entry.get("name") or trace_id
        runs.append(LabelledRun(name, trace if content else without_content(trace), modes, blind_split(name)))
    return runs


# --- classification and scoring -----------------------------------------------------------------------------


class _Collector(NullTelemetry):
    """Keeps the verdicts, and counts detector failures: a failed detector would score as a missed mode."""

    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []
        self.failures: dict[str, int] = {}

    def detector_failed(self, code: str) -> None:
        self.failures[code] = self.failures.get(code, 0) + 1

    def export_increments(self, increments: list[Increment]) -> None:
        pass

    def export_verdicts(self, verdicts: list[Verdict], increments: list[Increment]) -> None:
        self.verdicts.extend(verdicts)

    def shutdown(self) -> None:
        pass


def classify(runs: Sequence[LabelledRun | OutcomeRun],
             config: ProcessorConfig | None = None) -> tuple[dict[str, set[str]], list[str]]:
    """run -> modes found (over all its traces), and the modes the classifier does not assess."""
    collector = _Collector()
    processor = Processor(config or ProcessorConfig(), [collector], collector)
    owner: dict[bytes, str] = {}
    for run in runs:
        for span in run.spans:
            owner.setdefault(span.trace_id, run.run_id)
        processor.process(run.spans, now=0.0)
    processor.drain(END_OF_INPUT)
    if collector.failures:
        raise EvalError(f"detectors failed (code: traces) {collector.failures}: the scores would be wrong "
                        "(see the log)")
    found: dict[str, set[str]] = {run.run_id: set() for run in runs}
    for verdict in collector.verdicts:
        found[owner[bytes.fromhex(verdict.trace_id)]].update(verdict.findings)
    return found, list(processor.engine.not_assessed)


def score(runs: Sequence[LabelledRun], found: dict[str, set[str]], not_assessed: list[str]) -> Report:
    modes = {code: ModeScore() for code in MODES}
    report = Report(len(runs), not_assessed, modes)
    for run in runs:
        predicted, labelled = found[run.run_id], run.modes
        for code, s in modes.items():
            p, g = code in predicted, code in labelled
            if p and g:
                s.tp += 1
            elif p:
                s.fp += 1
                report.errors.append((run.run_id, "fp", code))
            elif g:
                s.fn += 1
                report.errors.append((run.run_id, "fn", code))
            else:
                s.tn += 1
        for p in sorted(predicted) or [NONE]:
            for g in sorted(labelled) or [NONE]:
                report.confusion[(p, g)] = report.confusion.get((p, g), 0) + 1
    return report


def evaluate(runs: Sequence[LabelledRun], config: ProcessorConfig | None = None) -> Report:
    found, not_assessed = classify(runs, config)
    return score(runs, found, not_assessed)


def _fmt(x: float | None) -> str:
    return "   -" if x is None else f"{x:4.2f}"


def format_report(title: str, report: Report) -> str:
    lines = [f"{title}: {report.runs} runs",
             f"{'mode':7} {'name':34} {'prec':>5} {'rec':>5} {'F1':>5} {'kappa':>5} {'supp':>4} {'pred':>4}"]
    for code, s in report.modes.items():
        name = MODES[code].name
        if code in report.not_assessed:
            lines.append(f"{code:7} {name:34} not assessed (support {s.support})")
            continue
        lines.append(f"{code:7} {name:34} {_fmt(s.precision):>5} {_fmt(s.recall):>5} {_fmt(s.f1):>5} "
                     f"{_fmt(s.kappa):>5} {s.support:4d} {s.tp + s.fp:4d}")
    pairs = [f"{p}→{g}:{n}" for (p, g), n in sorted(report.confusion.items()) if (p, g) != (NONE, NONE)]
    lines.append("confusion (predicted→labelled: runs): " + (", ".join(pairs) or "-"))
    return "\n".join(lines)


# --- outcomes: failed-run prediction, no labels needed ------------------------------------------------------

FC3 = frozenset({"FM-3.1", "FM-3.2", "FM-3.3"})
TASK_DEV_BELOW = 128  # first byte of SHA-256("domain/task id") below this: dev (about half the tasks)


def task_split(domain: str, task_id: str) -> str:
    """dev | test of a run, by its task: a task recurs across runs and agents, and is never in both parts."""
    return "dev" if hashlib.sha256(f"{domain}/{task_id}".encode()).digest()[0] < TASK_DEV_BELOW else "test"


@dataclass
class OutcomeRun:
    run_id: str
    spans: list[SpanRecord]
    failed: bool  # the recorded outcome: reward below 1
    domain: str
    agent: str
    task_id: str
    split: str  # dev | test, by task
    tool_calls: int


def outcome_runs(labels_dir: Path, content: bool = True) -> list[OutcomeRun]:
    """The runs of a checkout's tests/data that carry an outcome (tau2-bench and tau2 results)."""
    from mastwatch.collector.receiver.decode import records

    runs = []
    for _, run_id, request, outcome in _corpus_module(labels_dir).outcome_corpus(labels_dir.parent):
        spans = records(request).spans
        calls = sum(s.attributes.get("gen_ai.operation.name") == "execute_tool" for s in spans)
        runs.append(OutcomeRun(run_id, spans if content else without_content(spans), outcome["reward"] < 1,
                               outcome["domain"], outcome["agent"], outcome["task_id"],
                               task_split(outcome["domain"], outcome["task_id"]), calls))
    return runs


PREDICTORS = ("FC3", "any mode", "tool calls > median")


def _outcome_scores(runs: Sequence[OutcomeRun], found: dict[str, set[str]]) -> dict[str, ModeScore]:
    """Failed-run prediction by a run's FC3 findings, by any finding, and by the baseline of making more tool
    calls than the group's median run."""
    calls = sorted(r.tool_calls for r in runs)
    median = calls[len(calls) // 2] if calls else 0
    scores = {name: ModeScore() for name in PREDICTORS}
    for run in runs:
        modes = found[run.run_id]
        scores["FC3"].add(bool(modes & FC3), run.failed)
        scores["any mode"].add(bool(modes), run.failed)
        scores["tool calls > median"].add(run.tool_calls > median, run.failed)
    return scores


def outcome_report(runs: Sequence[OutcomeRun], found: dict[str, set[str]],
                   parts: Sequence[str] = ("dev", "test", "all")) -> dict[str, Any]:
    """Per part (dev, test, all; only those of `parts`) and group (all runs, each domain, each agent): runs, failed
    runs, and precision, recall, F1 and MCC of each predictor; and how often each mode is found in failed and passed
    runs."""
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 3)

    out: dict[str, Any] = {}
    for part in parts:
        chosen = [run for run in runs if part in ("all", run.split)]
        groups = {"all": chosen}
        for key in ("domain", "agent"):
            for value in sorted({getattr(run, key) for run in chosen}):
                groups[f"{key}={value}"] = [run for run in chosen if getattr(run, key) == value]
        table = {}
        for name, members in groups.items():
            scores = _outcome_scores(members, found)
            table[name] = {"runs": len(members), "failed": sum(m.failed for m in members)} | {
                predictor: {"precision": r(s.precision), "recall": r(s.recall), "f1": r(s.f1), "mcc": r(s.mcc),
                            "tp": s.tp, "fp": s.fp, "fn": s.fn, "tn": s.tn}
                for predictor, s in scores.items()}
        failed = [run for run in chosen if run.failed]
        passed = [run for run in chosen if not run.failed]
        table["modes"] = {code: {"in_failed": sum(code in found[x.run_id] for x in failed),
                                 "in_passed": sum(code in found[x.run_id] for x in passed)} for code in MODES}
        out[part] = table
    return out


def format_outcomes(title: str, report: dict[str, Any]) -> str:
    head = (f"{'part':4} {'group':44} {'runs':>4} {'fail':>4} |"
            + "|".join(f" {p:^23} " for p in PREDICTORS))
    sub = f"{'':4} {'':44} {'':4} {'':4} |" + "|".join(f" {'prec  rec   F1  MCC':^23} " for _ in PREDICTORS)
    lines = [title, head, sub]
    for part, table in report.items():
        for group, row in table.items():
            if group == "modes":
                continue
            cells = "|".join(f" {_fmt(row[p]['precision'])} {_fmt(row[p]['recall'])} {_fmt(row[p]['f1'])} "
                             f"{row[p]['mcc']:5.2f} " for p in PREDICTORS)
            group = group if len(group) <= 44 else group[:21] + "…" + group[-22:]
            lines.append(f"{part:4} {group:44} {row['runs']:4d} {row['failed']:4d} |{cells}")
        failed, passed = table["all"]["failed"], table["all"]["runs"] - table["all"]["failed"]
        found = [f"{code} {m['in_failed']}/{failed} vs {m['in_passed']}/{passed}"
                 for code, m in table["modes"].items() if m["in_failed"] or m["in_passed"]]
        lines.append(f"{part:4} modes found in failed vs passed runs: " + (", ".join(found) or "none"))
    return "\n".join(lines)


def outcome_labelled_runs(runs: Sequence[OutcomeRun], labels_dir: Path) -> list[LabelledRun]:
    """The outcome runs labelled in `tau2-bench-labels/final.json` beside `labels_dir`, split by task."""
    path = labels_dir.parent / OUTCOME_LABELS / "final.json"
    if not path.exists():
        return []
    labels = load_labels(path)
    by_id = {run.run_id: run for run in runs}
    if missing := set(labels) - set(by_id):
        raise EvalError(f"labels {path}: runs not in the corpus {sorted(missing)[:3]}")
    return [LabelledRun(run_id, by_id[run_id].spans, modes, by_id[run_id].split) for run_id, modes in labels.items()]
