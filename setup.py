"""Native parts of the build (everything else is in pyproject.toml). Each has a Python path with the same results,
chosen when its module is imported, so none is required: without a C compiler the install is pure Python, with
more CPU per span.

- The C span decoder (`collector/receiver/_otlpdecode.c`; without it decode.py uses the protobuf runtime).
- The loops of content.py over every character or node of a piece of content (`collector/model/_content.c`; without it
  `collector/model/_content_py.py`).
- genai.read for the spans only the GenAI conventions read and that need no parsing (`collector/normalize/_genai.c`;
  without it `_genai_py.py` leaves them to genai.read), and the one str kept per name that steps share
  (`collector/normalize/_strings.c`; `_strings_py.py`).
- The store's rows as ClickHouse Native blocks, and a batch's blocks merged (`exporter/store/_native.c`;
  `_native_py.py`).
- The modules that run for every span (normalisation, trace assembly, the classifier and its detectors, the
  processor) compiled to C extensions by mypyc, from the same Python sources; their type hints are checked
  when they run.

The C extensions are optional to setuptools: one that does not build is left out with setuptools' warning
(tests/test_build.py fails where a compiler works and one is missing). mypyc's modules share one library, so they
are built all or none: only when a probe of the C compiler (CC, else Python's own) compiles and links a file
including Python.h, else left out with a one-line warning. `MASTWATCH_COMPILE=0` leaves them out regardless
(quicker to edit: an editable install keeps the compiled modules beside the sources, and they win over the .py
files until rebuilt).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
# Sources compiled by mypyc, relative to the repository (the store's row encoding, its durable queue's append
# and the Prometheus totals run once per trace on the processor's thread). The detectors' settings models in them
# annotate their fields with strings, the annotations mypyc keeps whole (see DetectorSettings). Package
# __init__ modules stay Python: a compiled one would look for its submodules in the installed layout, not the
# editable one.
COMPILED = ["collector/model/*.py", "collector/bounded.py", "collector/assemble.py",
            "collector/normalize/*.py", "collector/classify/*.py", "collector/classify/detectors/*.py",
            "collector/spend.py", "collector/processor.py",
            "exporter/store/records.py",
            "exporter/store/queue.py", "exporter/totals.py"]
# Installed package of each top-level source folder (as package-dir in pyproject.toml).
PACKAGES = {"collector": "collector", "exporter": "exporter", "dashboards": "dashboards"}

# The C extensions, each optional: where one does not build, its module's Python twin is imported instead.
EXTENSIONS = [Extension(name, [source], extra_compile_args=["-O2", "-Wall", "-Wextra"], optional=True)
              for name, source in [("mastwatch.collector.receiver._otlpdecode", "collector/receiver/_otlpdecode.c"),
                                   ("mastwatch.collector.model._content", "collector/model/_content.c"),
                                   ("mastwatch.collector.normalize._genai", "collector/normalize/_genai.c"),
                                   ("mastwatch.collector.normalize._strings", "collector/normalize/_strings.c"),
                                   ("mastwatch.exporter.store._native", "exporter/store/_native.c")]]


def _c_compiler_works() -> bool:
    """Whether the C compiler setuptools would use (CC, else Python's own) compiles and links a file including
    Python.h, as mypyc's modules need (a compiled module whose library is missing fails to import)."""
    from distutils.ccompiler import new_compiler  # setuptools' copy, as its build_ext uses
    from distutils.errors import CCompilerError, DistutilsError
    from distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.c"
        source.write_text("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            objects = compiler.compile([str(source)], output_dir=tmp, include_dirs=[sysconfig.get_paths()["include"]])
            compiler.link_shared_object(objects, str(Path(tmp) / "probe.so"))
        except (CCompilerError, DistutilsError, OSError):
            return False
    return True


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
    if not _c_compiler_works():
        print("mastwatch: no working C compiler (CC), so no C extensions and no mypyc: installing pure Python, "
              "slower", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    stage = _staged()
    # The C extensions' Python twins (*_py.py) stay Python: they run where nothing is compiled, and the tests
    # compare them, as they run there, with the extensions.
    paths = sorted(str(p.relative_to(stage)) for pattern in COMPILED for p in (stage / "mastwatch").glob(pattern)
                   if p.name != "__init__.py" and not p.stem.endswith("_py"))
    here = Path.cwd()
    os.chdir(stage)  # module names come from the staged layout; the mypy settings from pyproject.toml
    try:
        return mypycify([*paths, "--config-file", str(ROOT / "pyproject.toml")],
                        group_name="mastwatch.collector._compiled", target_dir=str(ROOT / "build" / "mypyc"))
    finally:
        os.chdir(here)


setup(ext_modules=[*EXTENSIONS, *_compiled()])
