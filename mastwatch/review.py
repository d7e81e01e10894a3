"""`mastwatch review TRACE_ID FM-x.y confirmed|dismissed|missed`: a person's word on a stored run's finding, or on a
mode it shows that nothing found, written to the store (through the running server when it holds the store).
`mastwatch top reviews` adds them up per mode."""

from __future__ import annotations

import getpass
import sys

from mastwatch.config import Config
from mastwatch.exporter.store.reviews import Review


def reviewer() -> str:
    """Who runs the command, as the system names them ('' when it cannot tell)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return ""


def main_review(config: Config, trace_id: str, mode: str, verdict: str, note: str, by: str | None) -> int:
    from mastwatch import remote
    from mastwatch.exporter.store.queries import TableMissing
    from mastwatch.exporter.store.reviews import ReviewRefused, add_review

    try:
        review = Review(trace_id, mode, verdict, reviewer() if by is None else by, note)
    except ValueError as e:
        print(f"mastwatch review: {e}", file=sys.stderr)
        return 2
    status, bases = remote.on_store(config, "review",
                                    lambda engine: add_review(engine, config.exporters.store.database, review),
                                    lambda: remote.send_review(config, review)["bases"], (ReviewRefused, TableMissing))
    if status or bases is None:
        return status
    what = f"{review.failure_mode} finding ({', '.join(bases)})" if bases else f"{review.failure_mode}"
    print(f"{review.trace_id}: {what} {review.verdict}" + (f" by {review.reviewer}" if review.reviewer else ""))
    return 0
