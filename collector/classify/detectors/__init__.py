"""Detector plugins, one module per failure mode. Any `Detector` subclass defined here is loaded."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from ..detector import Detector


def load_detectors() -> dict[str, type[Detector]]:
    found: dict[str, type[Detector]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Detector) and value is not Detector \
                    and getattr(value, "code", None) and inspect.getmodule(value) is module:
                if value.code in found:
                    raise RuntimeError(f"two detectors for {value.code}: {found[value.code]} and {value}")
                found[value.code] = value
    return dict(sorted(found.items()))
