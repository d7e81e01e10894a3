"""Native parts of the build (everything else is in pyproject.toml).

- The C span decoder (`collector/receiver/_otlpdecode.c`; decode.py falls back to the protobuf runtime without it).
- The loops of content.py over every character or node of a piece of content (`collector/_content.c`).
- genai.read for the spans only the GenAI conventions read and that need no parsing (`collector/normalize/_genai.c`),
  and the one str kept per name that steps share (`collector/normalize/_strings.c`).
- The store's rows as ClickHouse Native blocks, and a batch's blocks merged (`exporter/store/_native.c`).
- The modules that run for every span (normalisation, trace assembly, the classifier and its detectors, the
  processor) compiled to C extensions by mypyc, from the same Python sources; their type hints are checked
  when they run. `MASTWATCH_COMPILE=0` builds pure Python instead (quicker to edit: an editable install keeps
  the compiled modules beside the sources, and they win over the .py files until rebuilt).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
# Sources compiled by mypyc, relative to the repository (the store's row encoding, its durable queue's append
# and the Prometheus totals run once per trace on the processor's thread). The detectors' settings models in them
# annotate their fields with strings, the annotations mypyc keeps whole (see DetectorSettings). Package
# __init__ modules stay Python: a compiled one would look for its submodules in the installed layout, not the
# editable one.
COMPILED = ["collector/bounded.py", "collector/steps.py", "collector/content.py", "collector/assemble.py",
            "collector/normalize/*.py", "collector/classify/*.py", "collector/classify/detectors/*.py",
            "collector/spend.py", "collector/verdict.py", "collector/processor.py", "exporter/store/records.py",
            "exporter/store/queue.py", "exporter/totals.py"]
# Installed package of each top-level source folder (as package-dir in pyproject.toml).
PACKAGES = {"collector": "collector", "exporter": "exporter", "dashboards": "dashboards"}

decoder = Extension("mastwatch.collector.receiver._otlpdecode", ["collector/receiver/_otlpdecode.c"],
                    extra_compile_args=["-O2", "-Wall", "-Wextra"])
content = Extension("mastwatch.collector._content", ["collector/_content.c"],
                    extra_compile_args=["-O2", "-Wall", "-Wextra"])
genai = Extension("mastwatch.collector.normalize._genai", ["collector/normalize/_genai.c"],
                  extra_compile_args=["-O2", "-Wall", "-Wextra"])
strings = Extension("mastwatch.collector.normalize._strings", ["collector/normalize/_strings.c"],
                    extra_compile_args=["-O2", "-Wall", "-Wextra"])
native = Extension("mastwatch.exporter.store._native", ["exporter/store/_native.c"],
                   extra_compile_args=["-O2", "-Wall", "-Wextra"])


def _staged() -> Path:
    """The sources as the installed package lays them out (mastwatch/collector/...), linked under build/:
    mypyc names each module after its path."""
    stage = ROOT / "build" / "mypyc-src"
    shutil.rmtree(stage, ignore_errors=True)
    package = stage / "mastwatch"
    package.mkdir(parents=True)
    for source in (ROOT / "mastwatch").glob("*.py"):
        (package / source.name).symlink_to(source.resolve())
    for folder in PACKAGES:
        (package / folder).symlink_to((ROOT / folder).resolve(), target_is_directory=True)
    return stage


def _compiled() -> list[Extension]:
    if os.environ.get("MASTWATCH_COMPILE", "1") == "0":
        return []
    from mypyc.build import mypycify

    stage = _staged()
    paths = sorted(str(p.relative_to(stage)) for pattern in COMPILED for p in (stage / "mastwatch").glob(pattern)
                   if p.name != "__init__.py")
    here = Path.cwd()
    os.chdir(stage)  # module names come from the staged layout; the mypy settings from pyproject.toml
    try:
        return mypycify([*paths, "--config-file", str(ROOT / "pyproject.toml")],
                        group_name="mastwatch.collector._compiled", target_dir=str(ROOT / "build" / "mypyc"))
    finally:
        os.chdir(here)


setup(ext_modules=[decoder, content, genai, strings, native, *_compiled()])
