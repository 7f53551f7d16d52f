"""What a fetch reads of a partition (serve/partition_view.py): a tailing consumer's poll of a
partition whose files are unchanged is answered from the kept bounds without opening it, and
the records appended after it are fetched at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafkatier.serve import partition_view
from kafkatier.serve.partition_view import Sources
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log import readonly
from kafkatier.storage.log.bounds_cache import SETTLED_NS, BoundsCache
from kafkatier.storage.log.loader import open_log
from kafkatier.storage.log.tail_cache import TailCache
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.record.records import iter_batches


def later() -> int:
    """A look long enough after the writes for their stamps to have settled."""
    return time.time_ns() + 2 * SETTLED_NS


@pytest.mark.parametrize("committed", [False, True])
def test_an_idle_poll_is_answered_without_opening_and_an_append_is_seen(
    tmp_path: Path, committed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = LogConfig.from_properties({"segment.index.bytes": "4096"}, source="test")
    log = open_log(tmp_path / "t-0", config)
    log.append(build_batch([Record(i, 1_000 + i, b"k", b"v") for i in range(3)]))
    opened: list[int] = []
    real = readonly.ReadOnlyPartition.__init__
    monkeypatch.setattr(readonly.ReadOnlyPartition, "__init__",
                        lambda self, *a: opened.append(1) or real(self, *a))  # fmt: skip
    scans: list[int] = []
    real_scan = partition_view.scan_bounds
    monkeypatch.setattr(partition_view, "scan_bounds",
                        lambda *a, **k: scans.append(1) or real_scan(*a, **k))  # fmt: skip
    sources = Sources(TailCache(), bounds=BoundsCache(later))
    polls = [partition_view.fetch(tmp_path, "t", 0, 3, 1 << 20, committed, True, sources)
             for _ in range(4)]  # fmt: skip
    seen = [(p.bounds.high_watermark, p.records, p.out_of_range) for p in polls]
    assert seen == [(3, b"", False)] * 4
    assert len(opened) == 1 and sources.bounds.hits == 3
    past = partition_view.fetch(tmp_path, "t", 0, 9, 1 << 20, committed, True, sources)
    assert past.out_of_range and len(opened) == 1
    replay = partition_view.fetch(tmp_path, "t", 0, 0, 1 << 20, committed, True, sources)
    assert replay.records and len(replay.records) == log.segments[-1].size  # read up to them
    replay.records.close()  # type: ignore[union-attr]
    assert len(opened) == 2 and len(scans) == 1  # opened to read, its bounds not scanned again
    log.append(build_batch([Record(i, 2_000 + i, b"k", b"w") for i in range(2)]))
    got = partition_view.fetch(tmp_path, "t", 0, 3, 1 << 20, committed, True, sources)
    assert got.bounds.high_watermark == 5 and len(opened) == 3 and len(scans) == 2
    assert got.records and hasattr(got.records, "read")
    data = got.records.read()  # type: ignore[union-attr]
    got.records.close()  # type: ignore[union-attr]
    assert [b.base_offset for b in iter_batches(data)] == [3]
    log.close()
