"""Compressed batches whose every record is superseded, dropped by the rewrite unread
(``kernels.superseded``): which batches qualify, and that a compaction leaves the same log and
counts with them dropped as with every batch inflated and filtered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cleaner_fixtures import ManualClock, compact_config, open_log

from kafkatier.storage.cleaner import chunk
from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.cleaner.compressed import inflate
from kafkatier.storage.cleaner.kernels.chunks import STATS
from kafkatier.storage.cleaner.kernels.superseded import (
    NO_DROPS,
    Drops,
    count_dropped,
    droppable_gap,
    droppable_size,
    skip_superseded,
)
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.storage.wire import Codec

T0 = 1_700_000_000_000
NO_PRODUCERS = np.zeros(0, np.int64)


def batch(base: int, n: int = 4, codec: Codec = Codec.LZ4, **producer: Any) -> bytes:
    records = [Record(i, T0 + i, b"k%d" % i, b"v" * 40) for i in range(n)]
    built = bytearray(build_batch(records, codec=codec, **producer))
    built[0:8] = base.to_bytes(8, "big")  # the base offset: not under the CRC
    return bytes(built)


def marks(first: int, offsets: range, width: int = 64) -> np.ndarray:
    """``OffsetMap.superseded`` from ``first`` with ``offsets`` marked."""
    sup = np.zeros(width // 8, np.uint8)
    for offset in offsets:
        i = offset - first
        sup[i >> 3] |= 1 << (i & 7)
    return sup


def ctx(upper_bound: int = 1000, sup_start: int = 0) -> np.ndarray:
    """``ChunkFilter.ctx``: latest offset, now, delete retention, upper bound, digest, sup start."""
    return np.array([999, T0, 0, upper_bound, 0, sup_start], np.int64)


def droppable(data: bytes, sup: np.ndarray, context: np.ndarray, pids: Any = NO_PRODUCERS,
              last: Any = NO_PRODUCERS) -> int:  # fmt: skip
    buf = np.frombuffer(data, np.uint8)
    return int(droppable_size(sup, buf, 0, context, np.asarray(pids, np.int64),
                              np.asarray(last, np.int64)))  # fmt: skip


@pytest.mark.parametrize("codec", [Codec.LZ4, Codec.ZSTD, Codec.GZIP, Codec.SNAPPY])
def test_a_compressed_batch_every_offset_of_which_is_marked_can_go(codec: Codec) -> None:
    data = batch(10, codec=codec)
    assert droppable(data, marks(0, range(10, 14)), ctx()) == len(data)
    assert droppable(data, marks(8, range(10, 14)), ctx(sup_start=8)) == len(data)


TXN = {"producer_id": 3, "producer_epoch": 0, "base_sequence": 0, "transactional": True}
KEPT = [
    ("one record not marked", batch(10), range(10, 13), ctx()),
    ("a gap in the marks (a batch cleaned before has gaps)", batch(10), [10, 11, 13], ctx()),
    ("offsets before the marks' start", batch(10), range(10, 14), ctx(sup_start=11)),
    ("offsets past the marks' end", batch(60, n=8), range(60, 64), ctx()),
    ("the batch that ends the cleaned range", batch(10), range(10, 14), ctx(upper_bound=14)),
    ("not compressed", batch(10, codec=Codec.NONE), range(10, 14), ctx()),
    ("transactional", batch(10, **TXN), range(10, 14), ctx()),
    ("not held whole", batch(10)[:-1], range(10, 14), ctx()),
]


@pytest.mark.parametrize(("case", "data", "marked", "context"), KEPT)
def test_any_other_batch_is_inflated(case: str, data: bytes, marked: Any, context: Any) -> None:
    assert droppable(data, marks(0, marked), context) == 0, case


def test_a_producers_last_batch_stays_for_the_rewrite_to_keep_empty() -> None:
    data = batch(10, producer_id=7, producer_epoch=1, base_sequence=0)
    sup = marks(0, range(10, 14))
    assert droppable(data, sup, ctx(), pids=[7], last=[13]) == 0
    assert droppable(data, sup, ctx(), pids=[7], last=[20]) == len(data)  # a later one exists


def test_dropped_batches_are_counted_and_a_run_passes_over_those_between_its_batches() -> None:
    """Two droppable batches, then one to inflate, a droppable one, one to inflate, a
    droppable one: the first two are skipped (counted as read, none retained); the run from
    the third holds the third and the fifth, passing over the fourth (not inflated), and ends
    with the fifth (the sixth is the next skip's)."""
    sizes, data = [], b""
    for base in (0, 4, 8, 12, 16, 20):
        one = batch(base)
        sizes.append(len(one))
        data += one
    sup = marks(0, [*range(0, 8), *range(12, 16), *range(20, 24)])
    stats = np.zeros(STATS, np.int64)
    buf = np.frombuffer(data, np.uint8)
    after = skip_superseded(sup, buf, 0, ctx(), NO_PRODUCERS, NO_PRODUCERS, stats)
    assert after == sizes[0] + sizes[1]
    assert stats.tolist() == [8, 0, sizes[0] + sizes[1], 0, 0]
    drops = Drops(sup, ctx(), NO_PRODUCERS, NO_PRODUCERS)
    run = inflate(buf, after, 1 << 20, drops=drops)
    assert run is not None and run.last_offsets == [11, 19]
    assert run.real_starts == [after, after + sizes[2] + sizes[3]]
    assert run.real_position(run.data.shape[0]) == sum(sizes[:5])  # not past the sixth
    gap = after + sizes[2]
    assert droppable_gap(sup, buf, gap, gap + sizes[3], ctx(), NO_PRODUCERS, NO_PRODUCERS)
    assert not droppable_gap(sup, buf, after, gap + sizes[3], ctx(), NO_PRODUCERS, NO_PRODUCERS)
    count_dropped(buf, gap, gap + sizes[3], stats)
    assert stats.tolist() == [12, 0, sizes[0] + sizes[1] + sizes[3], 0, 0]
    whole = inflate(buf, after, 1 << 20)  # without the drops: every batch from there
    assert whole is not None and whole.last_offsets == [11, 15, 19, 23]


def _hot_keys_log(path: Path, clock: ManualClock, codec: Codec) -> tuple[Any, Any]:
    """Batches over eight keys (most of the older ones wholly superseded), one of them a
    producer's only batch, compressed with ``codec``."""
    log_dir, log = open_log(path, compact_config(segment_bytes=4000), clock)
    for i in range(90):
        records = [Record(j, clock.now + j, b"k%d" % ((3 * i + j) % 8), b"v%d-%d" % (i, j))
                   for j in range(4)]  # fmt: skip
        producer = {"producer_id": 9, "producer_epoch": 0, "base_sequence": 0} if i == 5 else {}
        log.append(build_batch(records, codec=codec, **producer))
        clock.now += 5
    log.roll()
    return log_dir, log


@pytest.mark.parametrize("codec", [Codec.LZ4, Codec.ZSTD])
def test_a_compaction_leaves_what_it_leaves_inflating_every_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: Codec
) -> None:
    dropped: list[int] = []

    def counting(real: Any, stats_at: int) -> Any:
        def counted(*args: Any) -> Any:
            before = int(args[stats_at][0])  # records read of the stats
            found = real(*args)
            dropped.append(int(args[stats_at][0]) - before)
            return found

        return counted

    outputs = []
    for side in ("dropping", "inflating"):
        if side == "dropping":  # where a run starts, and inside runs
            monkeypatch.setattr(chunk, "skip_superseded", counting(chunk.skip_superseded, 6))
            monkeypatch.setattr(chunk, "count_dropped", counting(chunk.count_dropped, 3))
        else:
            monkeypatch.setattr(chunk.ChunkFilter, "skip", lambda _s, _a, p: p)
            monkeypatch.setattr(chunk.ChunkFilter, "drops", lambda _s: NO_DROPS)
        clock = ManualClock()
        log_dir, log = _hot_keys_log(tmp_path / side, clock, codec)
        result = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
        batches = [RecordBatch(s.log_path.read_bytes(), 0) for s in log.segments[:1]]
        outputs.append(([s.log_path.read_bytes() for s in log.segments], result))
        log_dir.close()
        assert verify_paths([tmp_path / side]) == []
        assert batches and batches[0].producer_id == 9 and batches[0].records_count == 0
    assert sum(dropped) > 200  # records in batches dropped unread (of 360)
    assert outputs[0] == outputs[1]
