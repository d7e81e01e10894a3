"""FM-1.3 Step repetition: a lookup repeated (also after a change to another record), and its look-alikes (polling, a
retry after a timeout, a re-read after a change to what it reads)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-same-lookup")
    for _ in range(4):
        r.call(read, rargs, {"id": 1, "status": "open"})
    yield r.name, {"FM-1.3"}, r.answer("The record is open.")
    r = Run(f"{tag}-polling")  # polling a status that changes
    for status in ("pending", "pending", "running", "succeeded"):
        r.call("get_job_status", {"job": 7}, {"status": status})
    yield r.name, set(), r.answer("The job succeeded.")
    r = Run(f"{tag}-retry-after-timeout")
    r.call(read, rargs, "timeout while contacting the backend", error="TimeoutError")
    r.call(read, rargs, {"id": 1, "status": "open"})
    yield r.name, set(), r.answer("The record is open.")
    r = Run(f"{tag}-reread-after-change")
    r.call("read_file", {"path": "app.py"}, "def main(:\n    pass").call("edit_file", {"path": "app.py", "line": 1},
                                                                        "edited")
    r.call("read_file", {"path": "app.py"}, "def main():\n    pass")
    yield r.name, set(), r.answer("The syntax error is fixed; the file reads correctly now.")
    r = Run(f"{tag}-looks-up-again")
    r.call(read, rargs, {"id": 1, "status": "open"}).call("lookup_policy", {"topic": "changes"}, "allowed")
    r.call(read, rargs, {"id": 1, "status": "open"}).call("lookup_policy", {"topic": "fees"}, "none")
    yield r.name, {"FM-1.3"}, r.answer("The record is open, the change is allowed and costs nothing.")
    # a ticket read again after a change: to another ticket (work redone), or to itself (a check of the change)
    for changed, name, modes in (("T2", "looks-up-again-after-another-record-changed", {"FM-1.3"}),
                                 ("T1", "reread-after-its-record-changed", set())):
        r = Run(f"{tag}-{name}")
        r.call("get_ticket", {"ticket_id": "T1"}, {"ticket_id": "T1", "priority": "low"})
        r.call("update_ticket", {"ticket_id": changed, "owner": "ana"}, {"ticket_id": changed, "owner": "ana"})
        r.call("get_ticket", {"ticket_id": "T1"}, {"ticket_id": "T1", "priority": "low"})
        r.call("lookup_policy", {"topic": "priorities"}, "allowed")
        yield r.name, modes, r.answer(f"{changed} is assigned to Ana now.")
