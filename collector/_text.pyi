def collapse(text: str, /) -> str:
    """`" ".join(text.split())`: each whitespace run as one space, none at the ends, in one pass. A text with nothing
    to collapse is returned itself."""
