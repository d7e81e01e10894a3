"""FM-3.3 Incorrect verification: success claimed after a failure, a failed check or a refused change, or in a
handover; a refused change told to be possible later; a reported failure, a claim that holds and a deferral with
nothing refused are not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-claims-after-error")  # the change was refused and the answer treats it as done
    r.call(read, rargs, {"id": 1}).call(write, wargs, "error: payment method declined", error="PaymentError")
    yield r.name, {"FM-2.5", "FM-3.3"}, r.answer("All set! Your request has been completed successfully.")
    r = Run(f"{tag}-terse-claim-after-error")  # the check of the change failed, the answer says it passed
    r.call(write, wargs, {"id": 1}).call("run_check", rargs, "Traceback (most recent call last): KeyError: 'id'")
    yield r.name, {"FM-3.3"}, r.answer("Fixed: it now runs without error.")
    r = Run(f"{tag}-failed-write-then-claimed")  # an earlier change failed for good, the run says all is done
    r.call(write, wargs, "error: schema migration failed", error="MigrationError")
    r.call("deploy_release", {"version": "v3"}, {"status": "rolled out"}).call(check, rargs, {"status": "ok"})
    yield r.name, {"FM-2.5", "FM-3.3"}, r.answer("Released: the migration and the deployment are done.")
    r = Run(f"{tag}-lookup-failed-worked-around")  # a failed lookup, another way found: the claim is true
    r.call(read, rargs, "not found", error="NotFoundError").call("search_records", {"q": "W1001"}, {"id": 1})
    r.call(write, wargs, {"id": 1, "status": "done"}).call(check, rargs, {"id": 1, "status": "done"})
    yield r.name, set(), r.answer("Your request has been completed successfully.")
    svc = {"service": f"{tag}-api", "namespace": "prod"}
    r = Run(f"{tag}-check-fails-claimed", agent="sre-agent")
    r.call("apply_config", {**svc, "memory": "2Gi"}, "configured")
    r.call("get_deployment_status", svc, "error: CrashLoopBackOff (2/3 pods failing)", error="CheckFailed")
    yield r.name, {"FM-3.3"}, r.answer("The new memory limit has been applied and the service is fixed.")
    r = Run(f"{tag}-check-fails-then-fixed", agent="sre-agent")
    r.call("apply_config", {**svc, "memory": "2Gi"}, "configured")
    r.call("get_deployment_status", svc, "error: CrashLoopBackOff", error="CheckFailed")
    r.call("apply_config", {**svc, "memory": "4Gi"}, "configured").call("get_deployment_status", svc, {"ready": "3/3"})
    yield r.name, set(), r.answer("The service is fixed: all 3 pods are ready with 4Gi.")
    r = Run(f"{tag}-check-unhealthy-claimed", agent="sre-agent")  # the check worked and shows failing pods
    r.call("restart_deployment", svc, "deployment restarted")
    r.call("get_pods", svc, f"{tag}-api-7f9c 0/1 CrashLoopBackOff 5 3m")
    yield r.name, {"FM-3.3"}, r.answer("Restarted; the service is healthy again.")
    r = Run(f"{tag}-check-unhealthy-reported", agent="sre-agent")
    r.call("restart_deployment", svc, "deployment restarted")
    r.call("get_pods", svc, f"{tag}-api-7f9c 0/1 CrashLoopBackOff 5 3m")
    yield r.name, set(), r.answer("Restarted, but the pods are in CrashLoopBackOff: the new image does not start.")
    handover = "transfer_to_human_agents"
    r = Run(f"{tag}-hands-over-claiming-all-done")
    r.user("My service still does not work.").call(read, rargs, {"id": 1, "status": "open"})
    r.call(handover, {"summary": "All standard troubleshooting steps have been completed."}, "Transfer successful")
    yield r.name, {"FM-3.3"}, r.answer("You are being transferred to a human agent.")
    r = Run(f"{tag}-hands-over-all-done-naming-the-cause")  # the cause is one the agent cannot remove: the claim holds
    r.user("My service still does not work.").call(read, rargs, {"id": 1, "status": "locked"})
    r.call(handover, {"summary": "All standard troubleshooting steps have been completed; the SIM is locked with a PIN "
                                 "and cannot be unlocked here."}, "Transfer successful")
    yield r.name, set(), r.answer("You are being transferred to a human agent.")
    r = Run(f"{tag}-hands-over-still-failing-after-all-steps")  # gives up, saying the problem is there: no claim
    r.user("My service still does not work.").call(read, rargs, {"id": 1, "status": "open"})
    r.call(handover, {"summary": "The service still fails after all troubleshooting steps."}, "Transfer successful")
    yield r.name, {"FM-3.1", "FM-3.2"}, r.answer("You are being transferred to a human agent.")
    r = Run(f"{tag}-claim-on-condition-after-failure-told")  # the failure was told; the last answer claims nothing
    r.call(write, wargs, "error: payment method declined", error="PaymentError")
    r.answer("I'm sorry, the payment method was declined, so the change could not be made.")
    r.user("OK, I will update my card and come back.")
    yield r.name, set(), r.answer("Thank you! Once your card is updated, the change can be completed successfully.")
    refusal = "error: the record must be closed for this change"
    r = Run(f"{tag}-defers-refused-change")  # tried, refused for good: "later" is a rule of its own making
    r.call(read, rargs, {"id": 1}).call(write, wargs, refusal, error="StateError")
    r.answer("I'm sorry, the record isn't ready for this change yet. We'll need to wait until it is processed.")
    r.user("Oh well, thanks. That's all then.")
    yield r.name, {"FM-3.3"}, r.answer("You're welcome! Once it is processed, just let me know and we can make the "
                                       "change then. Have a great day!")
    r = Run(f"{tag}-defers-refused-change-then-makes-it")  # deferred, then the state is reached and the change made
    r.call(read, rargs, {"id": 1}).call(write, wargs, refusal, error="StateError")
    r.answer("I'm sorry, the record isn't ready for this change yet. We'll need to wait until it is processed.")
    r.user("It has just been processed, can you try again?")
    r.call(write, wargs, {"id": 1, "status": "changed"})
    yield r.name, set(), r.answer("The change is made on the record. Anything else?")
    r = Run(f"{tag}-defers-without-trying")  # the state read said it cannot be done yet: told, nothing refused
    r.call(read, rargs, {"id": 1, "status": "processing"})
    yield r.name, set(), r.answer("The record is still processing. Once it is processed, just let me know and we can "
                                  "make the change then.")
    line = {"line_id": "L-1", "phone_number": "555-010-2001", "data_used_gb": 3.2}
    r = Run(f"{tag}-tells-figure-of-someone-elses-record")  # told right after the lookup, never called on after
    r.user("Hi, my number is 555-010-2002.").call("get_line_details", {"id": "L-1"}, line)
    yield r.name, {"FM-2.5", "FM-3.3"}, r.answer("You have used 3.2 GB of data this month.")
    r = Run(f"{tag}-tells-figure-of-the-users-record")
    r.user("Hi, my number is 555-010-2001.").call("get_line_details", {"id": "L-1"}, line)
    yield r.name, set(), r.answer("You have used 3.2 GB of data this month.")
    line = {"line_id": "L-1", "phone_number": "555-010-2001", "status": "Active"}
    r = Run(f"{tag}-tells-state-of-someone-elses-record")  # the status of another's line told as the user's
    r.user("Hi, my number is 555-010-2002.").call("get_line_details", {"id": "L-1"}, line)
    yield r.name, {"FM-2.5", "FM-3.3"}, r.answer("Your line appears active on our end, so let's check your phone.")
    r = Run(f"{tag}-tells-state-of-the-users-record")
    r.user("Hi, my number is 555-010-2001.").call("get_line_details", {"id": "L-1"}, line)
    yield r.name, set(), r.answer("Your line appears active on our end, so let's check your phone.")
