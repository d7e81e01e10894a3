"""Streaming MAST classification: an engine running detector plugins over each trace's steps."""
