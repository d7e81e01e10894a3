from typing import Any

def configure(spec: dict[str, object], /) -> None:
    """The keys, operation names, kinds, Draft slots and OPTIONAL bits of genai.SPEC."""

def values(attrs: dict[str, Any], name: str, present: int, /) -> list[Any] | None:
    """The Draft's slots as genai.read fills them, for a span only the GenAI conventions read (`present`: its bits
    of genai.OPTIONAL); None when the span needs genai.read itself."""
