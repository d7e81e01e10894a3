"""Captured content stays out of storage and metrics unless content storage is opted in: a canary put in every content
attribute of every scenario run (the detectors reading content all run on them) appears in no stored row (the steps'
rows included), no finding's reason and no metric; opted in, the findings' quotes and the steps' previews carry it,
through the redaction hook when one is set. A real server, the real store (chDB) and /metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mastwatch.evaluate import CONTENT_KEYS, CONTENT_PREFIXES
from mastwatch.exporter.store.chdb_engine import ChdbEngine
from mastwatch.exporter.store.schema import TABLES
from tests.scenarios import scenarios
from tests.test_receiver import post

CANARY = "zqxcanary"
REDACTED = "[redacted]"


def mask(text: str) -> str:
    """The redaction hook the opted-in test configures (exporters.store.redact)."""
    return text.replace(CANARY, REDACTED)


def _marked(value: Any) -> Any:
    """Every string of a content value with the canary in front (JSON texts stay JSON)."""
    if isinstance(value, str):
        return f"{CANARY} {value}"
    if isinstance(value, list):
        return [_marked(v) for v in value]
    if isinstance(value, dict):
        return {k: _marked(v) for k, v in value.items()}
    return value


def _mark_text(text: str) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return f"{CANARY} {text}"
    return json.dumps(_marked(doc)) if isinstance(doc, dict | list) else f"{CANARY} {text}"


def _requests() -> list[bytes]:
    out = []
    for scenario in scenarios():
        request = scenario.request
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    for kv in span.attributes:
                        if (kv.key in CONTENT_KEYS or kv.key.startswith(CONTENT_PREFIXES)) and \
                                kv.value.HasField("string_value"):
                            kv.value.string_value = _mark_text(kv.value.string_value)
        out.append(request.SerializeToString())
    return out


def _run(start_server, tmp_path: Path, **store: Any) -> tuple[str, str, int]:
    """Every marked scenario through a server: (/metrics text, every stored row as text, traces). The runs with
    findings have step rows (mast_steps, by default)."""
    server = start_server(**{f"exporters__store__{k}": v for k, v in store.items()})
    requests = _requests()
    for body in requests:
        assert post(server.http_url, body)[0] == 200
    server.wait_for(lambda: server.sample("mast_traces_total") >= len(requests), timeout=60)
    metrics = server.metrics()
    server.service.stop()
    engine = ChdbEngine(str(tmp_path / "store"))
    try:
        rows = {table: engine.query(f"SELECT * FROM mastwatch.{table}") for table in TABLES}
    finally:
        engine.close()
    findings = rows["mast_findings"]
    assert sum(r["basis"] == "content" for r in findings) >= 15  # the content detectors did find things
    assert {r["trace_id"] for r in rows["mast_steps"]} == {r["trace_id"] for r in findings}
    if store.get("store_content"):  # opted in: the steps' previews are content, through the hook like the quotes
        assert (CANARY if store.get("redact") is None else REDACTED) in json.dumps(rows["mast_steps"])
    return metrics, json.dumps(rows, default=str), len(requests)


def test_content_is_in_no_row_reason_or_metric_by_default(start_server, tmp_path: Path) -> None:
    metrics, stored, _ = _run(start_server, tmp_path)
    assert CANARY not in stored
    assert CANARY not in metrics


@pytest.mark.parametrize("redact", [None, "tests.test_content_privacy:mask"], ids=["as-is", "redacted"])
def test_opted_in_content_is_stored_through_the_redaction_hook(start_server, tmp_path: Path, redact) -> None:
    metrics, stored, _ = _run(start_server, tmp_path, store_content=True, redact=redact)
    assert CANARY not in metrics
    if redact is None:
        assert CANARY in stored  # the quotes are what the default leaves out
    else:
        assert CANARY not in stored and REDACTED in stored


def test_a_redaction_hook_that_cannot_be_loaded_is_a_clear_error(start_server) -> None:
    with pytest.raises(ValueError, match="no_such_module"):
        start_server(exporters__store__store_content=True, exporters__store__redact="no_such_module:scrub")
