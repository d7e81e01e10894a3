"""Thread names the operating system shows, so `top -H`, `ps -L` and /proc/PID/task/*/comm tell mastwatch's threads
apart (the processor, the store's writer, the gRPC workers...). Python names its threads for itself only (before
3.14), so every thread would show the process's name there."""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading

_PR_SET_NAME = 15
_OS_NAME_BYTES = 15  # Linux keeps 15 bytes and a NUL


def os_name(name: str) -> str:
    """A thread's name as the OS shows it: the `mastwatch-` prefix shortened, cut to 15 bytes."""
    if name.startswith("mastwatch-"):
        name = "mw-" + name[len("mastwatch-"):]
    return name.encode()[:_OS_NAME_BYTES].decode(errors="ignore")


def name_os_thread() -> None:
    """Give the calling thread its Python name at the OS level (Linux; elsewhere nothing happens). Called first
    in each thread mastwatch starts, and as the gRPC worker pool's initializer."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):  # no prctl in this libc: the names are a convenience
        ctypes.CDLL(None).prctl(_PR_SET_NAME, os_name(threading.current_thread().name).encode(), 0, 0, 0)
