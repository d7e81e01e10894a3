"""What the conventions read from one span, before normalize.span makes it a Step: a slot per field, the first
value offered for a field kept (so earlier conventions win on conflicts). Slots rather than a dict: a span's
fields are offered and read once each, and a dict's lookups were a large share of the processor's work."""

from __future__ import annotations

from typing import Any, Final

KIND: Final = 0
AGENT_NAME: Final = 1
MODEL: Final = 2
PROVIDER: Final = 3
TOOL_NAME: Final = 4
TOOL_CALL_ID: Final = 5
CONVERSATION_ID: Final = 6
ARGS: Final = 7
RESULT: Final = 8
OUTPUT: Final = 9
INPUT_TOKENS: Final = 10
OUTPUT_TOKENS: Final = 11
CACHE_READ_TOKENS: Final = 12
CACHE_WRITE_TOKENS: Final = 13
FINISH_REASONS: Final = 14
ERROR_TYPE: Final = 15
USER_TEXT: Final = 16  # what the user said since the model's last turn (content capture on)
SAID: Final = 17  # the text of the model's output, without its tool calls (content capture on)
TOOL_CALLS: Final = 18  # how many tool calls the model's output asks for (content capture on)
RULES: Final = 19  # the rules the agent's instructions state (normalize.instructions)
INSTRUCTIONS: Final = 20  # the agent's instructions in lower case (normalize.instructions; content capture on)
FIELDS: Final = 21


class Draft:
    def __init__(self, present: int = 0) -> None:
        self.present = present  # the bits of genai.OPTIONAL whose keys the span has
        # FIELDS slots
        self.values: list[Any] = [None, None, None, None, None, None, None, None, None, None, None, None, None, None,
                                   None, None, None, None, None, None, None]
        self.empty = True  # nothing offered yet

    def offer(self, field: int, value: Any) -> None:
        """`value` for `field`, unless a value was offered for it before (None offers nothing)."""
        if value is not None and self.values[field] is None:
            self.values[field] = value
            self.empty = False

    def has(self, field: int) -> bool:
        return self.values[field] is not None
