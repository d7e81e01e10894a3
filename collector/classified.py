"""The ids of the traces classified last, kept in a file so that a restarted process knows them: spans that arrive
for a trace the previous process classified (agents still sending across a restart) are late spans, not a new
trace counted a second time. An append-only file of 16-byte ids, rewritten with the newest `limit` when it holds
twice that many; its tail is read at start. Written after the trace's rows are handed to the exporters (the store
queues them durably)."""

from __future__ import annotations

import os
import threading

ID_BYTES = 16


class ClassifiedTraces:
    def __init__(self, path: str, limit: int) -> None:
        self.path, self.limit = path, limit
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115 (kept open for the process's life)
        self._count = os.path.getsize(path) // ID_BYTES

    def load(self) -> list[bytes]:
        """The ids kept, oldest first (at most `limit`; a torn last id from a crash is left out)."""
        with open(self.path, "rb") as f:
            data = f.read()
        whole = len(data) - len(data) % ID_BYTES
        ids = [data[i:i + ID_BYTES] for i in range(0, whole, ID_BYTES)]
        return ids[-self.limit:] if self.limit else []

    def add(self, trace_ids: list[bytes]) -> None:
        if not trace_ids or not self.limit:
            return
        with self._lock:
            self._file.write(b"".join(trace_ids))
            self._file.flush()  # to the OS: kept if the process dies
            self._count += len(trace_ids)
            if self._count >= 2 * self.limit:
                self._compact()

    def _compact(self) -> None:
        self._file.close()
        kept = self.load()
        temporary = f"{self.path}.tmp"
        with open(temporary, "wb") as f:
            f.write(b"".join(kept))
        os.replace(temporary, self.path)
        self._file = open(self.path, "ab")  # noqa: SIM115
        self._count = len(kept)

    def close(self) -> None:
        with self._lock:
            self._file.close()
