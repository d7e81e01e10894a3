"""Build a label folder's final.json from its two independent annotations (annotator_a.json, annotator_b.json)
and the adjudication of every disagreement (adjudication.json).

    python tests/data/adjudicate.py tests/data/tau2-bench-labels

A mode both annotators gave is kept (annotator A's reason, both annotators' evidence); a mode one of them gave
is kept when the adjudication found it present (its evidence and reason). Every disagreement must be decided.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def build(a: dict, b: dict, decisions: dict) -> dict:
    if set(a) != set(b):
        raise SystemExit("the two annotations label different runs")
    final = {}
    for run in sorted(a):
        modes_a, modes_b = a[run]["modes"], b[run]["modes"]
        modes = {}
        for code in sorted(set(modes_a) | set(modes_b)):
            if code in modes_a and code in modes_b:
                evidence = list(dict.fromkeys(modes_a[code]["evidence"] + modes_b[code]["evidence"]))
                modes[code] = {"evidence": evidence, "reason": modes_a[code]["reason"]}
                continue
            decision = (decisions.get(run) or {}).get(code)
            if decision is None:
                raise SystemExit(f"run {run}: {code} is disputed and not decided")
            if decision["present"]:
                modes[code] = {"evidence": decision["evidence"], "reason": decision["reason"]}
        doubts = " | ".join(d for d in (a[run].get("doubts"), b[run].get("doubts")) if d)
        final[run] = {"modes": modes, "outcome": a[run]["outcome"], "doubts": doubts}
    return final


def main(folder: Path) -> None:
    a = json.loads((folder / "annotator_a.json").read_text())
    b = json.loads((folder / "annotator_b.json").read_text())
    decisions = json.loads((folder / "adjudication.json").read_text())
    final = build(a, b, decisions)
    (folder / "final.json").write_text(json.dumps(final, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
