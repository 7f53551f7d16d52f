"""The executor side hands Spark few, large record batches: many small partitions in one task
are decoded together and merged, in order, into batches of about ``COALESCE_BYTES``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from test_datasource import T0, legacy_wrapper

from kafkatier.sink.source import read as read_module
from kafkatier.sink.source.read import read_ranges, read_task
from kafkatier.sink.source.task import ReadTask
from kafkatier.storage.arrow.codec import encode_arrow
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


def _write(path: Path, partitions: int, per: int) -> list[ReadTask]:
    with LogDirectory(path) as logs:
        for p in range(partitions):
            log = logs.get_or_create("t", p)
            for i in range(0, per, 10):
                records = [Record(j, 1_700_000_000_000 + j, f"k{p}-{i + j}".encode(),
                                  b"v" * 50, ()) for j in range(10)]  # fmt: skip
                log.append(build_batch(records))
    return [ReadTask(str(path), "t", p, 0, per) for p in range(partitions)]


@pytest.mark.parametrize("batches", [0, 2.5, 1000])
def test_batches_are_merged_in_order_and_up_to_the_limit(tmp_path, monkeypatch, batches) -> None:
    """``batches``: the limit, in the size of one partition's batch (0: never merge)."""
    tasks = _write(tmp_path / "logs", partitions=12, per=40)
    one_by_one = [b for t in tasks for b in read_task(t)]
    limit = max(int(batches * one_by_one[0].nbytes), 1)
    monkeypatch.setattr(read_module, "COALESCE_BYTES", limit)
    merged = list(read_ranges(tasks))
    assert pa.Table.from_batches(merged).equals(pa.Table.from_batches(one_by_one))
    if batches == 0:
        assert len(merged) == len(one_by_one)
    elif batches == 1000:
        assert len(merged) == 1
    else:
        assert 1 < len(merged) < len(one_by_one)
        # decoded together: about the limit's worth of log, plus the partition that crossed it
        log_bytes = (tmp_path / "logs" / "t-0" / "00000000000000000000.log").stat().st_size
        held = [len(set(b.column("partition").to_pylist())) * log_bytes for b in merged]
        assert all(h < limit + log_bytes for h in held)


def test_legacy_batches_keep_their_place_among_merged_partitions(tmp_path, monkeypatch) -> None:
    """A log upgraded in place (legacy message sets, then v2 batches) between v2 partitions:
    rows come out in the order of reading each range alone, whatever is merged."""
    tasks = _write(tmp_path, partitions=3, per=20)
    mixed = tmp_path / "t-3"
    mixed.mkdir()
    v2 = encode_arrow(pa.table({"value": [b"new"] * 4}), base_offset=10, timestamp=T0)
    (mixed / "00000000000000000000.log").write_bytes(
        legacy_wrapper(0, 5, 1) + legacy_wrapper(5, 5, 1) + bytes(v2.data))
    tasks.insert(1, ReadTask(str(tmp_path), "t", 3, 0, 14))
    one_by_one = [b for t in tasks for b in read_task(t)]
    monkeypatch.setattr(read_module, "COALESCE_BYTES", 1 << 30)
    merged = list(read_ranges(tasks))
    assert len(merged) == 1
    assert pa.Table.from_batches(merged).equals(pa.Table.from_batches(one_by_one))
    offsets = pa.Table.from_batches(merged).filter(pc.equal(pc.field("partition"), 3))
    assert offsets.column("offset").to_pylist() == list(range(14))
