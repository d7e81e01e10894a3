"""The optional judge stage: a chat model reads a compact transcript of sampled completed traces and assesses
the failure modes structure cannot settle. Off by default; it never blocks ingestion."""
