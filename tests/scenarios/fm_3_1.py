"""FM-3.1 Premature termination: runs that stop after a failure, give up in a handover or end silently after a change;
recoveries, explained refusals and a handover for a real blocker do not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-stops-after-error")
    r.call(read, rargs, "record not found", error="NotFoundError")
    yield r.name, {"FM-3.1"}, r.answer("Sorry, I cannot help with that.")
    r = Run(f"{tag}-stops-after-error-text")  # the failure is only in the result text
    r.call(read, rargs, "ERROR: no data found for this id")
    yield r.name, {"FM-3.1"}, r.answer("There is nothing I can do here.")
    r = Run(f"{tag}-error-then-recovered")
    r.call(read, rargs, "record not found", error="NotFoundError").call(read, {**rargs, "alt": True}, {"id": 1})
    yield r.name, set(), r.answer("Found it under the alternative id.")
    r = Run(f"{tag}-honest-after-error")  # says it failed: ended early, no false claim
    r.call(read, rargs, {"id": 1}).call(write, wargs, "error: payment method declined", error="PaymentError")
    yield r.name, {"FM-3.1"}, r.answer("I could not complete it: the payment method was declined.")
    r = Run(f"{tag}-refused-explained")  # a change refused for good, the reason told: the objective is impossible
    r.call(read, rargs, {"id": 1}).call(write, wargs, "error: already delivered", error="NotAllowed")
    yield r.name, set(), r.answer("Sorry, it was already delivered, so it cannot be changed; a return is possible.")
    r = Run(f"{tag}-gives-up-after-timeout")  # a transient failure: a retry might have worked
    r.call(read, rargs, {"id": 1}).call(write, wargs, "upstream timed out", error="TimeoutError")
    yield r.name, {"FM-3.1"}, r.answer("Sorry, I cannot complete it right now.")
    r = Run(f"{tag}-refused-explained-user-replies")  # told why, then the user's answer closes the run
    r.call(read, rargs, {"id": 1}).call(write, wargs, "error: card expired", error="PaymentError")
    r.answer("I'm sorry, the card on file has expired. Do you have another payment method?")
    yield r.name, set(), r.answer("Of course. Once your card is updated, I'll be happy to complete it.")
    r = Run(f"{tag}-logs-show-errors")  # error lines in logs are what was read, not the read failing
    r.call("get_pod_logs", {"pod": f"{tag}-api-1"}, "ERROR smtp: dial tcp 10.0.4.17:587: connection refused")
    yield r.name, set(), r.answer("The service cannot reach its SMTP relay at 10.0.4.17:587 (connection refused).")
    r = Run(f"{tag}-logs-read-failed")  # the log read itself failed, and the run stopped there
    r.call("get_pod_logs", {"pod": f"{tag}-api-1"}, 'Error from server (NotFound): pods "api-1" not found')
    yield r.name, {"FM-3.1"}, r.answer("The pod has no logs to show.")
    r = Run(f"{tag}-gives-up-after-unavailable-raised")  # transient by its exception message only
    r.call(read, rargs, {"id": 1}).call(write, wargs, exception=(
        "requests.exceptions.HTTPError", "503 Server Error: Service Unavailable for url: https://orders.internal/v1"))
    yield r.name, {"FM-3.1"}, r.answer("Sorry, I cannot complete it right now.")
    r = Run(f"{tag}-refused-explained-raised")  # refused for good, by its exception: the user told why
    r.call(read, rargs, {"id": 1}).call(write, wargs, exception=("app.errors.NotAllowed", "already delivered"))
    yield r.name, set(), r.answer("Sorry, it was already delivered, so it cannot be changed; a return is possible.")
    handover = "transfer_to_human_agents"
    r = Run(f"{tag}-hands-over-giving-up")
    r.user("My service still does not work.").call(read, rargs, {"id": 1, "status": "open"})
    r.call(handover, {"summary": "Despite the steps tried the issue persists. Further technical support is needed."},
           "Transfer successful")
    yield r.name, {"FM-3.1", "FM-3.2"}, r.answer("You are being transferred to a human agent.")
    r = Run(f"{tag}-hands-over-a-blocker")  # a cause the agent cannot remove: handing over is right
    r.user("My service still does not work.").call(read, rargs, {"id": 1, "status": "locked"})
    r.call(handover, {"summary": "The account is locked with a PIN; it cannot be unlocked here."},
           "Transfer successful")
    yield r.name, set(), r.answer("You are being transferred to a human agent.")
    r = Run(f"{tag}-changes-then-ends-silently")  # neither checked nor told: the last turn is a bare stop token
    r.call(read, rargs, {"id": 1, "status": "open"}).call(write, wargs, {"id": 1, "status": "done"})
    yield r.name, {"FM-3.1", "FM-3.2"}, r.answer("###STOP###")
