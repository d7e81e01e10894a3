"""Resolutions: a failure signature people fixed (`mastwatch resolve`, once the agent's prompt, tool or model change
shipped). A run that shows it again afterwards is a regression: each process counts it once in
mast_regressed_failure_signatures_total (MastFailureSignatureRegressed alerts), and `top signatures`, `show` and the
run page say so. `mastwatch reopen` takes a resolution back. Written to mast_resolutions; the latest row of a
signature decides. A running server reads them with the mutes: at start, every
`exporters.prometheus.signature_refresh`, and at once after one it takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .engine import Engine
from .mutes import require, signature_of
from .queries import LATEST_RESOLUTIONS, store_tables
from .reviews import check_note, json_object
from .schema import RESOLUTIONS, SIGNATURES

RESOLUTIONS_PATH = "/v1/resolutions"  # where a server holding the store takes them (on its metrics port)


@dataclass(frozen=True)
class Resolution:
    """`signature` fixed (`resolved` false: reopened)."""

    signature: str
    resolved: bool = True
    changed_by: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        """ValueError naming what is wrong; the signature is normalised (lowercase)."""
        object.__setattr__(self, "signature", signature_of(self.signature))
        check_note(self.note, self.changed_by)

    @classmethod
    def from_json(cls, body: Any) -> Resolution:
        """From a JSON object: signature, and optionally resolved (true), changed_by and note (ValueError)."""
        body = json_object(body, ("signature",), ("resolved", "changed_by", "note"))
        if not isinstance(body.get("resolved", True), bool):
            raise ValueError("resolved is true or false")
        if not all(isinstance(v, str) for k, v in body.items() if k != "resolved"):
            raise ValueError("signature, changed_by and note are strings")
        return cls(body["signature"], body.get("resolved", True), body.get("changed_by", ""), body.get("note", ""))

    def to_json(self) -> dict[str, Any]:
        return {"signature": self.signature, "resolved": self.resolved, "changed_by": self.changed_by,
                "note": self.note}


INSERT = f"""\
INSERT INTO {{db}}.{RESOLUTIONS} (signature, failure_mode, service, agent, resolved, changed_at, changed_by, note)
SELECT signature, failure_mode, service, agent, {{resolved:Bool}}, now64(9), {{changed_by:String}}, {{note:String}}
FROM {{db}}.{SIGNATURES}
WHERE signature = {{signature:String}}
LIMIT 1"""


def set_resolution(engine: Engine, database: str, resolution: Resolution) -> None:
    """Write `resolution` (TableMissing: a store not upgraded yet; SignatureNotStored: a signature it has not
    seen)."""
    require(engine, database, RESOLUTIONS, resolution.signature)
    engine.command(INSERT.replace("{db}", database), {
        "signature": resolution.signature, "resolved": resolution.resolved, "changed_by": resolution.changed_by,
        "note": resolution.note})


def resolved_signatures(engine: Engine, database: str) -> dict[str, int]:
    """The signatures resolved now, with when (nanoseconds since the epoch); none in a store without the table."""
    if RESOLUTIONS not in store_tables(engine, database):
        return {}
    rows = engine.query(f"SELECT signature, toUnixTimestamp64Nano(changed) AS ns FROM ({LATEST_RESOLUTIONS}) "
                        "WHERE is_resolved".replace("{db}", database))
    return {r["signature"]: int(r["ns"]) for r in rows}
