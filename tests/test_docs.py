"""The documents: the configuration reference covers every setting with its real default, the README stays
short, and every relative link in the README and docs/ leads to an existing file and heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from mastwatch.collector.classify.detector import Detector
from mastwatch.collector.classify.detectors import builtin_detectors
from mastwatch.collector.durations import parse_duration
from mastwatch.config import Config
from mastwatch.detector_docs import BLOCKS, DocError, committed, describe, generate

ROOT = Path(__file__).parent.parent
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
README_MAX_LINES = 300
LINKED_DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "benchmarks" / "README.md",
                           ROOT / "deploy" / "README.md"])


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
    return {m.group(1): m.group(2).strip()
            for m in re.finditer(r"^\| `([\w.]+)` \| ([^|]*) \|", CONFIGURATION, re.M)}


def test_every_setting_is_documented_with_its_default() -> None:
    documented = _documented()
    defaults = Config().model_dump()
    for key, field in _settings(Config):
        assert key in documented, f"{key} missing from docs/configuration.md"
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


@pytest.mark.parametrize("block", list(BLOCKS))
def test_the_detectors_documentation_is_what_they_generate(block: str) -> None:
    """The README's modes, the detectors' sections of docs/classification.md and their settings in
    docs/configuration.md come from the detectors' docstrings and settings models (`mastwatch docs --write .`)."""
    path = BLOCKS[block][0]
    assert committed(ROOT, block) == generate(builtin_detectors())[block], \
        f"{path} differs from what the detectors generate: run `mastwatch docs --write .`"


def test_every_detector_setting_is_documented() -> None:
    documented = _documented()
    for code, detector in builtin_detectors().items():
        assert f'processor.detectors."{code}"' in CONFIGURATION
        for name in detector.Settings.model_fields:
            assert name in documented, f"{code} setting {name} missing from docs/configuration.md"


class _Undocumented(Detector):
    code = "FM-2.2"  # this test module's docstring is not a detector's


def test_a_detector_docstring_out_of_shape_is_refused() -> None:
    with pytest.raises(DocError, match=re.escape("must start with 'FM-2.2 Fail to ask for clarification: '")):
        describe(_Undocumented)
    for code, detector in builtin_detectors().items():
        doc = describe(detector)
        assert doc.code == code and doc.summary and doc.looks_for and doc.basis and doc.content and doc.body


def test_builtin_detector_settings_keep_their_descriptions_and_constraints() -> None:
    """The built-in detectors are compiled: a settings field annotated otherwise than with a string loses its
    description and constraints there, and a decorated cached_property is computed on every read (see
    DetectorSettings)."""
    detectors = builtin_detectors()
    for code, detector in detectors.items():
        for name, field in detector.Settings.model_fields.items():
            assert field.description, f"{code} setting {name} has no description"
        for name, value in vars(detector.Settings).items():
            assert not isinstance(value, property), f"{code} settings: {name} is computed on every read"
    assert detectors["FM-1.3"].Settings.model_fields["min_occurrences"].metadata
    assert detectors["FM-1.4"].Settings.model_fields["drop_ratio"].metadata


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; reference material belongs in docs/"


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)


def _prose(text: str) -> str:
    """The text without code blocks and inline code, where brackets are not links."""
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", _without_code_blocks(text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text in lower case, punctuation but hyphens and underscores dropped,
    spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    text = _without_code_blocks(path.read_text(encoding="utf-8"))
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(path: Path) -> list[str]:
    """Relative link and image targets (http:, https:, mailto: and the like are not checked)."""
    targets = re.findall(r"\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)", _prose(path.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", t)]


@pytest.mark.parametrize("document", LINKED_DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_somewhere(document: Path) -> None:
    for target in _links(document):
        file, _, anchor = target.partition("#")
        dest = (document.parent / file).resolve() if file else document
        assert dest.exists(), f"{document.relative_to(ROOT)}: {target} leads to no file"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{document.relative_to(ROOT)}: {target}: no such heading in {dest.name}"


def test_links_are_found() -> None:
    links = _links(ROOT / "README.md")
    assert "docs/configuration.md" in links and "#failure-modes-assessed" in links, links
    assert "https://example.com" not in _links(ROOT / "docs" / "configuration.md")


def test_slugs_follow_github() -> None:
    assert _slug("Failure modes assessed") == "failure-modes-assessed"
    assert _slug("Queries and `mastwatch top`") == "queries-and-mastwatch-top"
    assert _slug("The judge (optional)") == "the-judge-optional"
    assert _slug("MastwatchRejectingSpans") == "mastwatchrejectingspans"
    assert _slug("Read-only or state-changing tools") == "read-only-or-state-changing-tools"
