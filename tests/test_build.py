"""The build: every C extension where a C compiler works (they are optional to setup.py, so one that fails to
compile would otherwise go unnoticed), each part using its extension where it is built and its Python twin where
not, and each twin offering what its extension's stub declares."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from tests.builds import EXTENSIONS, needs_compiler

ROOT = Path(__file__).resolve().parents[1]
# The stub of each extension with a Python twin of the same functions, in the source tree.
STUBS = {"mastwatch.collector.model._content": "collector/model/_content.pyi",
         "mastwatch.collector.normalize._genai": "collector/normalize/_genai.pyi",
         "mastwatch.collector.normalize._strings": "collector/normalize/_strings.pyi",
         "mastwatch.exporter.store._native": "exporter/store/_native.pyi"}


def _built(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@needs_compiler
@pytest.mark.parametrize("name", EXTENSIONS)
def test_every_c_extension_is_built_where_a_compiler_works(name: str) -> None:
    assert _built(name), f"{name} is not built: see the build's output (pip install -v)"


def test_each_part_uses_its_extension_where_built_else_its_python_twin() -> None:
    from mastwatch.collector.model import _content_py, content
    from mastwatch.collector.normalize import _genai_py, _strings_py, span
    from mastwatch.collector.receiver import decode
    from mastwatch.exporter.store import _native_py, records

    def chosen(extension: str, twin: object) -> object:
        return importlib.import_module(extension) if _built(extension) else twin

    assert content.collapse is chosen("mastwatch.collector.model._content", _content_py).collapse
    assert span._genai is chosen("mastwatch.collector.normalize._genai", _genai_py)
    assert span._strings is chosen("mastwatch.collector.normalize._strings", _strings_py)
    assert records._native is chosen("mastwatch.exporter.store._native", _native_py)
    assert (decode._decode_c is None) == (not _built("mastwatch.collector.receiver._otlpdecode"))


def _stub_names(path: Path) -> dict[str, ast.AST]:
    return {node.name if isinstance(node, ast.FunctionDef) else ast.unparse(node.targets[0] if isinstance(
        node, ast.Assign) else node.target): node for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef | ast.Assign | ast.AnnAssign)}


@pytest.mark.parametrize("extension", STUBS)
def test_each_python_twin_has_what_its_extension_declares(extension: str) -> None:
    """Same names, and functions with the same parameters (names, kinds, annotations) and return annotation: the
    modules that import one or the other type-check either way."""
    twin = importlib.import_module(EXTENSIONS[extension])
    declared = _stub_names(ROOT / STUBS[extension])
    assert declared
    for name, node in declared.items():
        assert hasattr(twin, name), f"{twin.__name__} has no {name}"
        if not isinstance(node, ast.FunctionDef):
            continue
        signature = inspect.signature(getattr(twin, name))
        args = node.args
        assert not args.vararg and not args.kwonlyargs and not args.kwarg and not args.args, name
        assert [(p.name, p.kind, p.annotation) for p in signature.parameters.values()] == [
            (a.arg, inspect.Parameter.POSITIONAL_ONLY, ast.unparse(a.annotation)) for a in args.posonlyargs], name
        assert signature.return_annotation == ast.unparse(node.returns), name
