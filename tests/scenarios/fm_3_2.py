"""FM-3.2 No or incomplete verification: changes left unchecked or only acknowledged, code edited and not run, records
denied without opening them all; checked changes and a written data file are fine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    svc = {"service": f"{tag}-api", "namespace": "prod"}
    r = Run(f"{tag}-restart-unchecked", agent="sre-agent")
    r.call("get_pod_logs", svc, "OOMKilled").call("restart_deployment", svc, "deployment restarted")
    yield r.name, {"FM-3.2"}, r.answer("I restarted the deployment; the incident is handled.")
    r = Run(f"{tag}-restart-checked", agent="sre-agent")
    r.call("get_pod_logs", svc, "OOMKilled").call("restart_deployment", svc, "deployment restarted")
    r.call("get_deployment_status", svc, {"ready": "3/3"})
    yield r.name, set(), r.answer("Restarted; all 3 replicas are ready again.")
    r = Run(f"{tag}-scale-queued", agent="sre-agent")  # the change is only acknowledged (content)
    r.call("get_metrics", svc, {"cpu": 0.97}).call("set_replicas", {**svc, "replicas": 6}, "accepted: request queued")
    yield r.name, {"FM-3.2"}, r.answer("Scaled to 6 replicas.")
    edit = {"path": "app/retry.py", "old": "retries = 3", "new": "retries = 5"}
    r = Run(f"{tag}-code-edit-untested", agent="coding-agent")
    r.call("read_file", {"path": "app/retry.py"}, "retries = 3").call("edit_file", edit, "ok")
    yield r.name, {"FM-3.2"}, r.answer("Retries are now 5.")
    r = Run(f"{tag}-code-edit-tested", agent="coding-agent")
    r.call("read_file", {"path": "app/retry.py"}, "retries = 3").call("edit_file", edit, "ok")
    r.call("run_command", {"command": "pytest -q tests/test_retry.py"}, "4 passed in 0.3s")
    yield r.name, set(), r.answer("Retries are now 5; the retry tests pass.")
    r = Run(f"{tag}-data-file-written", agent="coding-agent")  # a written file is what it holds: nothing to run
    r.call("get_current_time", {"timezone": "UTC"}, {"datetime": "2026-05-20T08:00:00Z"})
    r.call("write_file", {"path": "year.txt", "text": "2026"}, "wrote 4 bytes to year.txt")
    yield r.name, set(), r.answer("I wrote the year to year.txt.")
    account = {"user_id": "u-7", "address": {"city": "New York"}, "orders": ["#A-100", "#A-101", "#A-102"]}
    r = Run(f"{tag}-denies-without-opening-all")  # one of three orders opened, then "not on file"
    r.user("Please set my address to the Seattle one from my order.").call("get_user_details", {"id": "u-7"}, account)
    r.call("get_order_details", {"order_id": "#A-100"}, {"order_id": "#A-100", "city": "New York"})
    yield r.name, {"FM-3.2"}, r.answer("I'm sorry, I don't see a Seattle address on file for your account.")
    r = Run(f"{tag}-denies-after-opening-all")
    r.user("Please set my address to the Seattle one from my order.").call("get_user_details", {"id": "u-7"}, account)
    for order in account["orders"]:
        r.call("get_order_details", {"order_id": order}, {"order_id": order, "city": "New York"})
    yield r.name, set(), r.answer("I'm sorry, I don't see a Seattle address on file for your account.")
