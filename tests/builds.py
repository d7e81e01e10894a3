"""What the build under test holds, as setup.py decides it: the C extensions where a C compiler works, and the
per-span modules compiled by mypyc as well unless MASTWATCH_COMPILE=0; pure Python without a compiler (`make
test-pure` builds and tests that way, CC=/bin/false). Tests of what only a compiled build has skip on a pure one;
tests comparing an extension with its Python twin skip where the extension is not built."""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

# Each C extension, and the Python module with the same functions that is used where it is not built.
EXTENSIONS = {"mastwatch.collector.receiver._otlpdecode": "mastwatch.collector.receiver.decode",
              "mastwatch.collector.model._content": "mastwatch.collector.model._content_py",
              "mastwatch.collector.normalize._genai": "mastwatch.collector.normalize._genai_py",
              "mastwatch.collector.normalize._strings": "mastwatch.collector.normalize._strings_py",
              "mastwatch.exporter.store._native": "mastwatch.exporter.store._native_py"}


def _c_compiler_works() -> bool:
    """Whether the C compiler a build would use here (CC, else Python's) compiles against Python's headers: the
    question setup.py asks before compiling anything."""
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.c"
        source.write_text("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            return subprocess.run([*compiler, f"-I{sysconfig.get_paths()['include']}", "-c", str(source), "-o",
                                   str(Path(tmp) / "probe.o")], capture_output=True, timeout=120).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False


C_COMPILER = _c_compiler_works()
COMPILED = C_COMPILER and os.environ.get("MASTWATCH_COMPILE", "1") != "0"  # the per-span modules by mypyc
needs_compiler = pytest.mark.skipif(not C_COMPILER, reason="built without a C compiler: pure Python")
needs_mypyc = pytest.mark.skipif(not COMPILED, reason="built as plain Python")


def extension(name: str) -> ModuleType:
    """The C extension `name` (mastwatch.collector.model._content, ...); the test is skipped where it is not built."""
    try:
        return importlib.import_module(name)
    except ImportError:
        pytest.skip(f"{name} is not built (no C compiler): only its Python twin is here")
