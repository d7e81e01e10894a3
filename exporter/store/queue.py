"""The durable queue between the exporter and the store: verdict rows stay on disk until the store has them.

Append-only segment files rather than sqlite3: the exporter appends on the processor's thread, once per batch of
verdicts the processor completed, and an append here copies a framed record into the segment being written, mapped
in memory (cheaper than a write(2), and much cheaper than a sqlite3 transaction). Each record carries its
length, row count and CRC-32, so a record torn by a crash is found and cut off when the queue is opened. Positions
are byte offsets in one logical log; a segment file is named by the offset of its first record, and is deleted once
everything in it is acknowledged. The segment being written has its room allocated on disk up front (a full disk
fails there, not on a write through the map), zeroes past its last record; it is cut to its records when closed, and
at open when the process died.

Durability: `append` writes to the operating system's page cache (the shared map) before it returns, so a
killed process loses nothing; `sync` (called by the writer every flush interval) fsyncs, so a power loss
costs at most that interval.

Exactly once: the writer `seal`s a batch (a range of records) in the state file before inserting it, inserts
it with deduplication tokens derived from the queue's id and that range, then `ack`s it. After a restart the
sealed batch is read back and sent again with the same tokens, so the store drops what had already arrived.

Bounded: past `max_rows` or `max_bytes` the oldest records not being written are dropped (and reported); a record
holds the rows of a batch of verdicts (up to 256 traces), so that is what goes at once.

A new segment that cannot be made (a full disk, no file descriptor left) leaves the queue as it was: the record,
and those after it, are held in memory, in order and within the same bounds, and written at the next append or
sync once it can be made; only a `close` that still cannot write them loses them (and says so).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import json
import logging
import mmap
import os
import struct
import threading
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

HEADER: Final = struct.Struct("<III")  # payload bytes, rows, CRC-32 of the payload
_pack: Final = HEADER.pack
HEADER_BYTES: Final = HEADER.size
_crc32: Final = zlib.crc32
SEGMENT_BYTES = 64 << 20
READ_BYTES = 1 << 20


@dataclass
class Batch:
    """Sealed records [start, end): their payloads and a deduplication token per table."""

    queue_id: str
    start: int
    end: int
    rows: int
    payloads: list[bytes]
    attempts: int = 0  # inserts tried so far (1 for a batch found sealed at start: it may have arrived)

    def token(self, table: str) -> str:
        return f"{self.queue_id}-{self.start}-{self.end}-{table}"


class DurableQueue:
    def __init__(self, path: str, max_rows: int, max_bytes: int, segment_bytes: int = SEGMENT_BYTES,
                 batch_rows: int = 0, on_batch: Callable[[], object] | None = None) -> None:
        """`on_batch` is called (outside the lock) by the append after which `batch_rows` rows or more wait."""
        self.path = os.path.abspath(path)
        self.max_rows, self.max_bytes, self.segment_bytes = max_rows, max_bytes, segment_bytes
        self.batch_rows, self.on_batch = batch_rows, on_batch
        os.makedirs(self.path, exist_ok=True)
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}  # segment base -> read descriptor
        state = self._load_state()
        self.id: str = state["id"]
        self._next: int = state["next"]  # first record not yet sealed (nor dropped)
        sealed = state["sealed"]
        self._sealed: tuple[int, int] | None = tuple(sealed) if sealed else None
        self._bases = sorted(int(name[:-4]) for name in os.listdir(self.path) if name.endswith(".log"))
        self._rows = self._bytes = self._sealed_rows = self._sealed_bytes = 0
        self._end = self._recover()
        self._batch: Batch | None = None
        self._held: list[tuple[int, bytes]] = []  # records waiting for a segment that could not be made
        self._held_rows = self._held_bytes = 0
        if not self._bases:
            self._bases = [self._end]
        self._wfd, self._capacity, self._map = self._map_segment(self._bases[-1], self._end - self._bases[-1], 0)
        self._active_size = self._end - self._bases[-1]  # bytes of records in the segment being written
        self._unsynced = False
        self._collect()

    # --- state ---
    def _load_state(self) -> dict:
        try:
            with open(os.path.join(self.path, "state.json"), encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return {"id": uuid.uuid4().hex, "next": 0, "sealed": None}

    def _save_state(self) -> None:
        """Atomically, and durably: a sealed range must survive anything its insert survives."""
        tmp = os.path.join(self.path, "state.json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"id": self.id, "next": self._next, "sealed": self._sealed}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, "state.json"))

    def _segment(self, base: int) -> str:
        return os.path.join(self.path, f"{base:020d}.log")

    def _recover(self) -> int:
        """Check every pending record, cut a torn tail, count what is pending; returns the log's end."""
        start = self._sealed[0] if self._sealed else self._next
        while len(self._bases) > 1 and self._bases[1] <= start:  # wholly acknowledged segments
            os.unlink(self._segment(self._bases.pop(0)))
        end = self._bases[0] if self._bases else start
        for i, base in enumerate(self._bases):
            with open(self._segment(base), "rb") as f:
                data = f.read()
            pos = max(start - base, 0)
            while pos + HEADER_BYTES <= len(data):
                size, rows, crc = HEADER.unpack_from(data, pos)
                if not (size or rows or crc) and data.count(0, pos) == len(data) - pos:
                    break  # the zeroed room of the segment that was being written
                payload = data[pos + HEADER_BYTES:pos + HEADER_BYTES + size]
                if len(payload) < size or zlib.crc32(payload) != crc:
                    break
                self._count(base + pos, rows, HEADER_BYTES + size)
                pos += HEADER_BYTES + size
            end = base + pos
            if pos < len(data):
                if data.count(0, pos) < len(data) - pos:
                    log.warning("store queue: %d bytes of a torn record cut from %s", len(data) - pos,
                                self._segment(base))
                os.truncate(self._segment(base), pos)
                for later in self._bases[i + 1:]:
                    os.unlink(self._segment(later))
                del self._bases[i + 1:]
                break
        if self._sealed and self._sealed[1] > end:  # the sealed records were lost (not by a crash of ours)
            self._next, self._sealed = self._sealed[0], None
            self._rows += self._sealed_rows
            self._bytes += self._sealed_bytes
            self._sealed_rows = self._sealed_bytes = 0
        self._next = min(self._next, end)
        return end

    def _count(self, offset: int, rows: int, size: int) -> None:
        if self._sealed and self._sealed[0] <= offset < self._sealed[1]:
            self._sealed_rows += rows
            self._sealed_bytes += size
        elif offset >= self._next:
            self._rows += rows
            self._bytes += size

    # --- reading ---
    def _fd(self, offset: int) -> tuple[int, int]:
        """(read descriptor, base) of the segment holding the record at `offset`."""
        base = self._bases[bisect.bisect_right(self._bases, offset) - 1]
        fd = self._fds.get(base)
        if fd is None:
            fd = self._fds[base] = os.open(self._segment(base), os.O_RDONLY)
        return fd, base

    def _header(self, offset: int) -> tuple[int, int]:
        """(rows, framed size) of the record at `offset`."""
        if offset >= self._bases[-1]:  # in the segment being written: read through its map, no descriptor needed
            size, rows, _ = HEADER.unpack_from(self._map, offset - self._bases[-1])
            return rows, HEADER_BYTES + size
        fd, base = self._fd(offset)
        size, rows, _ = HEADER.unpack(os.pread(fd, HEADER_BYTES, offset - base))
        return rows, HEADER_BYTES + size

    def _records(self, start: int, stop: int, max_rows: int) -> tuple[int, int, list[bytes]]:
        """Whole records from `start` (not past `stop`) while they hold at most `max_rows` rows (at least one
        record): (end offset, rows, payloads). Reads in large chunks, not record by record; the segment being
        written is read through its map (no read into a buffer of its own first)."""
        offset, rows, payloads = start, 0, []
        buf: bytes | mmap.mmap = b""
        at = start
        header, unpack = HEADER_BYTES, HEADER.unpack_from
        while offset < stop:
            pos = offset - at
            if pos + header > len(buf):
                buf, at = self._read(offset, READ_BYTES)
                pos = offset - at
            size, n, _ = unpack(buf, pos)
            if rows and rows + n > max_rows:
                break
            framed = header + size
            if pos + framed > len(buf):
                buf, at = self._read(offset, max(READ_BYTES, framed))
                pos = offset - at
            payloads.append(buf[pos + header:pos + framed])
            rows += n
            offset += framed
        return offset, rows, payloads

    def _read(self, offset: int, size: int) -> tuple[bytes | mmap.mmap, int]:
        """Bytes from `offset` on, at least `size` of them unless the segment ends first: (a buffer, the offset of
        its first byte)."""
        if offset >= self._bases[-1]:  # in the segment being written: its map holds it (the caller holds the lock)
            return self._map, self._bases[-1]
        fd, base = self._fd(offset)
        return os.pread(fd, size, offset - base), offset

    # --- the exporter's side ---
    def append(self, rows: int, payload: bytes) -> int:
        """Write one record (the rows of a batch of verdicts); returns the rows dropped to stay within the bounds."""
        dropped = 0
        with self._lock:
            if self._held:
                self._hold(rows, payload)
                with contextlib.suppress(OSError):  # held still: told when it began
                    self._release()
            else:
                try:
                    self._put(rows, payload)
                except OSError as e:  # no new segment: the queue is as it was
                    log.warning("store queue: cannot open a new segment in %s (%s); records are held in memory "
                                "until it can", self.path, e)
                    self._hold(rows, payload)
            if self._total_rows() > self.max_rows or self._total_bytes() > self.max_bytes:
                dropped = self._trim()
            queued = self._total_rows()
        if self.on_batch is not None and queued >= self.batch_rows > queued - rows:
            self.on_batch()
        return dropped

    def _put(self, rows: int, payload: bytes) -> None:
        header = _pack(len(payload), rows, _crc32(payload))
        size = HEADER_BYTES + len(payload)
        if self._active_size + size > self._capacity:
            self._rotate(size)
        at = self._active_size
        self._map[at:at + HEADER_BYTES] = header  # the payload is not copied behind its header first
        self._map[at + HEADER_BYTES:at + size] = payload
        self._active_size = at + size
        self._end += size
        self._rows += rows
        self._bytes += size
        self._unsynced = True

    def _hold(self, rows: int, payload: bytes) -> None:
        self._held.append((rows, payload))
        self._held_rows += rows
        self._held_bytes += HEADER_BYTES + len(payload)

    def _release(self) -> None:
        """Write the held records, oldest first, while a segment can be had; raises what stopped it."""
        while self._held:
            rows, payload = self._held[0]
            self._put(rows, payload)
            self._held.pop(0)
            self._held_rows -= rows
            self._held_bytes -= HEADER_BYTES + len(payload)
        log.info("store queue: the records held in memory are written to %s", self.path)

    def _total_rows(self) -> int:
        return self._rows + self._sealed_rows + self._held_rows

    def _total_bytes(self) -> int:
        return self._bytes + self._sealed_bytes + self._held_bytes

    def _map_segment(self, base: int, used: int, room: int) -> tuple[int, int, mmap.mmap]:
        """(descriptor, capacity, map) of the segment at `base`, whose first `used` bytes are records, with room for
        `room` more bytes; on failure nothing is left open, and a file this made is removed."""
        path = self._segment(base)
        created = not os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        capacity = max(self.segment_bytes, used + room)
        try:
            try:
                os.posix_fallocate(fd, 0, capacity)
            except OSError as e:  # a file system without it (and no emulation): room reserved, not allocated
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.ftruncate(fd, capacity)
            return fd, capacity, mmap.mmap(fd, capacity)
        except BaseException:
            os.close(fd)
            if created:
                os.unlink(path)
            raise

    def _close_active(self) -> None:
        self._map.close()
        os.ftruncate(self._wfd, self._active_size)
        os.fsync(self._wfd)
        os.close(self._wfd)

    def _rotate(self, room: int) -> None:
        """A new segment for a record of `room` bytes (or more room in this one while it holds none). The new one
        is made before the old one is closed, so that a failure leaves the queue as it was."""
        if self._active_size:
            base = self._end
            fd, capacity, mapped = self._map_segment(base, 0, room)
            self._close_active()
            self._bases.append(base)
        else:
            fd, capacity, mapped = self._map_segment(self._bases[-1], 0, room)
            self._map.close()
            os.close(self._wfd)
        self._wfd, self._capacity, self._map, self._active_size = fd, capacity, mapped, 0

    def _trim(self) -> int:
        dropped = 0
        while self._next < self._end and (self._total_rows() > self.max_rows or self._total_bytes() > self.max_bytes):
            try:
                rows, size = self._header(self._next)
            except OSError as e:  # no descriptor left to read it: the held records go instead, the bounds kept
                log.warning("store queue: its oldest record cannot be read to drop it (%s)", e)
                break
            self._next += size
            self._rows -= rows
            self._bytes -= size
            dropped += rows
        while self._held and (self._total_rows() > self.max_rows or self._total_bytes() > self.max_bytes):
            rows, payload = self._held.pop(0)
            self._held_rows -= rows
            self._held_bytes -= HEADER_BYTES + len(payload)
            dropped += rows
        self._collect()
        return dropped

    def _collect(self) -> None:
        """Delete the segments that hold nothing pending (never the one being written)."""
        keep = self._sealed[0] if self._sealed else self._next
        while len(self._bases) > 1 and self._bases[1] <= keep:
            base = self._bases.pop(0)
            fd = self._fds.pop(base, None)
            if fd is not None:
                os.close(fd)
            os.unlink(self._segment(base))

    # --- the writer's side ---
    def seal(self, max_rows: int) -> Batch | None:
        """The batch to insert: the one sealed already, else up to `max_rows` rows (at least one record)
        sealed now; None when nothing is pending."""
        with self._lock:
            if self._batch is not None:
                return self._batch
            if self._sealed is None:
                if self._next == self._end:
                    return None
                start = self._next
                end, rows, payloads = self._records(start, self._end, max_rows)
                self._sealed, self._next = (start, end), end
                self._sealed_rows, self._sealed_bytes = rows, end - start
                self._rows -= rows
                self._bytes -= end - start
                self._save_state()
                attempts = 0
            else:  # sealed before a restart: its insert may have arrived
                start, end = self._sealed
                _, rows, payloads = self._records(start, end, max_rows=self._sealed_rows)
                attempts = 1
            self._batch = Batch(self.id, start, end, rows, payloads, attempts)
            return self._batch

    def ack(self, batch: Batch) -> None:
        """The batch is in the store: forget it."""
        with self._lock:
            assert self._batch is batch
            self._batch, self._sealed = None, None
            self._sealed_rows = self._sealed_bytes = 0
            self._save_state()
            self._collect()

    def sync(self) -> None:
        """Write the records held in memory, if any, then fsync what was appended (outside the lock: appends go on
        meanwhile). Raises OSError when either fails; what failed is tried again at the next call."""
        with self._lock:
            if self._held:
                self._release()
            if not self._unsynced:
                return
            fd = os.dup(self._wfd)  # may fail (no file descriptor left): the appends stay marked for the next call
            self._unsynced = False
        try:
            os.fsync(fd)
        except OSError:
            with self._lock:
                self._unsynced = True
            raise
        finally:
            os.close(fd)

    def depth(self) -> tuple[int, int]:
        """(rows, bytes) waiting, the batch being written and the records held in memory included."""
        return self._total_rows(), self._total_bytes()

    def close(self) -> None:
        with self._lock:
            if self._held:
                try:
                    self._release()
                except OSError as e:
                    log.error("store queue: %d rows held in memory are lost: no segment can be made in %s (%s)",
                              self._held_rows, self.path, e)
            self._close_active()
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            self._save_state()  # records dropped since the last seal stay dropped
