def canonical(text: str, /) -> str:
    """The one str kept for texts equal to `text` (bounded: a full table is emptied)."""

def bound(max_texts: int, /) -> None:
    """Keep at most `max_texts` texts (those kept are forgotten)."""

def kept() -> int:
    """How many texts are kept."""
