"""`mastwatch mute SIGNATURE [--for 7d] [--runs 100]` and `mastwatch unmute SIGNATURE`: a known problem (a failure
signature, from `top signatures`, `show` or the run page) kept out of the alerting series, and back in. Written to
the store (through the running server when it holds the store, which then applies it at once; other replicas
within `exporters.prometheus.signature_refresh`). `mastwatch top mutes` lists the signatures muted now."""

from __future__ import annotations

import sys

from mastwatch.config import Config
from mastwatch.exporter.store.engine import Engine
from mastwatch.exporter.store.mutes import Mute, duration_seconds
from mastwatch.review import reviewer


def main_mute(config: Config, signature: str, muted: bool, duration: str, runs: int, note: str,
              by: str | None) -> int:
    from mastwatch import remote
    from mastwatch.exporter.store.mutes import SignatureNotStored, set_mute
    from mastwatch.exporter.store.queries import TableMissing

    command = "mute" if muted else "unmute"
    try:
        mute = Mute(signature, muted, duration_seconds(duration), reviewer() if by is None else by, note, runs)
    except ValueError as e:
        print(f"mastwatch {command}: {e}", file=sys.stderr)
        return 2

    def local(engine: Engine) -> bool:
        set_mute(engine, config.exporters.store.database, mute)
        return True

    status, done = remote.on_store(config, command, local, lambda: bool(remote.send_mute(config, mute)),
                                   (SignatureNotStored, TableMissing))
    if status or not done:
        return status
    if muted:
        ends = ([f"for {duration}"] if duration else []) + ([f"for {runs} more runs"] if runs else [])
        until = f" {' or '.join(ends)}" if ends else " until unmuted"
        print(f"{mute.signature}: muted{until}" + (f" by {mute.changed_by}" if mute.changed_by else "")
              + "; its findings are stored and counted in mast_muted_failure_mode_traces_total, not in the "
              "alerting series")
    else:
        print(f"{mute.signature}: unmuted" + (f" by {mute.changed_by}" if mute.changed_by else ""))
    return 0
