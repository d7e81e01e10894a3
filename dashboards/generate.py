"""`mastwatch dashboards --out DIR`: every `*.dashboard.py` here as Grafana JSON, with the provisioning files
that load them (data sources with the uids the panels use, and a dashboards provider).

    DIR/dashboards/<uid>.json
    DIR/provisioning/datasources/mastwatch.yaml
    DIR/provisioning/dashboards/mastwatch.yaml
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import yaml
from grafanalib._gen import DashboardEncoder

from mastwatch.config import Config

from .panels import CLICKHOUSE, PROMETHEUS, PROVISIONED

HERE = Path(__file__).parent


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"mastwatch.dashboards.{path.name[:-3]}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dashboards(config: Config) -> dict[str, dict[str, Any]]:
    """uid -> dashboard JSON, built with `config`."""
    out = {}
    for path in sorted(HERE.glob("*.dashboard.py")):
        board = _module(path).build(config)
        out[board.uid] = json.loads(json.dumps(board.to_json_data(), cls=DashboardEncoder))
    return out


def datasources(config: Config) -> dict[str, Any]:
    d = config.dashboards
    return {"apiVersion": 1, "datasources": [
        {"name": "mastwatch Prometheus", "type": PROMETHEUS["type"], "uid": PROVISIONED[PROMETHEUS["type"]],
         "access": "proxy",
         "url": d.prometheus_url, "jsonData": {"timeInterval": "15s", "httpMethod": "POST"}, "editable": False},
        {"name": "mastwatch ClickHouse", "type": CLICKHOUSE["type"], "uid": PROVISIONED[CLICKHOUSE["type"]],
         "jsonData": {"host": d.clickhouse_host, "port": d.clickhouse_port, "protocol": d.clickhouse_protocol,
                      "username": d.clickhouse_username, "defaultDatabase": config.exporters.store.database},
         "secureJsonData": {"password": "$MASTWATCH_CLICKHOUSE_PASSWORD"}, "editable": False},
    ]}


def provider(config: Config) -> dict[str, Any]:
    d = config.dashboards
    return {"apiVersion": 1, "providers": [
        {"name": "mastwatch", "type": "file", "folder": d.folder, "folderUid": "mastwatch",
         "disableDeletion": False, "allowUiUpdates": False, "updateIntervalSeconds": 60,
         "options": {"path": d.path, "foldersFromFilesStructure": False}},
    ]}


def write(config: Config, out: Path) -> list[Path]:
    written = []
    for uid, board in dashboards(config).items():
        written.append(_write(out / "dashboards" / f"{uid}.json", json.dumps(board, indent=2, sort_keys=True)))
    written.append(_write(out / "provisioning" / "datasources" / "mastwatch.yaml",
                          yaml.safe_dump(datasources(config), sort_keys=False)))
    written.append(_write(out / "provisioning" / "dashboards" / "mastwatch.yaml",
                          yaml.safe_dump(provider(config), sort_keys=False)))
    return written


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")
    return path
