"""``kafkatier produce``'s appends in a thread of their own (kafkatier.cli.appends.Appends): the
logs end as sequential appends leave them, results come back in order, a failed append stops
every later one and is raised, and the block ends only when the thread has let go of the logs."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest
from kafka.record import MemoryRecords

from kafkatier.cli.appends import Appends
from kafkatier.storage.arrow.log import append_arrow, encode_for
from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.log.append import LogAppendInfo
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({
        "key": [b"k%d" % i for i in range(start, start + n)],
        "value": [b"v%d" % i * 20 for i in range(start, start + n)],
    })  # fmt: skip


def _segment_bytes(log: Log) -> bytes:
    return b"".join(s.log_path.read_bytes() for s in log.segments)


def _values(log: Log) -> list[bytes]:
    records = MemoryRecords(_segment_bytes(log))  # kafka-python's parser, not ours
    values = []
    while records.has_next():
        batch = records.next_batch()
        values += [r.value for r in batch]
    return values


def _append_thread_alive() -> bool:
    return any(t.name.startswith("kafkatier-append") and t.is_alive()
               for t in threading.enumerate())  # fmt: skip


def test_the_logs_end_as_sequential_appends_leave_them(tmp_path: Path) -> None:
    chunks = [(p, _rows(i * 100, 100)) for i in range(6) for p in (0, 1)]
    with LogDirectory(tmp_path / "seq") as logs:
        logs.create_partitions("t", 2)
        for p, table in chunks:
            append_arrow(logs.logs[("t", p)], table, codec="lz4", timestamp=1)
        expected = [_segment_bytes(logs.logs[("t", p)]) for p in (0, 1)]
    done: list[tuple[int, LogAppendInfo]] = []
    with LogDirectory(tmp_path / "threaded") as logs:
        logs.create_partitions("t", 2)
        with Appends(lambda log, info: done.append((log.partition, info)), ahead_bytes=0) as a:
            start = 0
            for size in (1, 2, 3, 1, 2, 3):  # jobs of one, two or three appends
                job = chunks[start : start + size]
                start += size
                a.submit([(logs.logs[("t", p)],
                           encode_for(logs.logs[("t", p)], table, codec="lz4", timestamp=1))
                          for p, table in job])  # fmt: skip
            assert start == len(chunks)
        assert [_segment_bytes(logs.logs[("t", p)]) for p in (0, 1)] == expected
    assert [p for p, _ in done] == [p for p, _ in chunks]  # in the order given
    for p in (0, 1):
        infos = [info for q, info in done if q == p]
        assert [i.first_offset for i in infos] == [i * 100 for i in range(6)]
        assert all(i.num_records == 100 for i in infos)
    assert not _append_thread_alive()


def test_a_failed_append_stops_every_later_one_and_is_raised(tmp_path: Path) -> None:
    done: list[int] = []
    with LogDirectory(tmp_path) as logs:
        logs.create_partitions("t", 1)
        log = logs.logs[("t", 0)]
        good = [encode_for(log, _rows(i * 10, 10)) for i in range(4)]
        corrupt = encode_for(log, _rows(100, 10))
        corrupt[-1] ^= 0xFF  # the batch's CRC no longer matches: Log.append refuses it
        with (
            pytest.raises(CorruptRecordError),
            Appends(lambda _log, info: done.append(info.first_offset)) as a,
        ):
            a.submit([(log, good[0])])
            a.submit([(log, good[1]), (log, corrupt), (log, good[2])])  # fails midway
            a.submit([(log, good[3])])
        assert not _append_thread_alive()  # the block ended after the thread let go
        assert done == [0, 10]
        assert log.log_end_offset == 20  # the first records, none after the gap
        assert _values(log) == [b"v%d" % i * 20 for i in range(20)]


def test_an_error_in_the_block_ends_it_without_appending_what_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LogDirectory(tmp_path) as logs:
        logs.create_partitions("t", 1)
        log = logs.logs[("t", 0)]
        data = [encode_for(log, _rows(i * 100, 100)) for i in range(30)]
        gate = threading.Event()  # holds the first append until the block has failed
        real_append = log.append

        def gated_append(*args: object, **kwargs: object) -> LogAppendInfo:
            gate.wait(10)
            return real_append(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(log, "append", gated_append)
        with pytest.raises(KeyboardInterrupt), Appends(lambda _l, _i: None) as a:
            for chunk in data:
                a.submit([(log, chunk)])
            threading.Timer(0.3, gate.set).start()  # the exit below must wait for it
            raise KeyboardInterrupt  # the caller stops (Ctrl-C, an encoding error)
        assert gate.is_set() and not _append_thread_alive()
        assert log.log_end_offset == 100  # the append under way finished, none after it
        assert _values(log) == [b"v%d" % i * 20 for i in range(100)]
