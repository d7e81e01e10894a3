"""The configuration: one YAML file, then environment variables, then command-line flags.

Sections follow the OpenTelemetry Collector's components; each component owns its settings model:
`receiver` (OTLP gRPC and HTTP), `processor` (assembly, detectors), `exporters.prometheus`, `exporters.store`;
the optional judge stage has its own section, `judge`; `dashboards` and `rules` set what `mastwatch dashboards`
and `mastwatch rules` generate.
Environment variables override the file: MASTWATCH_<SECTION>__<KEY>..., e.g.
MASTWATCH_RECEIVER__HTTP__ENDPOINT=0.0.0.0:4318. Values are YAML (numbers, booleans, lists).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.judge.stage import JudgeConfig
from mastwatch.collector.receiver import ReceiverConfig
from mastwatch.dashboards.settings import DashboardsConfig, RulesConfig
from mastwatch.exporter.evaluations import EvaluationEventsConfig
from mastwatch.exporter.prometheus import PrometheusExporterConfig
from mastwatch.exporter.store import StoreConfig
from mastwatch.exporter.webhook import WebhookConfig

ENV_PREFIX = "MASTWATCH_"


class ConfigError(ValueError):
    pass


class ExportersConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prometheus: PrometheusExporterConfig = PrometheusExporterConfig()
    store: StoreConfig = StoreConfig()
    webhooks: list[WebhookConfig] = Field(default_factory=list, description="endpoints told of selected findings "
                                          "and spend while a run goes on")
    evaluations: EvaluationEventsConfig = EvaluationEventsConfig()


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    receiver: ReceiverConfig = ReceiverConfig()
    processor: ProcessorConfig = ProcessorConfig()
    exporters: ExportersConfig = ExportersConfig()
    judge: JudgeConfig = JudgeConfig()
    dashboards: DashboardsConfig = DashboardsConfig()
    rules: RulesConfig = RulesConfig()


def _detector_problems(doc: Mapping[str, Any]) -> list[str]:
    """Every `processor.detectors.<code>` (and per agent) names a detector and holds valid settings for it. Read
    from the document, so that they are reported with the rest of its problems."""
    from mastwatch.collector.classify.detectors import DetectorError, load_detectors

    try:
        available = load_detectors()  # the built-in detectors and the installed plugins' (each checked)
    except DetectorError as e:
        raise ConfigError(str(e)) from None
    processor = doc.get("processor")
    if not isinstance(processor, Mapping):
        return []
    sections = [("processor.detectors", processor.get("detectors"))]
    agents = processor.get("agents")
    if isinstance(agents, list):
        sections += [(f"processor.agents[{i}].detectors", a.get("detectors")) for i, a in enumerate(agents)
                     if isinstance(a, Mapping)]
    problems = []
    for section, detectors in sections:
        if not isinstance(detectors, Mapping):  # absent, or a type the model reports
            continue
        for code, settings in detectors.items():
            where = f"{section}.{code}"
            if code not in available:
                problems.append(f"  {where}: no detector for this failure mode; detectors: {sorted(available)}")
                continue
            model = available[code].Settings
            try:
                model.model_validate(settings or {})
            except ValidationError as e:
                problems += _problems(e, where, model)
    return problems


def _endpoint_problems(doc: Mapping[str, Any]) -> list[str]:
    problems = []
    for path in (("receiver", "grpc", "endpoint"), ("receiver", "http", "endpoint"),
                 ("exporters", "prometheus", "endpoint")):
        endpoint: Any = doc
        for key in path:
            endpoint = endpoint.get(key) if isinstance(endpoint, Mapping) else None
        if not isinstance(endpoint, str):  # the default, or a type the model reports
            continue
        name = ".".join(path)
        _, sep, port = endpoint.rpartition(":")
        if not sep or not port.isdigit():
            problems.append(f"  {name}: {endpoint!r} is not host:port")
        elif not 0 <= int(port) <= 65535:
            problems.append(f"  {name}: port {port} of {endpoint!r} is not between 0 and 65535")
    return problems


def merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` over `base`, mappings merged key by key (a copy; neither is changed)."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _nested(path: list[str], value: Any) -> dict[str, Any]:
    doc: Any = value
    for key in reversed(path):
        doc = {key: doc}
    return doc


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for name, path in _env_paths(environ):
        doc = merge(doc, _nested(path, _yaml_value(environ[name], name)))
    return doc


def env_sources(environ: Mapping[str, str]) -> dict[str, str]:
    """The key paths the environment sets (`processor.decision_wait`) -> the variables setting them."""
    return {".".join(path): name for name, path in _env_paths(environ)}


def _env_paths(environ: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    paths = []
    for name in environ:
        if not name.startswith(ENV_PREFIX) or "__" not in name or name == "MASTWATCH_CONFIG":
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX):].split("__")]
        # detector codes are upper case with a dash: FM_1_3 in a variable name means FM-1.3
        paths.append((name, [p.upper().replace("_", "-", 1).replace("_", ".") if p.startswith("fm_") else p
                             for p in path]))
    return paths


def _yaml_value(raw: str, source: str) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: {raw!r} is not a valid YAML value: {e}") from None


_KEY_PART = re.compile(r"FM-\d+\.\d+|[^.]+")  # a detector code (FM-1.3) is one key despite its dot


def set_overrides(assignments: list[str]) -> dict[str, Any]:
    """--set a.b.c=value, as the Collector's --set flag."""
    doc: dict[str, Any] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected key.path=value")
        doc = merge(doc, _nested(_KEY_PART.findall(key), _yaml_value(raw, f"--set {key}")))
    return doc


def _problems(error: ValidationError, prefix: str = "", model: type[BaseModel] | None = Config,
              sources: Mapping[str, str] | None = None) -> list[str]:
    """One line per error: where, what, the value given; for an unknown key, the known keys it may have meant;
    for a value set by an environment variable, its name. `model`: the model `prefix` names."""
    lines = []
    for e in error.errors():
        loc = [str(p) for p in e["loc"]]
        where = ".".join([prefix] * bool(prefix) + loc) or "(top level)"
        line = f"  {where}: {e['msg']}" + (f" (got {e['input']!r})" if e["type"] != "missing" and
                                           not isinstance(e.get("input"), dict) else "")
        if e["type"] == "extra_forbidden" and loc:
            known = _fields(model, loc[:-1])
            close = difflib.get_close_matches(loc[-1], known, n=1) if known else []
            if close:
                line += f"; did you mean {'.'.join([prefix] * bool(prefix) + loc[:-1] + close)}?"
        source = next((name for key, name in (sources or {}).items() if where == key or where.startswith(key + ".")),
                      None)
        if source is not None:
            line += f" (from ${source})"
        lines.append(line)
    return lines


def _fields(model: type[BaseModel] | None, path: list[str]) -> list[str]:
    """The keys of the settings `path` names under `model` (none when it is not a model: a list, a mapping)."""
    for part in path:
        field = model.model_fields.get(part) if model is not None else None
        annotation = field.annotation if field is not None else None
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return list(model.model_fields) if model is not None else []


def load(path: str | None = None, overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> Config:
    """Defaults < file < environment < overrides (flags); raises ConfigError with every problem."""
    environ = os.environ if environ is None else environ
    path = path or environ.get("MASTWATCH_CONFIG")
    doc: dict[str, Any] = {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                loaded = yaml.safe_load(f) or {}
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {path} is not valid YAML: {e}") from e
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: expected a mapping at the top level")
        doc = loaded
    doc = merge(doc, env_overrides(environ))
    doc = merge(doc, overrides or {})
    problems: list[str] = []
    config: Config | None = None
    try:
        config = Config.model_validate(doc)
    except ValidationError as e:
        problems += _problems(e, sources=env_sources(environ))
    except ValueError as e:
        raise ConfigError(f"invalid configuration: {e}") from None
    problems += _detector_problems(doc) + _endpoint_problems(doc)
    if problems or config is None:
        raise ConfigError("invalid configuration:\n" + "\n".join(problems))
    return config
