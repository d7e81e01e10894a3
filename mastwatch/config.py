"""The configuration: one YAML file, then environment variables, then command-line flags.

Sections follow the OpenTelemetry Collector's components; each component owns its settings model:
`receiver` (OTLP gRPC and HTTP), `processor` (assembly, detectors), `exporters.prometheus`, `exporters.store`;
the optional judge stage has its own section, `judge`; `dashboards` and `rules` set what `mastwatch dashboards`
and `mastwatch rules` generate.
Environment variables override the file: MASTWATCH_<SECTION>__<KEY>..., e.g.
MASTWATCH_RECEIVER__HTTP__ENDPOINT=0.0.0.0:4318. Values are YAML (numbers, booleans, lists).
"""

from __future__ import annotations

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


def _detectors(config: Config) -> None:
    """Every `processor.detectors.<code>` (and per agent) names a detector and holds valid settings for it."""
    from mastwatch.collector.classify.detectors import DetectorError, load_detectors

    try:
        available = load_detectors()  # the built-in detectors and the installed plugins'
    except DetectorError as e:
        raise ConfigError(str(e)) from None
    problems = []
    sections = [("processor.detectors", config.processor.detectors)] + [
        (f"processor.agents[{i}].detectors", a.detectors) for i, a in enumerate(config.processor.agents)]
    for section, detectors in sections:
        for code, settings in detectors.items():
            where = f"{section}.{code}"
            if code not in available:
                problems.append(f"  {where}: no detector for this failure mode; detectors: {sorted(available)}")
                continue
            try:
                available[code].Settings.model_validate(settings or {})
            except ValidationError as e:
                problems += _problems(e, where)
    if problems:
        raise ConfigError("invalid configuration:\n" + "\n".join(problems))


def _endpoints(config: Config) -> None:
    for name, endpoint in (("receiver.grpc.endpoint", config.receiver.grpc.endpoint),
                           ("receiver.http.endpoint", config.receiver.http.endpoint),
                           ("exporters.prometheus.endpoint", config.exporters.prometheus.endpoint)):
        _, sep, port = endpoint.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ConfigError(f"{name}: {endpoint!r} is not host:port")


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
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name or name == "MASTWATCH_CONFIG":
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX):].split("__")]
        # detector codes are upper case with a dash: FM_1_3 in a variable name means FM-1.3
        path = [p.upper().replace("_", "-", 1).replace("_", ".") if p.startswith("fm_") else p for p in path]
        doc = merge(doc, _nested(path, _yaml_value(raw, name)))
    return doc


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


def _problems(error: ValidationError, prefix: str = "") -> list[str]:
    lines = []
    for e in error.errors():
        where = ".".join([prefix] * bool(prefix) + [str(p) for p in e["loc"]]) or "(top level)"
        lines.append(f"  {where}: {e['msg']}" + (f" (got {e['input']!r})" if e["type"] != "missing" and
                                                 not isinstance(e.get("input"), dict) else ""))
    return lines


def _describe(error: ValidationError) -> str:
    return "invalid configuration:\n" + "\n".join(_problems(error))


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
    try:
        config = Config.model_validate(doc)
    except ValidationError as e:
        raise ConfigError(_describe(e)) from None
    except ValueError as e:
        raise ConfigError(f"invalid configuration: {e}") from None
    _detectors(config)
    _endpoints(config)
    return config
