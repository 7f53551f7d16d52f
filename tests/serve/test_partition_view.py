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


def test_a_fetch_deep_in_a_long_active_segment_starts_at_the_batch_holding_its_offset(
    tmp_path: Path,
) -> None:
    """The last segment is located through its offset index, read as a hint while the writer
    appends (``active_index``): each fetch's run starts at the batch holding the offset and
    holds whole batches, as a walk of the file from its start finds them."""
    config = LogConfig.from_properties({"index.interval.bytes": "512"}, source="test")
    log = open_log(tmp_path / "t-0", config)
    for i in range(400):
        log.append(build_batch([Record(j, 1_000, b"k%d" % i, b"v" * 90) for j in range(3)]))
    log.flush()  # the index's entries in its file, as after a sink's micro-batch
    for i in range(400, 420):  # and some not yet
        log.append(build_batch([Record(j, 1_000, b"k%d" % i, b"v" * 90) for j in range(3)]))
    data = log.segments[-1].log_path.read_bytes()
    batches = list(iter_batches(data))
    with readonly.ReadOnlyPartition(tmp_path, "t", 0) as part:
        for offset in (0, 1, 299, 300, 301, 777, 1199, 1200, 1259):
            run = partition_view.read_run(part, offset, 1260, 1_000, True)
            assert not isinstance(run, bytes)
            got = list(iter_batches(run.read()))
            run.close()
            first = next(i for i, b in enumerate(batches) if b.last_offset >= offset)
            assert [b.base_offset for b in got] == [
                b.base_offset for b in batches[first : first + len(got)]]  # fmt: skip
            assert 1 <= len(got) <= 3  # 1,000 bytes: whole batches of about 300
    log.close()


@pytest.mark.parametrize("framing", ["c", "python"])
def test_a_fetch_frames_only_what_its_span_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, framing: str
) -> None:
    """A consumer reading a long active segment from its start fetches a megabyte at a time:
    each fetch frames about that much of the file, not all of it (which made reading a
    segment of n megabytes cost n squared)."""
    from kafkatier.storage.log import tail

    if framing == "python":
        monkeypatch.setattr(tail, "native", lambda: None)
    log = open_log(tmp_path / "t-0", LogConfig.from_properties({}, source="test"))
    for i in range(8000):  # about 10 MiB
        log.append(build_batch([Record(j, 1_000, b"k%d" % i, b"v" * 400) for j in range(3)]))
    read: list[int] = []
    real = tail.LogFile.read_bytes
    monkeypatch.setattr(tail.LogFile, "read_bytes",
                        lambda self, p, n: read.append(n) or real(self, p, n))  # fmt: skip
    with readonly.ReadOnlyPartition(tmp_path, "t", 0) as part:
        offset = 0
        for _ in range(3):
            read.clear()
            run = partition_view.read_run(part, offset, 24_000, 1 << 20, True)
            assert not isinstance(run, bytes)
            got = list(iter_batches(run.read()))
            run.close()
            assert got[0].base_offset == offset and len(run) > (1 << 20) - 2_000
            assert sum(read) <= 3 << 20, sum(read)  # the span's windows, not the file's 10 MiB
            offset = got[-1].last_offset + 1
    log.close()
