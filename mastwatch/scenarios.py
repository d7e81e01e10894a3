"""Generated labelled runs (placeholder, filled below)."""
