"""Durations in configuration, written as the OpenTelemetry Collector writes them: 500ms, 10s, 5m, 1h."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")


def parse_duration(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("a duration like 500ms, 10s, 5m or 1h")
    if isinstance(value, int | float):
        return float(value)
    match = _PATTERN.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a duration like 500ms, 10s, 5m or 1h")
    return float(match.group(1)) * _UNITS[match.group(2)]


Duration = Annotated[float, BeforeValidator(parse_duration)]
