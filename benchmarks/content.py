"""CPU per piece of content reduced to its key and preview (`collector/model/content.py`), for 20 kB values.

  python benchmarks/content.py [--size 20000] [--repeat 5]

Three shapes of the same size: one long word, words separated by single spaces, and indented JSON (a pod list).
Each is reduced as a tool result (`Content(value, verbatim=True)`: hashed as received), as tool arguments
(`Content(value)`: canonical form, then hashed), and fingerprinted alone (SHA-1 of the text). Prints µs per value,
best of `--repeat` timings of 200 reductions each (the machine may be busy).
"""

from __future__ import annotations

import argparse
import functools
import json
import timeit

from mastwatch.collector.model.content import Content, fingerprint


def shapes(size: int) -> dict[str, str]:
    pods = [{"name": f"api-{i}", "status": "Running", "restarts": i, "node": f"node-{i % 7}"} for i in range(size)]
    text = json.dumps({"items": pods}, indent=2)
    text = text[:text.rindex("},", 0, size)] + "}]}"  # whole pods, cut to about `size`
    json.loads(text)  # still valid JSON
    return {"one word": "x" * size, "words": ("word " * size)[:size].strip(), "indented JSON": text}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20_000, help="characters per value")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"µs per value of about {args.size:,} characters, best of {args.repeat}:")
    print(f"  {'shape':>14}  {'as a result':>12}  {'as arguments':>12}  {'fingerprint':>12}")
    for name, value in shapes(args.size).items():
        runs = (functools.partial(Content, value, verbatim=True), functools.partial(Content, value),
                functools.partial(fingerprint, value))
        figures = [min(timeit.repeat(run, number=200, repeat=args.repeat)) / 200 * 1e6 for run in runs]
        print(f"  {name:>14}  {figures[0]:12.1f}  {figures[1]:12.1f}  {figures[2]:12.1f}")


if __name__ == "__main__":
    main()
