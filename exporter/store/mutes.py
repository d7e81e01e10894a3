"""Mutes: a failure signature (a recurring problem, `collector.signature`) that people know of and do not want to be
alerted on, such as an agent that polls by design. Written to mast_mutes; the latest row of a signature says
whether it is muted now, and until when.

While a signature is muted, its findings still go to the store and still count in spend and waste (what they cost
is real), but not in mast_failure_mode_traces_total or mast_failing_traces_total, which alerts read:
mast_muted_failure_mode_traces_total counts them instead. Webhooks are not told of them. A running server reads
the store's mutes at start and every `exporters.prometheus.signature_refresh`, and at once after a mute it takes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mastwatch.collector.durations import parse_duration

from .engine import Engine
from .queries import MUTED_NOW, NO_END, TableMissing, store_tables
from .reviews import check_note, json_object
from .schema import MUTES, SIGNATURES

MUTES_PATH = "/v1/mutes"  # where a server holding the store takes them (on its metrics port)
SIGNATURE = re.compile(r"[0-9a-f]{16}")
_DAYS = re.compile(r"(\d+(?:\.\d+)?)\s*d")  # a mute is for days, which configuration durations do not write
MAX_SECONDS = 10 * 365 * 86_400  # a mute meant to last longer than this is meant to last: no end
MAX_RUNS = 1_000_000_000


class SignatureNotStored(LookupError):
    """The store has not seen the signature: nothing to mute or resolve."""


def signature_of(text: str) -> str:
    """A failure signature as the store writes it (16 lowercase hex digits); ValueError naming what is wrong."""
    signature = text.strip().lower()
    if not SIGNATURE.fullmatch(signature):
        raise ValueError(f"{text!r} is not a failure signature: 16 hexadecimal digits (`mastwatch top signatures` "
                         "lists them)")
    return signature


@dataclass(frozen=True)
class Mute:
    """Mute `signature` (`muted` false: unmute it) for `seconds`, or until it has shown in `runs` more runs, whichever
    comes first (0: no such end)."""

    signature: str
    muted: bool = True
    seconds: int = 0
    changed_by: str = ""
    note: str = ""
    runs: int = 0

    def __post_init__(self) -> None:
        """ValueError naming what is wrong; the signature is normalised (lowercase)."""
        object.__setattr__(self, "signature", signature_of(self.signature))
        if not 0 <= self.seconds <= MAX_SECONDS:
            raise ValueError(f"a mute lasts from 1 second to {MAX_SECONDS // 86_400:,} days, or until unmuted")
        if not 0 <= self.runs <= MAX_RUNS:
            raise ValueError(f"a mute lasts from 1 to {MAX_RUNS:,} runs, or until unmuted")
        if not self.muted and (self.seconds or self.runs):
            raise ValueError("an unmute takes no duration and no runs")
        check_note(self.note, self.changed_by)

    @classmethod
    def from_json(cls, body: Any) -> Mute:
        """From a JSON object: signature, and optionally muted (true), for (a duration: "7d"), runs (a number; neither:
        until unmuted), changed_by and note (ValueError)."""
        body = json_object(body, ("signature",), ("muted", "for", "runs", "changed_by", "note"))
        if not isinstance(body.get("muted", True), bool):
            raise ValueError("muted is true or false")
        runs = body.get("runs", 0)
        if isinstance(runs, bool) or not isinstance(runs, int):
            raise ValueError("runs is a whole number")
        texts = {k: v for k, v in body.items() if k not in ("muted", "runs")}
        if not all(isinstance(v, str) for v in texts.values()):
            raise ValueError("signature, for, changed_by and note are strings")
        return cls(body["signature"], body.get("muted", True), duration_seconds(body.get("for", "")),
                   body.get("changed_by", ""), body.get("note", ""), runs)

    def to_json(self) -> dict[str, Any]:
        ends = {**({"for": f"{self.seconds}s"} if self.seconds else {}), **({"runs": self.runs} if self.runs else {})}
        return {"signature": self.signature, "muted": self.muted, **ends, "changed_by": self.changed_by,
                "note": self.note}


def duration_seconds(text: str) -> int:
    """Whole seconds of a duration ("90m", "12h", "7d"; "" for none: 0); ValueError when it is not one."""
    if not text:
        return 0
    days = _DAYS.fullmatch(text.strip())
    seconds = float(days.group(1)) * 86_400 if days else parse_duration(text)
    if seconds < 1:
        raise ValueError(f"{text!r}: a mute lasts at least a second")
    return int(seconds)


INSERT = f"""\
INSERT INTO {{db}}.{MUTES} (signature, failure_mode, service, agent, muted, until, max_runs, changed_at, changed_by,
                           note)
SELECT signature, failure_mode, service, agent, {{muted:Bool}},
       if({{seconds:UInt32}} = 0, {NO_END}, now64(9) + toIntervalSecond({{seconds:UInt32}})), {{runs:UInt32}}, now64(9),
       {{changed_by:String}}, {{note:String}}
FROM {{db}}.{SIGNATURES}
WHERE signature = {{signature:String}}
LIMIT 1"""


def require(engine: Engine, database: str, table: str, signature: str) -> None:
    """TableMissing when the store has not got `table` yet; SignatureNotStored when it has seen no finding of
    `signature`."""
    if table not in store_tables(engine, database):
        raise TableMissing(f"the store has no table {table} yet: start this version's `mastwatch serve` (or demo) on "
                           "it once to upgrade it")
    if not engine.query(f"SELECT 1 FROM {database}.{SIGNATURES} WHERE signature = {{signature:String}} LIMIT 1",
                        {"signature": signature}):
        raise SignatureNotStored(f"the store has seen no finding of signature {signature}")


def set_mute(engine: Engine, database: str, mute: Mute) -> None:
    """Write `mute` (TableMissing: a store not upgraded yet; SignatureNotStored: a signature it has not seen)."""
    require(engine, database, MUTES, mute.signature)
    engine.command(INSERT.replace("{db}", database), {
        "signature": mute.signature, "muted": mute.muted, "seconds": mute.seconds, "runs": mute.runs,
        "changed_by": mute.changed_by, "note": mute.note})


def muted_signatures(engine: Engine, database: str) -> frozenset[str]:
    """The signatures muted now (none in a store without mast_mutes)."""
    if MUTES not in store_tables(engine, database):
        return frozenset()
    rows = engine.query(f"SELECT signature FROM {MUTED_NOW.replace('<which>', '1 = 1')}".replace("{db}", database))
    return frozenset(r["signature"] for r in rows)
