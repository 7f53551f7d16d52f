"""When the sink flushes its decided batches (``sink.flushes.Flushes``): the policy over a
clock of the test's, and a flush of a real log dir, which removes the staging files of exactly
the batches it covered."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkatier.sink import flushes
from kafkatier.sink.flushes import Flushes
from kafkatier.sink.stage import StagingPlace
from kafkatier.sink.wal import Wal
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.directory import FlushUnderWay, LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

DEFAULTS = LogConfig()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def wal(batch_id: int, staged: int = 1000, files: list[str] | None = None) -> Wal:
    """A record of one partition with one span of ``staged`` bytes."""
    return Wal(batch_id, 7, 0, files or ["f"], ["t"], [0, 0, 0, 10, 1], [0, 0, staged])


def place(tmp_path: Path, batch_id: int) -> StagingPlace:
    """A batch's place in ``tmp_path``, holding one staging file."""
    found = StagingPlace(str(tmp_path), f"kafkatier-sink.t.wal.{batch_id}-x.", own_directory=False)
    found.file("task-0-0.kbatches").write_bytes(b"staged")
    return found


def test_a_flush_waits_for_several_batches_then_is_due() -> None:
    clock = Clock()
    waiting = Flushes(clock)
    assert not waiting.due([DEFAULTS])  # nothing waits
    for batch_id in range(flushes.MOST_BATCHES - 1):
        waiting.add(wal(batch_id), StagingPlace("/nowhere", "", own_directory=False))
        assert not waiting.due([DEFAULTS])
    waiting.add(wal(99), StagingPlace("/nowhere", "", own_directory=False))
    assert waiting.due([DEFAULTS])
    assert [w.batch_id for w in waiting.deferred] == [*range(flushes.MOST_BATCHES - 1), 99]


def test_a_flush_is_due_after_a_while_or_many_bytes() -> None:
    clock = Clock()
    by_time, by_bytes = Flushes(clock), Flushes(clock)
    by_time.add(wal(1), StagingPlace("/nowhere", "", own_directory=False))
    clock.now += flushes.MOST_SECONDS - 0.5
    by_bytes.add(wal(2, flushes.MOST_BYTES - 1), StagingPlace("/nowhere", "", own_directory=False))
    assert not by_time.due([DEFAULTS]) and not by_bytes.due([DEFAULTS])
    clock.now += 0.5
    by_bytes.add(wal(3, 1), StagingPlace("/nowhere", "", own_directory=False))
    assert by_time.due([DEFAULTS]) and by_bytes.due([DEFAULTS])


@pytest.mark.parametrize("setting", ["flush.ms", "flush.messages"])
def test_a_topic_that_asks_for_flushes_gets_one_after_every_batch(setting: str) -> None:
    waiting = Flushes(Clock())
    waiting.add(wal(1), StagingPlace("/nowhere", "", own_directory=False))
    asked = LogConfig.from_properties({setting: "1000"}, source="test")
    assert not waiting.due([DEFAULTS]) and waiting.due([DEFAULTS, asked])


def test_a_flush_removes_the_staging_files_of_the_batches_it_covers(tmp_path: Path) -> None:
    """Batches 1 and 2 wait; a flush begins; batch 3 is added while it runs (as the sink's
    next batch would be only after it finished: here it stays outside the flush). Finishing
    removes the staging files of 1 and 2, and 3 still waits; ``flush_all`` then covers it."""
    logs = LogDirectory(tmp_path / "logs")
    logs.create_partitions("t", 1)
    log = logs.get("t", 0)
    assert log is not None
    log.append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
    assert log.durability.has_unflushed_data(log)
    waiting = Flushes(Clock())
    places = {n: place(tmp_path, n) for n in (1, 2, 3)}
    waiting.add(wal(1), places[1])
    waiting.add(wal(2), places[2])
    waiting.begin(logs)
    waiting.add(wal(3), places[3])
    waiting.finish()
    assert not log.durability.has_unflushed_data(log)
    assert [p.file("task-0-0.kbatches").exists() for p in places.values()] == [False, False, True]
    assert [w.batch_id for w in waiting.deferred] == [3]
    waiting.flush_all(logs)
    assert not places[3].file("task-0-0.kbatches").exists() and waiting.deferred == []
    logs.close()


def test_a_failed_flush_leaves_its_batches_waiting(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path / "logs")
    waiting, staged = Flushes(Clock()), place(tmp_path, 1)
    waiting.add(wal(1), staged)

    def broken(then: object = None) -> FlushUnderWay:
        def finish() -> None:
            raise OSError("disk gone")

        return FlushUnderWay(finish, lambda: None)

    logs.flush_data_later = broken  # type: ignore[method-assign,assignment]
    waiting.begin(logs)
    with pytest.raises(OSError, match="disk gone"):
        waiting.finish()
    assert [w.batch_id for w in waiting.deferred] == [1]
    assert staged.file("task-0-0.kbatches").exists()
    logs.close()
