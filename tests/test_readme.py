"""The README's configuration reference covers every setting, with its real default."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from mastwatch.collector.classify.detectors import load_detectors
from mastwatch.config import Config
from mastwatch.durations import parse_duration

README = (Path(__file__).parent.parent / "README.md").read_text()


def _settings(model: type[BaseModel], prefix: str = ""):
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _settings(ann, f"{prefix}{name}.")
        else:
            yield prefix + name, field


def _is_duration(field) -> bool:
    return any(getattr(m, "func", None) is parse_duration for m in field.metadata)


def _documented() -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| `([\w.]+)` \| ([^|]*) \|", README, re.M)}


def test_every_setting_is_documented_with_its_default() -> None:
    documented = _documented()
    defaults = Config().model_dump()
    for key, field in _settings(Config):
        assert key in documented, f"{key} missing from the README's configuration reference"
        value = defaults
        for part in key.split("."):
            value = value[part]
        shown = documented[key]
        if isinstance(value, bool):
            assert shown == str(value).lower(), key
        elif isinstance(value, float) and _is_duration(field):  # 5.0 is written 5s, 0.25 is 250ms
            assert shown in (f"{value:g}s", f"{value * 1000:g}ms", f"{value / 60:g}m", f"{value / 3600:g}h"), key
        elif isinstance(value, float):
            assert shown == f"{value:g}", key
        elif isinstance(value, int | str):
            assert shown == str(value), key


def test_every_detector_setting_is_documented() -> None:
    documented = _documented()
    for code, detector in load_detectors().items():
        assert f'processor.detectors."{code}"' in README
        for name, field in detector.Settings.model_fields.items():
            assert name in documented, f"{code} setting {name} missing from the README"
            if isinstance(field.default, int) and not isinstance(field.default, bool):
                assert documented[name] == str(field.default), name
