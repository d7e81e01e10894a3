"""mastwatch serve | replay | eval | demo | schema | top | show | dashboards | rules | report | docs."""

from __future__ import annotations

import argparse
import csv
import json
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mastwatch import __version__
from mastwatch.collector.durations import parse_duration
from mastwatch.config import Config, ConfigError, load, set_overrides

log = logging.getLogger("mastwatch")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", help="YAML configuration file (default: $MASTWATCH_CONFIG)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting, e.g. --set processor.decision_wait=10s (repeatable)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def _server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--grpc-endpoint", help="OTLP gRPC host:port (receiver.grpc.endpoint)")
    parser.add_argument("--http-endpoint", help="OTLP HTTP host:port (receiver.http.endpoint)")
    parser.add_argument("--metrics-endpoint", help="Prometheus host:port (exporters.prometheus.endpoint)")
    parser.add_argument("--store-path", help="chDB data directory (exporters.store.path)")
    parser.add_argument("--no-store", action="store_true", help="do not write rows (exporters.store.enabled=false)")


def _flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    doc = set_overrides(args.set)
    pairs = [("grpc_endpoint", ("receiver", "grpc", "endpoint")), ("http_endpoint", ("receiver", "http", "endpoint")),
             ("metrics_endpoint", ("exporters", "prometheus", "endpoint")),
             ("store_path", ("exporters", "store", "path")), ("trace_url", ("dashboards", "trace_url")),
             ("budget_usd", ("rules", "wasted_spend", "budget_usd"))]
    for attr, path in pairs:
        value = getattr(args, attr, None)
        if value is not None:
            node = doc
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = value
    if getattr(args, "no_store", False):
        doc.setdefault("exporters", {}).setdefault("store", {})["enabled"] = False
    return doc


def _serve(config: Config, until: threading.Event) -> int:
    from mastwatch.service import Service

    service = Service(config)
    service.start()
    try:
        until.wait()
    finally:
        service.stop()
    return 0


def _stop_on_signals(event: threading.Event) -> None:
    def handler(signum: int, frame: Any) -> None:
        log.info("received %s: classifying buffered traces and flushing", signal.Signals(signum).name)
        event.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def cmd_serve(args: argparse.Namespace, config: Config) -> int:
    stop = threading.Event()
    _stop_on_signals(stop)
    return _serve(config, stop)


def cmd_demo(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.demo import run_fleet
    from mastwatch.service import Service

    stop = threading.Event()
    _stop_on_signals(stop)
    service = Service(config)
    service.start()
    grpc_endpoint = f"{config.receiver.grpc.endpoint.rpartition(':')[0]}:{service.grpc.port}"
    http_endpoint = f"{config.receiver.http.endpoint.rpartition(':')[0]}:{service.http.port}"
    host, port = service.metrics_address
    print(f"mastwatch demo: simulated agents are sending OTLP to {grpc_endpoint} (gRPC) and {http_endpoint} "
          f"(HTTP).\n  metrics: http://{host}:{port}/metrics   store: {config.exporters.store.path}\n"
          "  beside it: mastwatch top traces | mastwatch show TRACE_ID | mastwatch top spend | mastwatch top "
          "versions\n"
          "  Ctrl-C stops.", flush=True)
    if args.duration:
        threading.Timer(args.duration, stop.set).start()
    fleet = threading.Thread(target=run_fleet, args=(grpc_endpoint, http_endpoint, stop),
                             kwargs={"pace": args.pace}, daemon=True)
    fleet.start()
    started = time.monotonic()
    try:
        while not stop.wait(15):
            if service.store is not None:
                rows = service.store.query(
                    f"SELECT count() AS traces, countIf(notEmpty(failure_modes)) AS failing, "
                    f"round(sum(wasted_cost_usd), 4) AS wasted_usd, round(sum(wasted_seconds), 1) AS wasted_seconds "
                    f"FROM {service.store.table('mast_traces')}")
                print(f"  [{time.monotonic() - started:5.0f}s] stored: {rows[0]}", flush=True)
    finally:
        stop.set()
        fleet.join(30)
        service.stop()
    return 0


def cmd_replay(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.replay import main_replay

    store = None
    if args.store:
        from mastwatch.exporter.store import StoreExporter

        store = StoreExporter(config.exporters.store.model_copy(update={"path": args.store}))
    return main_replay(args.files, store, config.processor)


def cmd_eval(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.evaluate import (
        OUTCOME_LABELS,
        EvalError,
        annotator_agreement,
        blind_runs,
        classify,
        evaluate,
        format_outcomes,
        format_report,
        outcome_labelled_runs,
        outcome_report,
        outcome_runs,
        real_runs,
        scenario_runs,
        score,
    )

    labels = Path(args.labels)
    content = args.content == "on"
    out: dict[str, Any] = {"content": args.content}
    tables = []
    try:
        parts = ("dev", "test") if args.split == "all" else (args.split,)
        if args.corpus in ("outcomes", "all"):
            runs = outcome_runs(labels, content)
            found, not_assessed = classify(runs, config.processor)
            report = outcome_report(runs, found, ("dev", "test", "all") if args.split == "all" else parts)
            out["outcomes"] = report
            tables.append(format_outcomes("runs with a recorded outcome: failed-run prediction (a run predicted "
                                          "failed when the classifier finds the mode; failed = reward < 1), "
                                          f"content {args.content}", report))
            labelled = outcome_labelled_runs(runs, labels)
            for part in parts if labelled else ():
                chosen = [r for r in labelled if r.split == part]
                report = score(chosen, found, not_assessed)
                out[f"outcomes_labelled_{part}"] = report.to_dict()
                tables.append(format_report(f"tau2-bench runs against adjudicated labels, {part} split, content "
                                            f"{args.content}", report))
            agreement_dir = labels.parent / OUTCOME_LABELS
            if (agreement_dir / "annotator_a.json").exists():
                agreement = annotator_agreement(agreement_dir)
                out["outcomes_annotator_kappa"] = agreement["kappa"]
                tables.append(f"tau2-bench runs: annotators' Cohen's kappa over {agreement['decisions']} (run, mode) "
                              f"decisions: {agreement['kappa']:.3f}")
        if args.corpus in ("real", "all"):
            runs = real_runs(labels, content)
            for part in parts:
                report = evaluate([r for r in runs if r.split == part], config.processor)
                out[f"real_{part}"] = report.to_dict()
                tables.append(format_report(f"real runs, {part} split, content {args.content}", report))
            agreement = annotator_agreement(labels)
            out["annotator_kappa"] = agreement["kappa"]
            tables.append(f"annotators' Cohen's kappa over {agreement['decisions']} (run, mode) decisions: "
                          f"{agreement['kappa']:.3f}")
        if args.corpus in ("scenarios", "all"):
            report = evaluate(scenario_runs(labels, content), config.processor)
            out["scenarios"] = report.to_dict()
            tables.append(format_report(f"scenarios, content {args.content}", report))
        if args.corpus in ("blind", "all"):
            blind = Path(args.blind) if args.blind else labels.parent / "blind"
            runs = blind_runs(blind, content)
            for part in parts:
                report = evaluate([r for r in runs if r.split == part], config.processor)
                out[f"blind_{part}"] = report.to_dict()
                tables.append(format_report(f"blind runs, {part} split, content {args.content}", report))
            if (blind / "annotator_a.json").exists() and (blind / "annotator_b.json").exists():
                agreement = annotator_agreement(blind)
                out["blind_annotator_kappa"] = agreement["kappa"]
                tables.append(f"blind runs: annotators' Cohen's kappa over {agreement['decisions']} (run, mode) "
                              f"decisions: {agreement['kappa']:.3f}")
    except EvalError as e:
        print(f"mastwatch eval: {e}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1) if args.json else "\n\n".join(tables))
    return 0


def _local_links(config: Config, links: dict[str, str]) -> None:
    """Say so when the links written point at this machine while the server listens on every interface (a
    deployment): whoever follows them from an alert or a dashboard reaches their own machine."""
    host = config.exporters.prometheus.endpoint.rpartition(":")[0].strip("[]")
    if host not in ("0.0.0.0", "::", ""):
        return
    for setting, url in links.items():
        if urlsplit(url).hostname in ("localhost", "127.0.0.1", "::1"):
            print(f"mastwatch: note: {setting} is {url}: on-call opening it elsewhere reaches their own machine; set "
                  "it to the address their browser reaches mastwatch's metrics port at", file=sys.stderr)


def cmd_dashboards(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.dashboards.generate import write

    for path in write(config, Path(args.out)):
        print(path)
    if config.dashboards.trace_view_url:
        _local_links(config, {"dashboards.trace_view_url": config.dashboards.trace_view_url})
    return 0


def cmd_rules(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.dashboards.rules import write

    print(write(config, Path(args.out), args.prometheus_rule))
    _local_links(config, {"rules.runbook_url": config.rules.runbook_url})
    return 0


def cmd_show(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.show import main_show

    return main_show(config, args.trace_id)


def cmd_review(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.review import main_review

    return main_review(config, args.trace_id, args.mode, args.verdict, args.note, args.by)


def cmd_mute(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.decide import main_mute

    return main_mute(config, args.signature, args.command == "mute", getattr(args, "for_", "") or "",
                     getattr(args, "runs", 0) or 0, args.note, args.by)


def cmd_resolve(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.decide import main_resolve

    return main_resolve(config, args.signature, args.command == "resolve", args.note, args.by)


def cmd_report(args: argparse.Namespace, config: Config) -> int:
    if args.trace is not None:
        return _report_trace(args, config)
    try:
        from mastwatch.dashboards.report import main_report
    except ImportError as e:
        print(f"mastwatch report needs matplotlib ({e}): pip install 'mastwatch[report]'", file=sys.stderr)
        return 2

    return main_report(config, Path(args.out), Path(args.png) if args.png else None, args.since, args.until)


def _report_trace(args: argparse.Namespace, config: Config) -> int:
    """`report --trace ID`: the run's page (dashboards/trace_page.py), no charts library needed."""
    from mastwatch.dashboards.trace_page import render
    from mastwatch.show import load

    if args.png:
        print("mastwatch report: --png draws the dashboards' charts; with --trace the page is the HTML alone",
              file=sys.stderr)
        return 2
    status, stored = load(config, args.trace, "report")
    if stored is None:
        return status
    out = Path(args.out)
    out.write_text(render(stored, config.dashboards.trace_url), encoding="utf-8")
    print(out)
    return 0


def cmd_docs(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.collector.classify.detectors import DetectorError, builtin_detectors, load_detectors
    from mastwatch.detector_docs import BLOCKS, DocError, generate, write

    try:
        if args.write:  # the checkout's documents describe the built-in detectors
            for path in write(Path(args.write), builtin_detectors()):
                print(path)
            return 0
        for name, text in generate(load_detectors()).items():
            print(f"<!-- {BLOCKS[name][0]}: {name} -->\n{text}\n")
    except (DocError, DetectorError, OSError) as e:
        print(f"mastwatch docs: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_schema(args: argparse.Namespace, config: Config) -> int:
    from mastwatch.exporter.store.schema import Layout, ddl

    layout = config.exporters.store.layout
    layout = Layout(args.database or layout.database, layout.cluster if args.cluster is None else args.cluster,
                    layout.ttl_days, layout.table_ttl_days)
    print(";\n\n".join(ddl(layout)) + ";")
    return 0


def cmd_top(args: argparse.Namespace, config: Config) -> int:
    from mastwatch import remote
    from mastwatch.exporter.store.queries import Filters, TableMissing, run, time_bound

    now = time.time_ns()
    try:
        filters = Filters(time_bound(args.since, now), time_bound(args.until, now), service=args.service or "",
                          agent=args.agent or "", model=args.model or "", mode=args.mode or "", limit=args.limit,
                          new_since_ns=time_bound(args.new_since, now) if args.new_since else 0,
                          state=args.state or "")
    except ValueError as e:
        print(f"mastwatch top: {e}", file=sys.stderr)
        return 2
    status, rows = remote.on_store(config, "top", lambda engine: run(engine, config.exporters.store.database,
                                                                     args.what, filters),
                                   lambda: remote.ask_top(config, args.what, filters), (TableMissing,))
    if status or rows is None:
        return status
    if args.format == "json":
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
    elif args.format == "csv":
        if rows:
            writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows({k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in row.items()}
                             for row in rows)
    else:
        print(format_table(rows) if rows else "(no rows)")
    return 0


def format_table(rows: list[dict[str, Any]]) -> str:
    """Aligned columns, numbers right-aligned."""
    def text(value: Any) -> str:
        if isinstance(value, list):
            return ",".join(map(str, value))
        if isinstance(value, float):
            return f"{value:.6f}".rstrip("0").rstrip(".") if value else "0"
        return str(value)

    names = list(rows[0])
    cells = [[text(row[name]) for name in names] for row in rows]
    numeric = [all(isinstance(row[name], int | float) for row in rows) for name in names]
    widths = [max(len(name), *(len(c[i]) for c in cells)) for i, name in enumerate(names)]

    def line(values: list[str]) -> str:
        aligned = (v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True))
        return "  ".join(aligned).rstrip()

    return "\n".join([line(names)] + [line(c) for c in cells])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mastwatch", description="MAST failure modes and repeated-step spend "
                                     "for LLM-agent OpenTelemetry traces")
    parser.add_argument("--version", action="version", version=f"mastwatch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="receive OTLP, classify, export to Prometheus and the store")
    _common(serve)
    _server_flags(serve)
    replay = sub.add_parser("replay", help="classify captured OTLP files; one JSON verdict per trace on stdout")
    _common(replay)
    replay.add_argument("files", nargs="+", help="OTLP/JSON lines or OTLP protobuf files")
    replay.add_argument("--store", metavar="DIR", help="also write the verdicts to a chDB store in DIR")
    evaluation = sub.add_parser("eval", help="score the classifier against labelled runs: per mode precision, "
                                "recall, F1, kappa, confusion")
    _common(evaluation)
    evaluation.add_argument("--corpus", choices=["outcomes", "real", "scenarios", "blind", "all"], default="all",
                            help="outcomes: runs with a recorded outcome (failed-run prediction, and per mode "
                            "against their labels); real, blind: labelled runs; scenarios: generated runs")
    evaluation.add_argument("--split", choices=["dev", "test", "all"], default="all",
                            help="part of the outcomes (by task), real and blind corpora (default: both, reported "
                            "apart, and the outcomes over all runs)")
    evaluation.add_argument("--content", choices=["on", "off"], default="on",
                            help="off: strip message content, tool arguments and results first")
    evaluation.add_argument("--labels", default="tests/data/labels",
                            help="labelled corpus of a checkout (default: tests/data/labels)")
    evaluation.add_argument("--blind", metavar="DIR", help="blind labelled corpus (default: blind/ next to --labels, "
                            "i.e. tests/data/blind)")
    evaluation.add_argument("--json", action="store_true", help="one JSON document (for CI)")
    demo = sub.add_parser("demo", help="serve, with a fleet of simulated agents sending OTLP")
    _common(demo)
    _server_flags(demo)
    demo.add_argument("--duration", type=_seconds(0), default=0, help="stop after this many seconds (default: "
                      "never)")
    demo.add_argument("--pace", type=_seconds(0.001), default=0.3, help="seconds per simulated agent step")
    schema = sub.add_parser("schema", help="print the store's DDL (the statements mastwatch applies at start)")
    _common(schema)
    schema.add_argument("--cluster", metavar="NAME", help="ReplicatedMergeTree and Distributed tables, ON CLUSTER "
                        "NAME (default: exporters.store.cluster)")
    schema.add_argument("--database", metavar="DB", type=_identifier, help="default: exporters.store.database")
    top = sub.add_parser("top", help="what the store holds: agents by their share of runs failing; spend and waste by "
                         "agent and model; waste by agent and "
                         "tool, by model, by tool; failure modes, failing traces, the judge's verdicts, failure "
                         "signatures (recurring problems), people's reviews of findings, the longest runs, the "
                         "signatures muted now, those marked fixed (and whether the fix held), each release of an "
                         "agent against the one before")
    _common(top)
    top.add_argument("what", choices=["agents", "spend", "waste", "models", "tools", "failures", "traces", "judge",
                                      "signatures", "reviews", "runs", "mutes", "resolutions", "versions"])
    top.add_argument("--since", default="24h", help="a duration back from now (24h, 7d) or a UTC time (default: 24h)")
    top.add_argument("--until", default="now", help="now, a duration back from now, or a UTC time (default: now)")
    top.add_argument("--service", help="only this service")
    top.add_argument("--agent", help="only this agent")
    top.add_argument("--model", help="only this model's calls (spend) or repeated steps (waste, models, tools), or "
                     "the runs that called it, with their whole cost (traces)")
    top.add_argument("--mode", metavar="FM-x.y", type=_mode, help="agents, traces, signatures, versions: only this "
                     "failure mode")
    top.add_argument("--new-since", metavar="WHEN", help="signatures: only those first seen since (24h, or a UTC "
                     "time)")
    top.add_argument("--state", choices=["open", "muted", "resolved", "regressed"], help="signatures: only those "
                     "open (neither muted nor marked fixed), muted, marked fixed and not seen since, or regressed")
    top.add_argument("--limit", type=_positive_int, default=20, help="rows (default: 20)")
    top.add_argument("--format", choices=["table", "csv", "json"], default="table", help="table: aligned columns "
                     "(default); csv: a header and a line per row (lists joined by commas); json: an object per line")
    top.add_argument("--store-path", help="chDB data directory (exporters.store.path)")
    show = sub.add_parser("show", help="one run from the store: its steps in order, those that are evidence of a "
                          "finding marked, and its findings")
    _common(show)
    show.add_argument("trace_id", metavar="TRACE_ID", help="32 hexadecimal digits")
    show.add_argument("--store-path", help="chDB data directory (exporters.store.path)")
    review = sub.add_parser("review", help="say whether a stored run's finding is right (confirmed, dismissed) or "
                            "that the run shows a mode nothing found (missed); `top reviews` adds them up")
    _common(review)
    review.add_argument("trace_id", metavar="TRACE_ID", help="32 hexadecimal digits")
    review.add_argument("mode", metavar="FM-x.y", type=_mode, help="the failure mode reviewed")
    review.add_argument("verdict", choices=["confirmed", "dismissed", "missed"])
    review.add_argument("--note", default="", help="why, in a line (shown beside the mode's figures)")
    review.add_argument("--by", help="the reviewer (default: the user running the command)")
    review.add_argument("--store-path", help="chDB data directory (exporters.store.path)")
    for name, what in (("mute", "keep a known problem (a failure signature, from `top signatures`, `show` or the "
                                "run page) out of the alerting series: its findings are still stored, and counted "
                                "in mast_muted_failure_mode_traces_total"),
                       ("unmute", "count a muted failure signature in the alerting series again"),
                       ("resolve", "mark a failure signature fixed: a run showing it afterwards is a regression "
                                   "(mast_regressed_failure_signatures_total, MastFailureSignatureRegressed)"),
                       ("reopen", "take back a failure signature's mark as fixed")):
        decide = sub.add_parser(name, help=what)
        _common(decide)
        decide.add_argument("signature", metavar="SIGNATURE", help="16 hexadecimal digits")
        if name == "mute":
            decide.add_argument("--for", dest="for_", metavar="DURATION", default="", help="how long (7d, 12h; "
                                "default: until unmuted)")
            decide.add_argument("--runs", type=_positive_int, metavar="N", help="until the problem has shown in N "
                                "more runs (with --for: whichever comes first), so that one that grows pages again")
        decide.add_argument("--note", default="", help="why, in a line (shown beside the signature)")
        decide.add_argument("--by", help="who (default: the user running the command)")
        decide.add_argument("--store-path", help="chDB data directory (exporters.store.path)")
    dashboards = sub.add_parser("dashboards", help="write the Grafana dashboards and provisioning files")
    _common(dashboards)
    dashboards.add_argument("--out", required=True, metavar="DIR", help="output directory")
    dashboards.add_argument("--trace-url", help="trace UI link with {trace_id} (dashboards.trace_url)")
    rules = sub.add_parser("rules", help="write the Prometheus recording and alerting rules")
    _common(rules)
    rules.add_argument("--out", required=True, metavar="DIR", help="output directory")
    rules.add_argument("--budget-usd", type=float, help="repeated-step spend budget per agent and window "
                       "(rules.wasted_spend.budget_usd)")
    rules.add_argument("--prometheus-rule", action="store_true", help="write a Prometheus Operator PrometheusRule "
                       "(mastwatch-prometheusrule.yaml) instead")
    report = sub.add_parser("report", help="render the store's dashboard panels, or one run (--trace), to a "
                            "self-contained HTML page")
    _common(report)
    report.add_argument("--out", required=True, metavar="FILE.html", help="the HTML page")
    report.add_argument("--png", metavar="FILE.png", help="also one PNG image of the charts")
    report.add_argument("--store-path", help="chDB data directory (exporters.store.path)")
    report.add_argument("--since", default="24h", help="a duration back from now (24h, 7d) or a UTC time "
                        "(default: 24h)")
    report.add_argument("--until", default="now", help="now, a duration back from now, or a UTC time (default: now)")
    report.add_argument("--trace", metavar="TRACE_ID", help="one run's page instead: its findings, a timeline and "
                        "table of its steps with the evidence highlighted")
    docs = sub.add_parser("docs", help="print the detectors' documentation as the docs' tables: the modes, each "
                          "detector's signals and settings (installed plugins' included)")
    _common(docs)
    docs.add_argument("--write", metavar="DIR", help="fill in those tables in README.md and docs/ of the checkout DIR "
                      "(the built-in detectors')")
    return parser


def _seconds(least: float) -> Callable[[str], float]:
    def parse(value: str) -> float:
        """Seconds, or a duration as the settings write them (90s, 2m, 250ms)."""
        try:
            seconds = float(value)
        except ValueError:
            try:
                seconds = parse_duration(value)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds nor a duration such as "
                                                 "90s or 2m") from None
        if not seconds >= least:  # NaN too
            raise argparse.ArgumentTypeError(f"{value} must be at least {least:g}")
        return seconds

    return parse


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return number


def _mode(value: str) -> str:
    from mastwatch.collector.model.modes import mode_code

    try:
        return mode_code(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _identifier(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a ClickHouse identifier")
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    try:
        config = load(args.config, _flag_overrides(args))
    except ConfigError as e:
        print(f"mastwatch: {e}", file=sys.stderr)
        return 2
    commands = {"serve": cmd_serve, "replay": cmd_replay, "eval": cmd_eval, "demo": cmd_demo, "schema": cmd_schema,
                "top": cmd_top, "show": cmd_show, "review": cmd_review, "mute": cmd_mute, "unmute": cmd_mute,
                "resolve": cmd_resolve, "reopen": cmd_resolve,
                "dashboards": cmd_dashboards,
                "rules": cmd_rules, "report": cmd_report, "docs": cmd_docs}
    try:
        return commands[args.command](args, config)
    except OSError as e:  # a port in use, a store directory that cannot be written
        print(f"mastwatch: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
