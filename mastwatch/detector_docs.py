"""`mastwatch docs`: the documentation each detector carries, as the tables and sections of the docs.

A detector's module docstring is its documentation: a first line `FM-1.3 <mode name>: <what the run did>`, then
the fields `Looks for:`, `Basis:` and `Content capture:` (a field's further lines indented), then its signals in
detail (Markdown). Its settings are its `Settings` model: each field's default and description. From them come
the README's table of modes (`modes`), the detectors' sections of docs/classification.md (`detectors`) and their
settings tables in docs/configuration.md (`detector-settings`). Each is written between two comments in its file,

    <!-- mastwatch docs: modes -->
    ...
    <!-- end of mastwatch docs -->

which `mastwatch docs --write` fills in and tests/test_docs.py compares with what the detectors generate."""

from __future__ import annotations

import ast
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from mastwatch.collector.classify.detector import Detector
from mastwatch.collector.config import DetectorSettings
from mastwatch.collector.model.modes import MODES

FIELDS = ("Looks for", "Basis", "Content capture")
NOT_NEEDED = "\u2013"  # an en dash: the column does not apply
END = "<!-- end of mastwatch docs -->"


class DocError(ValueError):
    pass


@dataclass(frozen=True)
class DetectorDoc:
    code: str
    name: str  # the mode's
    summary: str  # what the run did, after the first line's colon
    looks_for: str
    basis: str
    content: str  # what content capture it needs
    body: str  # the signals in detail (Markdown)


def docstring(cls: type[Detector]) -> str:
    """The detector's module docstring. A compiled module has none at run time (mypyc drops it, and the file it
    names may not be its own): it is read from the module's source, in its package's folder."""
    module = sys.modules[cls.__module__]
    if module.__doc__:
        return inspect.cleandoc(module.__doc__)
    package, _, name = cls.__module__.rpartition(".")
    folders = getattr(sys.modules.get(package), "__path__", None) or [str(Path(module.__file__ or "").parent)]
    for folder in folders:
        source = Path(folder) / f"{name}.py"
        if source.is_file():
            doc = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8")))
            if not doc:
                raise DocError(f"{cls.__module__} ({source}) has no docstring")
            return doc
    raise DocError(f"{cls.__module__}: no docstring, and no source {name}.py in {', '.join(folders)} to read it from")


def describe(cls: type[Detector]) -> DetectorDoc:
    """A detector's documentation, from its module's docstring."""
    where = f"{cls.__module__} ({cls.code})"
    first, _, rest = docstring(cls).partition("\n")
    mode = MODES[cls.code]
    head = f"{cls.code} {mode.name}: "
    if not first.startswith(head):
        raise DocError(f"{where}: the docstring must start with {head!r}, not {first!r}")
    header, _, body = rest.strip("\n").partition("\n\n")
    fields: dict[str, list[str]] = {}
    key = None
    for line in header.split("\n"):
        match = re.match(r"([A-Z][a-z ]+): (.*)", line)
        if match and match.group(1) in FIELDS:
            key = match.group(1)
            fields[key] = [match.group(2).strip()]
        elif key is not None and line.startswith(" "):
            fields[key].append(line.strip())
        else:
            raise DocError(f"{where}: after its first line, the docstring must give {', '.join(FIELDS)} (one each, "
                           f"further lines indented), then a blank line; found {line!r}")
    if missing := [f for f in FIELDS if f not in fields]:
        raise DocError(f"{where}: the docstring lacks {', '.join(missing)}")
    looks_for, basis, content = (" ".join(fields[f]) for f in FIELDS)
    return DetectorDoc(cls.code, mode.name, first[len(head):].strip(), looks_for, basis, content, body.strip())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _groups_without(detectors: dict[str, type[Detector]]) -> list[list[str]]:
    """The modes no detector covers, consecutive ones together."""
    groups: list[list[str]] = []
    previous = None
    for code in MODES:
        if code in detectors:
            previous = None
            continue
        if previous is None:
            groups.append([])
        groups[-1].append(code)
        previous = code
    return groups


def modes_table(detectors: dict[str, type[Detector]]) -> str:
    """The README's table: per mode, what its detector looks for, on what basis, with what content."""
    rows = ["| mode | what it looks for | basis | needs content capture |", "|---|---|---|---|"]
    without = {group[0]: group for group in _groups_without(detectors)}
    for code, mode in MODES.items():
        if code in without:
            rows.append(f"| {', '.join(without[code])} | not assessed from spans; the judge's | judge | {NOT_NEEDED} |")
        elif code in detectors:
            d = describe(detectors[code])
            rows.append(f"| {code} {mode.name} | {_cell(d.looks_for)} | {_cell(d.basis)} | {_cell(d.content)} |")
    return "\n".join(rows)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def detector_sections(detectors: dict[str, type[Detector]]) -> str:
    """docs/classification.md: a section per detector, its docstring's signals, and the modes none covers."""
    out = []
    without = {group[0]: group for group in _groups_without(detectors)}
    anchors = {code: _slug(heading) for heading, codes, _ in _settings_groups(detectors) for code in codes}
    for code, mode in MODES.items():
        if code in without:
            group = without[code]
            out.append(f"### {', '.join(group)}\n\n{_and([f'{c} {MODES[c].name}' for c in group])}: not assessed "
                       "from spans; the [judge](judge.md) can assess them.")
        elif code in detectors:
            d = describe(detectors[code])
            heading = f"{code} {mode.name}"
            settings = f"[{_section(code)}](configuration.md#{anchors[code]})" if code in anchors else \
                "the [common ones](configuration.md#detector-settings) only"
            out.append(f"### {heading}\n\n{d.summary[:1].upper()}{d.summary[1:]} Basis: {d.basis}. Content capture: "
                       f"{d.content}.\n\n{d.body}\n\nSettings: {settings}.")
    return "\n\n".join(out)


def _own_fields(cls: type[Detector]) -> dict[str, FieldInfo]:
    """The settings of a detector beyond the common ones (or with another default or meaning)."""
    common = DetectorSettings.model_fields
    return {name: f for name, f in cls.Settings.model_fields.items()
            if name not in common or (f.get_default(call_default_factory=True), f.description) !=
            (common[name].get_default(call_default_factory=True), common[name].description)}


def _default(field: FieldInfo) -> str:
    value: Any = field.get_default(call_default_factory=True)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(f"`{v}`" for v in value) if value else "[]"
    if isinstance(value, dict):
        return "{}" if not value else f"`{value}`"
    return "none" if value is None else str(value)


def _settings_table(fields: dict[str, FieldInfo]) -> str:
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [f"| `{name}` | {_cell(_default(f))} | {_cell(f.description or '')} |" for name, f in fields.items()]
    return "\n".join(rows)


def settings_tables(detectors: dict[str, type[Detector]]) -> str:
    """docs/configuration.md: the settings every detector takes, then each detector's own (detectors sharing a
    settings model, one table)."""
    out = ["Detector settings live under `processor.detectors.\"<code>\"`. Every detector takes these:",
           _settings_table(dict(DetectorSettings.model_fields))]
    for heading, codes, own in _settings_groups(detectors):
        sections = _and([_section(c) for c in codes])
        out.append(f"### {heading}\n\n{sections}:\n\n{_settings_table(own)}")
    only_common = [code for code, cls in detectors.items() if not _own_fields(cls)]
    if only_common:
        out.append(_and([_section(c) for c in only_common]) + " take only the common settings.")
    return "\n\n".join(out)


def _settings_groups(detectors: dict[str, type[Detector]]) -> list[tuple[str, list[str], dict[str, FieldInfo]]]:
    """The detectors with settings of their own, those sharing a settings model together: a heading (the first
    one's mode), their codes and the fields."""
    shared: dict[type[DetectorSettings], list[str]] = {}
    for code, cls in detectors.items():
        if _own_fields(cls):
            shared.setdefault(cls.Settings, []).append(code)
    return [(_and([f"{c} {MODES[c].name}" for c in codes]), codes, _own_fields(detectors[codes[0]]))
            for codes in shared.values()]


def _section(code: str) -> str:
    return f'`processor.detectors."{code}"`'


BLOCKS: dict[str, tuple[str, Callable[[dict[str, type[Detector]]], str]]] = {
    "modes": ("README.md", modes_table),
    "detectors": ("docs/classification.md", detector_sections),
    "detector-settings": ("docs/configuration.md", settings_tables),
}


def generate(detectors: dict[str, type[Detector]]) -> dict[str, str]:
    """Each block's text, by name."""
    return {name: make(detectors) for name, (_, make) in BLOCKS.items()}


def _marker(name: str) -> str:
    return f"<!-- mastwatch docs: {name} -->"


def committed(root: Path, name: str) -> str:
    """A block as it is in the checkout at `root`."""
    path = root / BLOCKS[name][0]
    text = path.read_text(encoding="utf-8")
    start = text.find(_marker(name))
    end = text.find(END, start)
    if start < 0 or end < 0:
        raise DocError(f"{path}: no {_marker(name)} ... {END} block")
    return text[start + len(_marker(name)):end].strip("\n")


def write(root: Path, detectors: dict[str, type[Detector]]) -> list[Path]:
    """Fill in every block of the checkout at `root`; the files changed."""
    changed = []
    for name, text in generate(detectors).items():
        if committed(root, name) == text:
            continue
        path = root / BLOCKS[name][0]
        old = path.read_text(encoding="utf-8")
        start = old.index(_marker(name)) + len(_marker(name))
        path.write_text(old[:start] + "\n" + text + "\n" + old[old.index(END, start):], encoding="utf-8")
        changed.append(path)
    return changed
