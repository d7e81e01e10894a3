"""FM-2.5 Ignored other agent's input: a refusal gone past, a failed call sent again unchanged, someone else's record
(or one it names) used; an investigated refusal, a retry after a timeout or after the user spoke, a changed call, the
user's own record, another record chosen after the user's own was read, a refusal for no state and a change done
another way are not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import Built, Run


def generate(tag: str, read: str, rargs: Any, write: str, wargs: Any, check: str) -> Iterator[Built]:
    r = Run(f"{tag}-goes-on-after-failed-write")
    r.call(write, wargs, "error: the record is locked", error="LockedError")
    r.call("send_confirmation_email", {"to": "user@example.com"}, "sent")
    yield r.name, {"FM-2.5"}, r.answer("I sent you the confirmation.")
    r = Run(f"{tag}-investigates-failed-write")
    r.call(write, wargs, "error: the record is locked", error="LockedError").call(read, rargs, {"locked": False})
    r.call(write, wargs, {"status": "done"})
    yield r.name, set(), r.answer("It was locked briefly; the change is now done.")
    record = {"record_id": "A-2", "phone_number": "555-010-2001", "status": "active"}
    r = Run(f"{tag}-acts-on-someone-elses-record")
    r.user("Hi, my number is 555-010-2002.").call("find_records", {"owner": "me"}, {"ids": ["A-1", "A-2"]})
    r.call("get_record_details", {"id": "A-2"}, record).call("enable_feature", {"id": "A-2"}, "enabled")
    yield r.name, {"FM-1.1", "FM-2.5", "FM-3.3"}, r.answer("The feature has been enabled for your line.")
    r = Run(f"{tag}-acts-on-the-users-record")
    r.user("Hi, my number is 555-010-2001.").call("find_records", {"owner": "me"}, {"ids": ["A-1", "A-2"]})
    r.call("get_record_details", {"id": "A-2"}, record).call("enable_feature", {"id": "A-2"}, "enabled")
    yield r.name, set(), r.answer("The feature has been enabled for your line.")
    r = Run(f"{tag}-uses-what-someone-elses-record-names")  # its device looked up as the user's
    r.user("Hi, my number is 555-010-2002.").call("get_record_details", {"id": "A-2"}, {**record, "device_id": "D-2"})
    r.call("get_device_details", {"id": "D-2"}, {"device_id": "D-2", "model": "Phone X"})
    yield r.name, {"FM-2.5"}, r.answer("Please restart your phone and tell me what the screen shows.")
    r = Run(f"{tag}-acts-on-another-record-after-the-users-own")  # both lines read: the other one chosen, not mixed up
    r.user("Hi, my number is 555-010-2002.")
    own = {"record_id": "A-1", "phone_number": "555-010-2002", "status": "active"}
    r.call("get_record_details", {"id": "A-1"}, own)
    r.call("get_record_details", {"id": "A-2"}, record).call("enable_feature", {"id": "A-2"}, "enabled")
    yield r.name, set(), r.answer("The feature has been enabled on your other line, A-2.")
    r = Run(f"{tag}-change-refused-as-shown")  # the status read, the change tried anyway
    r.call("get_record_details", {"id": "A-2"}, record)
    r.call("resume_record", {"id": "A-2"}, "Error: record must be suspended to resume", error="ToolError")
    yield r.name, {"FM-2.5"}, r.answer("I'm sorry, the record cannot be resumed: it is not suspended.")
    order = {"order_id": "#A-100", "status": "pending", "items": ["red"]}
    r = Run(f"{tag}-change-refused-as-shown-then-heeded")  # heeded: the order changed the way its state allows
    r.call("get_order_details", {"order_id": "#A-100"}, order)
    r.call("exchange_order_items", {"order_id": "#A-100", "item": "blue"}, "Error: non-delivered order cannot be "
           "exchanged", error="ToolError")
    r.call("modify_order_items", {"order_id": "#A-100", "item": "blue"}, {"order_id": "#A-100", "status": "modified"})
    yield r.name, set(), r.answer("Your order #A-100 has been modified to the blue item.")
    r = Run(f"{tag}-change-refused-for-another-cause")  # the refusal names no state the record was in
    r.call("get_record_details", {"id": "A-2"}, record)
    r.call("refund_record", {"id": "A-2", "method": "card-9"},
           "Error: payment method should be the original payment method", error="ToolError")
    yield r.name, set(), r.answer("I'm sorry, the refund can only go to the original payment method.")
    r = Run(f"{tag}-refused-then-done-another-way")  # the same order changed with the tool that applies
    r.call("exchange_order_items", {"order_id": "#A-100", "item": "blue"}, "Error: the order is not delivered",
           error="ToolError")
    r.call("modify_order_items", {"order_id": "#A-100", "item": "blue"}, {"order_id": "#A-100", "status": "modified"})
    yield r.name, set(), r.answer("Your order #A-100 has been modified to the blue item.")
    r = Run(f"{tag}-refusal-explained-then-other-work")
    r.call("modify_order_items", {"order_id": "#A-100", "items": []}, "Error: the number of items should match",
           error="ToolError")
    r.answer("Unfortunately I cannot remove items from an order, only swap them. Anything else?")
    r.user("Then update my address to 1 Pine St.").call("modify_user_address", {"user_id": "u-7"},
                                                      {"user_id": "u-7", "address": "1 Pine St"})
    yield r.name, set(), r.answer("Your address has been updated to 1 Pine St.")
    r = Run(f"{tag}-resends-a-failed-call-unchanged")  # the error said what was wrong; the same call again
    r.call("submit_answer", {"answer": "flag{x"}, "Wrong answer!").call("submit_answer", {"answer": "flag{x"},
                                                                       "Wrong answer!")
    r.call("submit_answer", {"answer": "flag{x}"}, "Correct!")
    yield r.name, {"FM-2.5"}, r.answer("Solved: the answer was flag{x}.")
    r = Run(f"{tag}-resends-after-a-timeout")  # a retry may cure a timeout
    r.call(write, wargs, "error: timed out", error="TimeoutError").call(write, wargs, "error: timed out",
                                                                         error="TimeoutError")
    r.call(write, wargs, {"status": "done"})
    yield r.name, set(), r.answer("The change is done.")
    r = Run(f"{tag}-resends-after-the-user-spoke")  # the user may have changed what failed
    r.call("charge_card", {"card": "c-1", "amount": 20}, "Error: card expired", error="ToolError")
    r.answer("Your card has expired. Please update it and tell me when it's done.")
    r.user("I've updated it, please try again.").call("charge_card", {"card": "c-1", "amount": 20},
                                                      "Error: card expired", error="ToolError")
    r.answer("The card is still shown as expired. Would you like to use another card?")
    r.user("Yes, use c-2.").call("charge_card", {"card": "c-2", "amount": 20}, {"status": "charged"})
    yield r.name, set(), r.answer("Your card c-2 was charged $20.")
    r = Run(f"{tag}-resends-a-failed-call-changed")  # what the error said was acted on
    r.call("submit_answer", {"answer": "flat{x}"}, "Wrong answer!").call("submit_answer", {"answer": "flag{x}"},
                                                                        "Correct!")
    yield r.name, set(), r.answer("Solved: the answer was flag{x}.")
