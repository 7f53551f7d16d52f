"""``QueuedWrites``: committed appends whose bytes a thread of the C library writes. A queued
write that fails (a full disk, real ENOSPC from a tmpfs) fails the whole queue's finish with one
error naming the file and the append's position, its file cut back to where the append began, so
that the log reopens (as after a crash) at the transaction before; queued writes that succeed
leave what written ones leave (``test_log``'s round cases, run queued too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from crash_writer import check_partition
from small_fs import fill, small_fs

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import LogWriteError
from kafkatier.storage.file_budget import FileBudget
from kafkatier.storage.log.loader import open_log
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.queued_writes import QueuedWrites
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

NOW = 1_700_000_000_000
PID = 7000


pytestmark = pytest.mark.usefixtures("c_queues")


def txn_data(seq: int, n: int = 4, size: int = 3000) -> bytearray:
    records = [Record(i, NOW + i, b"k%d" % i, b"v" * size) for i in range(n)]
    return bytearray(build_batch(records, producer_id=PID, producer_epoch=0, base_sequence=seq,
                                 transactional=True))  # fmt: skip


def new_log(root: Path, name: str, budget: FileBudget | None = None) -> Log:
    config = LogConfig.from_properties({"segment.index.bytes": "4096"}, source="test")
    return open_log(root / name, config, clock=lambda: NOW, budget=budget)


def commit(log: Log, seq: int, queued: QueuedWrites | None) -> None:
    batches = parse_incoming(txn_data(seq), AppendOrigin.CLIENT)
    log.append_committed(batches, PID, 0, timestamp=NOW, queued=queued)


@pytest.mark.parametrize("budget", [None, 2])
def test_a_queued_write_into_a_full_disk_fails_the_finish_and_is_cut_back(
    tmp_path: Path, budget: int | None
) -> None:
    """A descriptor budget of 2: at most one append stays pinned, so each is handed back as
    soon as it is written (its file unpinned, cut back on a failure), and the first failure is
    still the finish's to raise."""
    counted = None if budget is None else FileBudget(budget)
    with small_fs(tmp_path / "fs", 1024) as fs:
        logs = [new_log(fs, f"t-{p}", counted) for p in range(3)]
        for log in logs:
            log.append(txn_data(0))  # the producer's first transaction, in full
            log.write_txn_marker(PID, 0, commit=True, timestamp=NOW)
        before = [(log.log_end_offset, log.active_segment.size) for log in logs]
        fill(fs)
        with pytest.raises(LogWriteError) as caught, QueuedWrites.open(3) as queued:
            for log in logs:
                commit(log, 4, queued)  # placed at once; the thread finds no room
        error = caught.value
        assert "ENOSPC" in str(error) and str(logs[0].active_segment.log_path) in str(error)
        assert error.position == before[0][1]
        for log, (_, size) in zip(logs, before, strict=True):
            assert log.active_segment.log_path.stat().st_size == size  # cut back
            for segment in log.segments:
                segment.close_handlers()  # its state is lost: reopened as after a crash
        (fs / "filler").unlink()
        for name, (end, _) in zip(("t-0", "t-1", "t-2"), before, strict=True):
            log = open_log(fs / name, logs[0].config, clean_shutdown=False, clock=lambda: NOW)
            assert log.log_end_offset == end
            commit(log, 4, None)  # the transaction again, written now
            check_partition(log)
            log.close()


def test_a_queue_takes_one_append_a_file(tmp_path: Path) -> None:
    """The thread and the finishing caller write a queue's appends side by side, so a second
    append to a file already queued is refused (the sink's queue holds one a partition)."""
    log = new_log(tmp_path, "t-0")
    log.append(txn_data(0))
    log.write_txn_marker(PID, 0, commit=True, timestamp=NOW)
    with pytest.raises(ValueError, match="second append to descriptor"), \
            QueuedWrites.open(2) as queued:  # fmt: skip
        commit(log, 4, queued)
        commit(log, 8, queued)
