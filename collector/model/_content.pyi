def collapse(text: str, /) -> str:
    """`" ".join(text.split())`: each whitespace run as one space, none at the ends, in one pass. A text with nothing
    to collapse is returned itself."""


def is_canonical(value: object, /) -> bool:
    """Whether canonicalising leaves a parsed JSON value as it is: every string without whitespace to collapse and
    not starting with JSON, no float with an integer's value, no tuple, string keys."""
