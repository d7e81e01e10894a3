"""The runbooks (one section per alert of `mastwatch rules`) as the HTML page mastwatch serves at /runbooks, so
that each alert's `runbook_url` resolves without hosting anything; `rules.runbook_url` points elsewhere (a wiki)
where on-call cannot reach mastwatch's port."""

from __future__ import annotations

from importlib.resources import files

import markdown

PATH = "/runbooks"
STYLE = ("body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}"
         "code{background:#f3f3f3;padding:0 .2em}h2{border-top:1px solid #ddd;padding-top:1rem}")


def text() -> str:
    return files("mastwatch.dashboards").joinpath("runbooks.md").read_text(encoding="utf-8")


def page() -> bytes:
    """The runbooks as one HTML page; each alert's section has its name in lower case as its id."""
    body = markdown.markdown(text(), extensions=["toc"])
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>mastwatch runbooks</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>").encode()
