"""Telemetry that records nothing, for any component's self-metrics (replay, eval, tests, benchmarks).

Plain Python (never compiled with the per-span modules): it answers every method name, and replay and eval
subclass it to keep what they need."""

from __future__ import annotations


class NullTelemetry:
    def __getattr__(self, name: str):
        # kept on the instance: later calls find it at once, not after a failed lookup and this call
        self.__dict__[name] = _ignore
        return _ignore


def _ignore(*args: object, **kwargs: object) -> None:
    return None
