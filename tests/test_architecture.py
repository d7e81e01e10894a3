"""The shape of the house (docs/architecture.md), kept by a test: no import circles among the project's modules,
and nothing below imports upward: the model (collector/model/) imports nothing else of the project; the pipeline
(collector/) stands on nothing of the exporters, the dashboards or the application; the exporters on nothing of
the dashboards or the application. Imports for type checking count."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"mastwatch": "mastwatch", "collector": "mastwatch.collector", "exporter": "mastwatch.exporter",
            "dashboards": "mastwatch.dashboards"}
APP = "mastwatch"  # the application: mastwatch/*.py (the package root holds only its version)
# Bottom first. The dashboards and rules are generated from the whole configuration: they share the top floor with
# the application (CLI, configuration, service, demo, evaluation).
FLOORS = ("mastwatch.collector.model", "mastwatch.collector", "mastwatch.exporter", APP)
MODEL = "mastwatch.collector.model"


def _modules() -> tuple[dict[str, Path], set[str]]:
    modules, natives = {}, set()
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*"):
            rel = path.relative_to(ROOT / folder)
            if "__pycache__" in rel.parts or (folder == "mastwatch" and len(rel.parts) > 1):
                continue
            parts = [p for p in rel.with_suffix("").parts if p != "__init__"]
            name = ".".join([package, *parts])
            if path.suffix == ".py" and "_pb2" not in path.name:
                modules[name] = path
            elif path.suffix in (".c", ".pyi"):
                natives.add(name)  # a C extension: a leaf
    return modules, natives


def _graph() -> dict[str, set[str]]:
    modules, natives = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        base = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                origin = base
                for _ in range(node.level - 1):
                    origin = origin.rpartition(".")[0]
                module = (f"{origin}.{node.module}" if node.module else origin) if node.level else node.module or ""
                candidates = [f"{module}.{alias.name}" for alias in node.names] + [module]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            for candidate in candidates:
                while candidate and candidate not in modules and candidate not in natives:
                    candidate = candidate.rpartition(".")[0]
                if candidate in modules and candidate != name and candidate != "mastwatch":
                    targets.add(candidate)
                if candidate:
                    break
        graph[name] = targets
    return graph


def _floor(module: str) -> int:
    for level, prefix in enumerate(FLOORS[:-1]):
        if module == prefix or module.startswith(prefix + "."):
            return level
    return len(FLOORS) - 1


def test_no_import_circles() -> None:
    graph, circles = _graph(), []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    assert not circles, f"import circles: {circles}"


def test_nothing_imports_upward() -> None:
    graph = _graph()
    upward = sorted((module, target) for module, targets in graph.items() for target in targets
                    if _floor(target) > _floor(module))
    assert not upward, f"imports of a higher floor (model < collector < exporter < dashboards and app): {upward}"
    assert len(graph) > 80  # the whole house was read


def test_the_data_that_flows_is_defined_in_the_model() -> None:
    from mastwatch.collector.model import judgement, modes, published, spans, steps, trace, verdict, waste

    types = [spans.SpanRecord, steps.Step, steps.Finding, trace.Trace, modes.FailureMode, waste.Waste,
             waste.RepeatedStep, verdict.Verdict, published.Increment, published.LiveFindings, published.Published,
             judgement.Assessment, judgement.Judgement]
    assert all(t.__module__.startswith(MODEL + ".") for t in types), [t.__module__ for t in types]
    graph = _graph()
    model = [m for m in graph if m == MODEL or m.startswith(MODEL + ".")]
    assert len(model) >= 9 and all(t.startswith(MODEL) for m in model for t in graph[m])
