"""Comments and docstrings say why, never what was measured: figures belong in benchmarks/ (see
benchmarks/README.md), where the command that produced them sits beside them."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for folder in ("collector", "exporter", "mastwatch", "dashboards")
                 for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".c") and "_pb2" not in p.name)
# A figure: a time per operation, a share, a ratio of speeds, an instruction count.
FIGURE = re.compile(r"\d[\d,.]*\s?(?:µs|ns)\b|\d[\d,.]*\s?%(?!\w)|\d[\d.]*\s?[x\u00d7] (?:faster|slower|more|less|the)"
                    r"|\d[\d,]* instructions")


def _python_prose(text: str) -> list[tuple[int, str]]:
    """Comments and docstrings of a Python source, with their first line numbers."""
    prose = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
             if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                prose.append((first.lineno, first.value.value))
    return prose


def _c_prose(text: str) -> list[tuple[int, str]]:
    return [(text.count("\n", 0, m.start()) + 1, m.group()) for m in re.finditer(r"/\*.*?\*/|//[^\n]*", text, re.S)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_figure_in_a_comment(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    prose = _python_prose(text) if path.suffix == ".py" else _c_prose(text)
    found = [(line, m.group()) for line, words in prose for m in FIGURE.finditer(words)]
    assert not found, f"{path.relative_to(ROOT)}: figures in comments {found}: put them in benchmarks/README.md"
