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


def _failing(monkeypatch, name: str, err: int) -> dict[str, bool]:
    """Make `os.<name>` fail with `err` while the returned switch is on."""
    import errno

    real, switch = getattr(os, name), {"on": True}

    def call(*args, **kwargs):
        if switch["on"]:
            raise OSError(err, os.strerror(err))
        return real(*args, **kwargs)

    assert err in (errno.EMFILE, errno.ENOSPC)
    monkeypatch.setattr(os, name, call)
    return switch


def _segments(path) -> list[str]:
    return sorted(p for p in os.listdir(path) if p.endswith(".log"))


def test_a_new_segment_that_cannot_be_made_holds_the_records_in_memory_until_it_can(tmp_path, monkeypatch,
                                                                                     caplog) -> None:
    """No descriptor left (EMFILE) when the segment is full: the queue stays whole, the records wait in memory in
    order, count in its depth, and reach the disk at the next sync once a segment can be made."""
    import errno

    q = _queue(tmp_path, segment_bytes=100)
    q.append(1, b"a" * 60)
    before = _segments(tmp_path)
    switch = _failing(monkeypatch, "open", errno.EMFILE)
    q.append(2, b"b" * 60)  # needs a new segment: held, no exception
    q.append(3, b"c" * 10)  # fits the old segment, but must not pass the held one
    assert _segments(tmp_path) == before and "held in memory" in caplog.text
    assert q.depth()[0] == 6
    try:
        q.sync()
        raise AssertionError("sync should say the held records could not be written")
    except OSError as e:
        assert e.errno == errno.EMFILE
    switch["on"] = False
    q.sync()
    assert q.depth()[0] == 6 and len(_segments(tmp_path)) == 2
    assert q.seal(100).payloads == [b"a" * 60, b"b" * 60, b"c" * 10]
    q.close()
    q = _queue(tmp_path, segment_bytes=100)  # and after a restart
    assert q.seal(100).payloads == [b"a" * 60, b"b" * 60, b"c" * 10]


def test_a_full_disk_when_a_segment_is_made_leaves_no_file_and_loses_no_record(tmp_path, monkeypatch) -> None:
    import errno

    q = _queue(tmp_path, segment_bytes=100)
    q.append(1, b"a" * 60)
    switch = _failing(monkeypatch, "posix_fallocate", errno.ENOSPC)
    q.append(1, b"b" * 60)
    assert len(_segments(tmp_path)) == 1  # the new segment's file was removed
    switch["on"] = False
    q.append(1, b"c" * 60)  # the next append writes the held record first
    assert q.seal(100).payloads == [b"a" * 60, b"b" * 60, b"c" * 60]


def test_held_records_stay_within_the_bounds_oldest_dropped_first(tmp_path, monkeypatch) -> None:
    import errno

    q = _queue(tmp_path, segment_bytes=100, max_rows=4)
    q.append(2, b"a" * 60)
    _failing(monkeypatch, "open", errno.EMFILE)
    assert q.append(2, b"b" * 60) == 0
    assert q.append(2, b"c" * 60) == 2  # the oldest (on disk) goes first
    assert q.append(2, b"d" * 60) == 2  # then the oldest held
    assert q.depth()[0] == 4


def test_the_store_writes_rows_held_while_no_segment_could_be_made(tmp_path, monkeypatch) -> None:
    """Through the exporter: verdicts exported while the queue cannot open a segment arrive once it can; the
    export itself never fails (it runs on the processor's thread, where a failure lost the verdicts)."""
    import errno
    import time

    from mastwatch.exporter.store import StoreConfig, StoreExporter
    from tests.test_store import NO_INCREMENT, make_verdict

    store = StoreExporter(StoreConfig(path=str(tmp_path), flush_interval=0.05))
    try:
        store.export_verdicts([make_verdict(trace=1)], [NO_INCREMENT])
        assert store.flush(timeout=60)
        store.queue.segment_bytes = 1
        store.queue._capacity = store.queue._active_size  # the segment is full: the next record needs a new one
        switch = _failing(monkeypatch, "open", errno.EMFILE)
        store.export_verdicts([make_verdict(trace=2)], [NO_INCREMENT])
        store.export_verdicts([make_verdict(trace=3)], [NO_INCREMENT])
        time.sleep(0.3)  # the writer tries and backs off
        assert store._thread.is_alive() and store.queue.depth()[0] > 0
        switch["on"] = False
        assert store.flush(timeout=60)
        assert [int(r["n"]) for r in store.query("SELECT count() AS n FROM mastwatch.mast_traces")] == [3]
    finally:
        store.shutdown()
