"""FM-2.1 Conversation reset: a prompt back to its first size, a new conversation or a fresh invocation redoing earlier
work; other work after a crash and a handoff to another agent are not resets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-restarts-from-scratch")  # the prompt falls back to its first size: the dialogue restarted
    for i, tokens in enumerate((1200, 3400, 6100, 9000)):
        r.llm("", [(read, {**rargs, "n": i})], input_tokens=tokens).tool(read, {**rargs, "n": i}, {"n": i})
    r.llm("", [(read, {**rargs, "n": 0})], input_tokens=1250).tool(read, {**rargs, "n": 0}, {"n": 0})
    yield r.name, {"FM-2.1"}, r.answer("Let me start over: what can I do for you?")
    r = Run(f"{tag}-new-conversation-redo")
    r.call(read, rargs, {"id": 1}).call("lookup_policy", {"topic": "refunds"}, "30 days")
    r.conversation = f"{tag}-second-session"
    r.call(read, rargs, {"id": 1})
    yield r.name, {"FM-2.1"}, r.answer("Here is your record.")
    r = Run(f"{tag}-restarted-after-crash")  # the worker died; a fresh invocation starts the work over
    r.invoke().call(read, rargs, {"id": 1}).call("lookup_policy", {"topic": "refunds"}, "30 days")
    r.end_invocation("WorkerLostError").invoke().call(read, rargs, {"id": 1})
    r.call("lookup_policy", {"topic": "refunds"}, "30 days").answer("Refunds are possible within 30 days.")
    yield r.name, {"FM-2.1"}, r.end_invocation()
    r = Run(f"{tag}-crashed-then-other-work")  # after the crash the new invocation does not redo anything
    r.invoke().call(read, rargs, {"id": 1}).end_invocation("WorkerLostError")
    r.invoke().call("lookup_policy", {"topic": "refunds"}, "30 days").answer("Refunds are possible within 30 days.")
    yield r.name, set(), r.end_invocation()
    r = Run(f"{tag}-handoff-new-conversation")  # another agent takes over in its own conversation: no reset
    r.call(read, rargs, {"id": 1})
    r.agent, r.conversation = "billing-agent", f"{tag}-billing"
    r.call("get_invoice", {"order": 1}, {"total": 10})
    yield r.name, set(), r.answer("Your invoice total is 10.")
