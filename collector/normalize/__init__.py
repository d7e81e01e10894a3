"""Spans to steps, one module per convention (OTel GenAI, OpenInference, OpenLLMetry, Vercel AI SDK, Langfuse);
`span.normalize_span` reads a span with each convention it carries."""

from __future__ import annotations

from .span import normalize_span

__all__ = ["normalize_span"]
