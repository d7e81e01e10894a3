"""Reviews: a person's word on a stored run's finding (`confirmed`, `dismissed`) or on a mode the run shows that
nothing found (`missed`), written to mast_reviews. They measure the classifier on the runs it meets, not on a
corpus: the share of reviewed findings confirmed per mode, and the misses people report beside them
(`mastwatch top reviews`, the failure-modes dashboard).

A review names its run and mode; the run's service, agent and start are copied from its mast_traces row by the
insert itself, so review rows filter and expire as the other tables' do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mastwatch.collector.model.modes import mode_code

from .engine import Engine
from .queries import TableMissing, store_tables, trace_id_of
from .schema import REVIEWS, TABLES

VERDICTS = ("confirmed", "dismissed", "missed")
REVIEWS_PATH = "/v1/reviews"  # where a server holding the store takes them (on its metrics port)
MAX_NOTE = 2000  # characters: a line or two on why, not a report
MAX_REVIEWER = 100


def json_object(body: Any, required: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, Any]:
    """`body` when it is a JSON object with the `required` fields and no other than the `optional` ones
    (ValueError naming what is wrong)."""
    if not isinstance(body, dict):
        raise ValueError(f"the body must be a JSON object with {' and '.join(required)}")
    fields = {*required, *optional}
    unknown = sorted(set(body) - fields)
    if unknown:
        raise ValueError(f"unknown field {', '.join(unknown)}; fields: {', '.join(sorted(fields))}")
    missing = [f for f in required if f not in body]
    if missing:
        raise ValueError(f"missing field {', '.join(missing)}")
    return body


def check_note(note: str, name: str, what: str = "the name") -> None:
    """ValueError when a person's note or name (`what`) is longer than a line or two."""
    if len(note) > MAX_NOTE:
        raise ValueError(f"the note has {len(note):,} characters; at most {MAX_NOTE:,}")
    if len(name) > MAX_REVIEWER:
        raise ValueError(f"{what} has {len(name)} characters; at most {MAX_REVIEWER}")


class ReviewRefused(ValueError):
    """The review does not fit the run: a verdict that contradicts its findings."""


class RunNotStored(ReviewRefused):
    """The store has no row of the run reviewed."""


@dataclass(frozen=True)
class Review:
    trace_id: str
    failure_mode: str
    verdict: str
    reviewer: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        """ValueError naming what is wrong; the trace id and mode are normalised (hex lowercase, FM-x.y)."""
        object.__setattr__(self, "trace_id", trace_id_of(self.trace_id))
        object.__setattr__(self, "failure_mode", mode_code(self.failure_mode))
        if self.verdict not in VERDICTS:
            raise ValueError(f"{self.verdict!r} is not a verdict: one of {', '.join(VERDICTS)}")
        check_note(self.note, self.reviewer, "the reviewer's name")

    @classmethod
    def from_json(cls, body: Any) -> Review:
        """From a JSON object with trace_id, failure_mode, verdict and optionally reviewer and note (ValueError)."""
        body = json_object(body, ("trace_id", "failure_mode", "verdict"), ("reviewer", "note"))
        if not all(isinstance(v, str) for v in body.values()):
            raise ValueError("every field is a string")
        return cls(**body)


INSERT = f"""\
INSERT INTO {{db}}.{REVIEWS} ({', '.join(TABLES[REVIEWS].column_names)})
SELECT trace_id, service, agent, started_at, {{mode:String}}, {{verdict:String}}, {{bases:Array(String)}},
       {{reviewer:String}}, now64(9), {{note:String}}
FROM {{db}}.mast_traces
WHERE trace_id = {{trace_id:String}}
ORDER BY started_at
LIMIT 1"""

RUN_MODES = """\
SELECT (SELECT count() FROM {db}.mast_traces WHERE trace_id = {trace_id:String}) AS runs,
       groupArray(concat(failure_mode, ' ', basis)) AS found
FROM {db}.mast_findings
WHERE trace_id = {trace_id:String}"""


def add_review(engine: Engine, database: str, review: Review) -> list[str]:
    """Write `review`; returns the bases of the finding reviewed (none for a miss). TableMissing: a store not
    upgraded yet; RunNotStored: no such run; ReviewRefused: the verdict contradicts its findings."""
    if REVIEWS not in store_tables(engine, database):
        raise TableMissing(f"the store has no table {REVIEWS} yet: start this version's `mastwatch serve` (or demo) "
                           "on it once to upgrade it")
    params = {"trace_id": review.trace_id}
    row = engine.query(RUN_MODES.replace("{db}", database), params)[0]
    if not int(row["runs"]):
        raise RunNotStored(f"trace {review.trace_id} is not in the store")
    found: dict[str, list[str]] = {}
    for pair in row["found"]:
        mode, _, basis = pair.partition(" ")
        found.setdefault(mode, [])
        if basis not in found[mode]:
            found[mode].append(basis)
    code = review.failure_mode
    if review.verdict == "missed" and code in found:
        raise ReviewRefused(f"trace {review.trace_id} has an {code} finding: confirm or dismiss it rather than "
                            "report it missed")
    if review.verdict != "missed" and code not in found:
        shown = ", ".join(sorted(found)) or "none"
        raise ReviewRefused(f"trace {review.trace_id} has no {code} finding to be {review.verdict} (its findings: "
                            f"{shown}); a mode the run shows that nothing found is reviewed as missed")
    bases = sorted(found.get(code, []))
    engine.command(INSERT.replace("{db}", database), {
        **params, "mode": code, "verdict": review.verdict, "bases": bases, "reviewer": review.reviewer,
        "note": review.note})
    return bases
