"""The detectors: the built-in ones, one module per failure mode in this package, and those other packages add
through the `mastwatch.detectors` entry point group.

A detector is a `Detector` subclass whose `code` is a MAST failure mode (FM-1.1 ... FM-3.3), with its settings
model (`Settings`, a `DetectorSettings` subclass) beside it. An entry point names a module, whose detectors are
every such class it defines, or one class (`package.module:Class`). A package declares it in its pyproject.toml:

    [project.entry-points."mastwatch.detectors"]
    withholding = "my_package.withholding"

Each mode has one detector at most: a plugin covers a mode no built-in detector covers (FM-2.3 and FM-2.4 by
default), and a second detector for a mode is refused."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import pkgutil
from types import ModuleType
from typing import Any

from ...config import DetectorSettings
from ...model.modes import MODES
from ..detector import Detector

ENTRY_POINTS = "mastwatch.detectors"


class DetectorError(ValueError):
    """A detector that cannot be used: its plugin does not load, its code is not a MAST mode, or its mode has a
    detector already."""


def _defined_in(module: ModuleType) -> list[type[Detector]]:
    """The detectors a module defines (not those it imports)."""
    return [value for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, Detector) and value is not Detector
            and getattr(value, "code", None) and inspect.getmodule(value) is module]


def builtin_detectors() -> dict[str, type[Detector]]:
    """The detectors of this package, by code."""
    found: dict[str, type[Detector]] = {}
    for info in pkgutil.iter_modules(__path__):
        for cls in _defined_in(importlib.import_module(f"{__name__}.{info.name}")):
            _add(found, cls, "built in")
    return dict(sorted(found.items()))


def plugin_detectors() -> dict[str, tuple[type[Detector], str]]:
    """The detectors of the installed packages' `mastwatch.detectors` entry points: by code, the class and where it
    came from."""
    found: dict[str, tuple[type[Detector], str]] = {}
    for entry in sorted(importlib.metadata.entry_points(group=ENTRY_POINTS), key=lambda e: (e.name, e.value)):
        where = f"entry point {entry.name} = {entry.value}" + (f" of {entry.dist.name}" if entry.dist else "")
        try:
            loaded: Any = entry.load()
        except Exception as e:
            raise DetectorError(f"detector plugin ({where}) cannot be loaded: {type(e).__name__}: {e}") from e
        if isinstance(loaded, ModuleType):
            classes = _defined_in(loaded)
            if not classes:
                raise DetectorError(f"detector plugin ({where}) defines no Detector subclass with a code")
        elif isinstance(loaded, type) and issubclass(loaded, Detector):
            classes = [loaded]
        else:
            raise DetectorError(f"detector plugin ({where}) is neither a module nor a Detector subclass")
        for cls in classes:
            known = found.get(cls.code)
            if known is not None and known[0] is not cls:
                raise DetectorError(f"two detectors for {cls.code}: {known[0].__qualname__} ({known[1]}) and "
                                    f"{cls.__qualname__} ({where})")
            _check(cls, where)
            found[cls.code] = (cls, where)
    return found


def load_detectors() -> dict[str, type[Detector]]:
    """Every detector, built in or added by a plugin, by code (in code order)."""
    found = builtin_detectors()
    for code, (cls, where) in plugin_detectors().items():
        if code in found:
            raise DetectorError(f"two detectors for {code}: the built-in {found[code].__qualname__} and "
                                f"{cls.__qualname__} ({where})")
        found[code] = cls
    return dict(sorted(found.items()))


def _check(cls: type[Detector], where: str) -> None:
    if cls.code not in MODES:
        raise DetectorError(f"detector {cls.__qualname__} ({where}): {cls.code!r} is not a MAST failure mode "
                            "(FM-1.1 to FM-1.5, FM-2.1 to FM-2.6, FM-3.1 to FM-3.3)")
    if not (isinstance(cls.Settings, type) and issubclass(cls.Settings, DetectorSettings)):
        raise DetectorError(f"detector {cls.__qualname__} ({where}): its Settings is not a DetectorSettings subclass")


def _add(found: dict[str, type[Detector]], cls: type[Detector], where: str) -> None:
    if cls.code in found:
        raise DetectorError(f"two detectors for {cls.code}: {found[cls.code].__qualname__} and {cls.__qualname__}")
    _check(cls, where)
    found[cls.code] = cls
