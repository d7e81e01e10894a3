"""The data that flows through the pipeline, importing nothing else of the project: `SpanRecord` (spans.py, what
the receivers decode), `Content` (content.py, content as fingerprints and previews), `Step` and `Finding`
(steps.py), `Trace` (trace.py), the taxonomy (modes.py), `Waste` (waste.py), `Verdict` (verdict.py), what the
processor publishes besides verdicts (published.py) and the judge's answers (judgement.py)."""
