"""A partition the server cannot read gets its own error code (``serve.faults``); a file that
vanished between the partition's listing and its read (the sidecar's local retention deleting
an uploaded segment under a fetch) is read again from a new listing instead."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode

from kafkatier.serve.faults import read_or_error
from kafkatier.storage.log.directory import LogDirectory


def _partition(tmp_path: Path) -> Path:
    with LogDirectory(tmp_path / "logs") as logs:
        logs.create_partitions("t", 1)
    return tmp_path / "logs"


def test_a_file_removed_under_the_read_is_read_again(tmp_path: Path) -> None:
    log_dir = _partition(tmp_path)
    calls: list[int] = []

    def read(where: Path, topic: str, partition: int, offset: int) -> str:
        calls.append(offset)
        if len(calls) == 1:  # the listing named a segment local retention then removed
            raise FileNotFoundError(2, "No such file", str(where / "t-0" / "0.log"))
        return f"read {topic}-{partition} at {offset}"

    assert read_or_error(read, log_dir, "t", 0, 7) == "read t-0 at 7"
    assert calls == [7, 7]


def test_a_file_missing_again_is_a_storage_error_and_a_gone_partition_unknown(
    tmp_path: Path,
) -> None:
    log_dir = _partition(tmp_path)

    def missing(where: Path, topic: str, partition: int) -> str:
        raise FileNotFoundError(2, "No such file", str(where / "t-0" / "0.log"))

    def unreadable(where: Path, topic: str, partition: int) -> str:
        raise PermissionError(13, "Permission denied", str(where / "t-0" / "0.log"))

    assert read_or_error(missing, log_dir, "t", 0) == ErrorCode.kafka_storage_error
    assert read_or_error(unreadable, log_dir, "t", 0) == ErrorCode.kafka_storage_error
    assert read_or_error(missing, log_dir, "t", 1) == ErrorCode.unknown_topic_or_partition
