def seconds_text(ns: int, /) -> str | None:
    """`ns` nanoseconds since the epoch as seconds with nine decimals; None when negative or 2**64 or more."""
