"""People's decisions on a failure signature (from `top signatures`, `show` or the run page), written to the store
(through the running server when it holds the store, which applies them at once; other replicas within
`exporters.prometheus.signature_refresh`):

- `mastwatch mute SIGNATURE [--for 7d] [--runs 100]` / `unmute`: a known problem kept out of the alerting series,
  and back in (`mastwatch top mutes` lists those muted now);
- `mastwatch resolve SIGNATURE` / `reopen`: a problem marked fixed, so that a run showing it afterwards is a
  regression (mast_regressed_failure_signatures_total), and the mark taken back."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from mastwatch.config import Config
from mastwatch.exporter.store.engine import Engine
from mastwatch.exporter.store.mutes import MUTES_PATH, Mute, duration_seconds, set_mute
from mastwatch.exporter.store.resolutions import RESOLUTIONS_PATH, Resolution, set_resolution
from mastwatch.review import reviewer

Decision = TypeVar("Decision", Mute, Resolution)


def _decide(config: Config, command: str, make: Callable[[], Decision],
            write: Callable[[Engine, str, Decision], None], path: str) -> Decision | int:
    """The decision `make` builds, written to the store or sent to the server holding it; else the exit status
    after one line on stderr."""
    from mastwatch import remote
    from mastwatch.exporter.store.mutes import SignatureNotStored
    from mastwatch.exporter.store.queries import TableMissing

    try:
        decision = make()
    except ValueError as e:
        print(f"mastwatch {command}: {e}", file=sys.stderr)
        return 2

    def local(engine: Engine) -> bool:
        write(engine, config.exporters.store.database, decision)
        return True

    status, done = remote.on_store(config, command, local, lambda: bool(remote.send_decision(config, path, decision)),
                                   (SignatureNotStored, TableMissing))
    return status if status or not done else decision


def main_mute(config: Config, signature: str, muted: bool, duration: str, runs: int, note: str,
              by: str | None) -> int:
    mute = _decide(config, "mute" if muted else "unmute", lambda: Mute(
        signature, muted, duration_seconds(duration), reviewer() if by is None else by, note, runs), set_mute,
        MUTES_PATH)
    if isinstance(mute, int):
        return mute
    by_whom = f" by {mute.changed_by}" if mute.changed_by else ""
    if muted:
        ends = ([f"for {duration}"] if duration else []) + ([f"for {runs} more runs"] if runs else [])
        until = f" {' or '.join(ends)}" if ends else " until unmuted"
        print(f"{mute.signature}: muted{until}{by_whom}; its findings are stored and counted in "
              "mast_muted_failure_mode_traces_total, not in the alerting series")
    else:
        print(f"{mute.signature}: unmuted{by_whom}")
    return 0


def main_resolve(config: Config, signature: str, resolved: bool, note: str, by: str | None) -> int:
    resolution = _decide(config, "resolve" if resolved else "reopen", lambda: Resolution(
        signature, resolved, reviewer() if by is None else by, note), set_resolution, RESOLUTIONS_PATH)
    if isinstance(resolution, int):
        return resolution
    by_whom = f" by {resolution.changed_by}" if resolution.changed_by else ""
    print(f"{resolution.signature}: marked fixed{by_whom}; a run showing it again is a regression "
          "(mast_regressed_failure_signatures_total)" if resolved else f"{resolution.signature}: reopened{by_whom}")
    return 0
