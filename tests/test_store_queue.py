"""The durable queue: records survive reopening, a sealed batch comes back with the same tokens, a torn tail is
cut, overflow drops the oldest records not being written, and acknowledged segments are deleted."""

from __future__ import annotations

import os

from mastwatch.exporter.store.queue import HEADER, DurableQueue


def _queue(path, **limits) -> DurableQueue:
    return DurableQueue(str(path), limits.get("max_rows", 1_000), limits.get("max_bytes", 1 << 20),
                        limits.get("segment_bytes", 1 << 20))


def test_batches_are_sealed_acked_and_survive_a_restart(tmp_path) -> None:
    q = _queue(tmp_path)
    for i in range(5):
        q.append(2, f"record {i}".encode())
    batch = q.seal(max_rows=5)  # whole records only: two of two rows, not a third
    assert batch.payloads == [b"record 0", b"record 1"] and batch.rows == 4 and batch.attempts == 0
    assert q.seal(max_rows=5) is batch  # not acknowledged yet: the same batch again
    assert q.depth()[0] == 10
    q.close()

    q = _queue(tmp_path)  # as after a crash before the ack
    again = q.seal(max_rows=100)
    assert (again.payloads, again.token("t"), again.attempts) == (batch.payloads, batch.token("t"), 1)
    q.ack(again)
    rest = q.seal(max_rows=100)
    assert rest.payloads == [b"record 2", b"record 3", b"record 4"] and rest.token("t") != batch.token("t")
    q.ack(rest)
    assert q.seal(max_rows=100) is None and q.depth() == (0, 0)
    q.close()
    assert _queue(tmp_path).depth() == (0, 0)


def test_tokens_differ_between_queues(tmp_path) -> None:
    """A new queue (say, its directory was deleted) never reuses a token ClickHouse may remember."""
    a, b = _queue(tmp_path / "a"), _queue(tmp_path / "b")
    for q in (a, b):
        q.append(1, b"x")
    assert a.seal(10).token("t") != b.seal(10).token("t")


def test_a_torn_record_is_cut_at_open(tmp_path) -> None:
    q = _queue(tmp_path)
    q.append(1, b"whole")
    q.append(1, b"torn apart")
    q.close()
    (segment,) = [p for p in os.listdir(tmp_path) if p.endswith(".log")]
    size = os.path.getsize(tmp_path / segment)
    os.truncate(tmp_path / segment, size - 3)  # the process died in the middle of the second write
    q = _queue(tmp_path)
    assert q.depth() == (1, HEADER.size + 5)
    q.append(1, b"after")
    assert q.seal(10).payloads == [b"whole", b"after"]


def test_overflow_drops_the_oldest_records_but_not_the_batch_being_written(tmp_path) -> None:
    q = _queue(tmp_path, max_rows=6)
    for i in range(3):
        assert q.append(2, f"r{i}".encode()) == 0
    writing = q.seal(max_rows=2)
    assert q.append(2, b"r3") == 2  # r1 goes, r0 is being written
    assert q.append(2, b"r4") == 2  # then r2
    assert q.depth()[0] == 6
    q.ack(writing)
    assert q.seal(100).payloads == [b"r3", b"r4"]


def test_acknowledged_segments_are_deleted(tmp_path) -> None:
    q = _queue(tmp_path, segment_bytes=100)
    for i in range(20):
        q.append(1, b"%02d" % i + b"x" * 30)
    assert len([p for p in os.listdir(tmp_path) if p.endswith(".log")]) > 5
    while (batch := q.seal(3)) is not None:
        q.ack(batch)
    assert len([p for p in os.listdir(tmp_path) if p.endswith(".log")]) == 1  # the one being written
    q.close()
    q = _queue(tmp_path, segment_bytes=100)
    q.append(1, b"next")
    assert q.seal(10).payloads == [b"next"]


def test_a_killed_process_loses_nothing_and_the_room_left_is_not_a_torn_record(tmp_path, caplog) -> None:
    import signal
    import subprocess
    import sys

    script = ("import os, signal, sys\nfrom mastwatch.exporter.store.queue import DurableQueue\n"
              "q = DurableQueue(sys.argv[1], 1000, 1 << 20, 1 << 16)\n"
              "for i in range(3):\n    q.append(1, b'record %d' % i)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path)], timeout=60)
    assert killed.returncode == -signal.SIGKILL
    (segment,) = [tmp_path / p for p in os.listdir(tmp_path) if p.endswith(".log")]
    assert os.path.getsize(segment) == 1 << 16  # its room, allocated up front
    q = _queue(tmp_path)
    assert q.depth()[0] == 3 and "torn" not in caplog.text
    q.append(1, b"after")
    assert q.seal(10).payloads == [b"record 0", b"record 1", b"record 2", b"after"]
    q.close()
    assert os.path.getsize(segment) == 4 * HEADER.size + 3 * 8 + 5  # cut to its records


def test_a_record_larger_than_a_segment_gets_a_segment_of_its_own(tmp_path) -> None:
    q = _queue(tmp_path, segment_bytes=100)
    q.append(2, b"x" * 300)  # the first segment, still empty: made larger
    q.append(1, b"small")  # a new one
    q.append(1, b"y" * 300)
    q.close()
    assert len([p for p in os.listdir(tmp_path) if p.endswith(".log")]) == 3
    q = _queue(tmp_path, segment_bytes=100)
    assert q.seal(10).payloads == [b"x" * 300, b"small", b"y" * 300]


def test_a_file_system_without_fallocate_still_holds_the_queue(tmp_path, monkeypatch) -> None:
    import errno

    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    q = _queue(tmp_path, segment_bytes=100)
    for i in range(5):
        q.append(1, b"record %d" % i + b"x" * 40)
    q.close()
    q = _queue(tmp_path, segment_bytes=100)
    assert q.seal(10).payloads == [b"record %d" % i + b"x" * 40 for i in range(5)]


def test_the_writer_is_told_once_when_a_batch_of_rows_waits(tmp_path) -> None:
    told: list[int] = []
    q = DurableQueue(str(tmp_path), 1_000, 1 << 20, 1 << 20, batch_rows=5, on_batch=lambda: told.append(q.depth()[0]))
    for _ in range(4):
        q.append(2, b"x")  # 2, 4, 6 (a batch: told), 8 rows
    assert told == [6]
    q.ack(q.seal(max_rows=6))  # 2 rows left
    for _ in range(2):
        q.append(2, b"y")  # 4, 6 (told again)
    assert told == [6, 6]
    q.close()
