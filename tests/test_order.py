"""The same spans give the same verdicts, series and rows whatever order and requests they arrive in: the agent
label waits for the root (or `decision_wait`), detectors read a trace's steps in one order, and waste goes to the
model call found by start, end and span id, never by which came first among equal timestamps."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mastwatch.collector.assemble import END_OF_INPUT
from mastwatch.collector.config import ProcessorConfig
from mastwatch.collector.processor import Processor
from mastwatch.collector.receiver.decode import SpanRecord, decode
from mastwatch.exporter.prometheus import PrometheusExporter, PrometheusExporterConfig
from mastwatch.exporter.store.records import finding_rows, repeated_step_rows, trace_row
from tests.otlp_corpus import corpus
from tests.scenarios import scenarios


class _Rows:
    def __init__(self) -> None:
        self.verdicts: dict[str, Any] = {}
        self.rows: dict[str, Any] = {}

    def export_increments(self, increments) -> None:
        pass

    def export_verdicts(self, verdicts, increments) -> None:
        for v in verdicts:
            found: list[list[Any]] = []
            repeated: list[list[Any]] = []
            finding_rows(v, found)
            repeated_step_rows(v, repeated)
            self.verdicts[v.trace_id] = v.to_dict()
            self.rows[v.trace_id] = json.dumps([trace_row(v), found, repeated], default=str)

    def shutdown(self) -> None:
        pass


def _requests() -> list[list[SpanRecord]]:
    requests = [decode(s.request.SerializeToString()).spans for s in scenarios()]
    requests += [decode(request.SerializeToString()).spans for _, _, request in corpus()]
    return requests


def _run(requests: list[list[SpanRecord]]) -> tuple[dict, dict, dict]:
    rows = _Rows()
    prometheus = PrometheusExporter(PrometheusExporterConfig())
    processor = Processor(ProcessorConfig(), [rows, prometheus])
    for spans in requests:
        processor.process(spans, now=0.0)
    processor.drain(END_OF_INPUT)
    text = generate_latest(prometheus.registry).decode()
    series = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
              for family in text_string_to_metric_families(text) for sample in family.samples
              if sample.name.startswith("mast_")}
    return rows.verdicts, rows.rows, series


@pytest.mark.parametrize("seed", [1, 2])
def test_shuffled_arrival_gives_identical_verdicts_series_and_rows(seed: int) -> None:
    requests = _requests()
    verdicts, rows, series = _run(requests)
    assert len(verdicts) > 250 and any(v["failure_modes"] for v in verdicts.values())
    rng = random.Random(seed)
    spans = [span for request in requests for span in request]
    rng.shuffle(spans)
    chunks, i = [], 0
    while i < len(spans):
        n = rng.randint(1, 40)
        chunks.append(spans[i:i + n])
        i += n
    shuffled_verdicts, shuffled_rows, shuffled_series = _run(chunks)
    assert shuffled_verdicts.keys() == verdicts.keys()
    for trace_id, verdict in verdicts.items():
        assert shuffled_verdicts[trace_id] == verdict, trace_id
    assert shuffled_rows == rows
    assert shuffled_series.keys() == series.keys()
    for key, value in series.items():  # sums of costs in another order differ in their last bits only
        assert shuffled_series[key] == pytest.approx(value, rel=1e-9), key
