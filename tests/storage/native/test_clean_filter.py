"""The cleaner's rewrite in C (``storage/native/clean_filter.c``) against numba's
``filter_chunk``: for the same buffer, map and context, the same stopping point, output bytes,
batch infos and counters; and the rebuilt batches are valid for kafka-python's parser (an
outside reader)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from kafka.record.default_records import DefaultRecordBatch as KpBatch

from kafkatier.storage import native
from kafkatier.storage.cleaner import compressed
from kafkatier.storage.cleaner.chunk import ChunkFilter
from kafkatier.storage.cleaner.kernels.chunks import INFO, STATS, filter_chunk, map_chunk
from kafkatier.storage.cleaner.kernels.offset_map import MURMUR3, OffsetMap
from kafkatier.storage.native import clean_filter as native_filter
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import Codec, TimestampType
from tests.storage.native.test_kernels import needs_cc
from tests.storage.native.test_offset_map import NOW, _buffer, _records

pytestmark = needs_cc
DAY = 86_400_000


def _mixed(seed: int) -> bytearray:
    """Plain batches of every kind the rewrite treats apart: tombstones (records without a
    value, in ``_records``), log-append-time batches, batches already carrying a delete horizon,
    idempotent producers' batches."""
    rng = random.Random(seed)
    out, offset = bytearray(), 0
    for i in range(60):
        n = rng.randrange(1, 25)
        kind = i % 4
        records = _records(rng, offset, n, 50)
        if kind == 1:
            out += build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME,
                               log_append_time=NOW + 5)  # fmt: skip
        elif kind == 2:
            out += build_batch(records, delete_horizon_ms=NOW + rng.choice([-DAY, DAY]))
        elif kind == 3:
            out += build_batch(records, producer_id=100 + i % 3, producer_epoch=0,
                               base_sequence=offset)  # fmt: skip
        else:
            out += build_batch(records)
        offset += n
    return out


def _mapped(buf: bytearray) -> OffsetMap:
    """The map of every record of ``buf`` (numba's build: the same map for both rewrites)."""
    om = OffsetMap(256 * 1024, 0.9, MURMUR3)
    om.clear(max_keys=4_000, start=0)
    array = np.frombuffer(bytes(buf), np.uint8)
    _, _, om.size, om.latest_offset = map_chunk(om.table, array, 0, 0, 0, om.max_desired_size,
                                                -1, MURMUR3, om.superseded, 0)  # fmt: skip
    return om


Run = tuple[tuple[int, int, int], bytes, list[list[int]], list[int]]


def _rewrite(kind: str, om: OffsetMap, buf: bytearray, ctx: list[int], producers: dict[int, int],
             out_bytes: int = 1 << 20, rows: int = 4096, capacity: int = 1024) -> Run:  # fmt: skip
    """One rewrite by ``kind``: (stop, bytes, rows), the bytes, the infos and the counters."""
    array = np.frombuffer(bytes(buf), np.uint8)
    context = np.array(ctx, np.int64)
    pids = np.array(sorted(producers), np.int64)
    last = np.array([producers[p] for p in sorted(producers)], np.int64)
    out = np.zeros(out_bytes, np.uint8)
    infos = np.zeros((rows, INFO), np.int64)
    stats = np.zeros(STATS, np.int64)
    if kind == "numba":
        found = filter_chunk(om.table, om.superseded, array, 0, context, pids, last, out, infos,
                             stats)  # fmt: skip
        result = (int(found[0]), int(found[1]), int(found[2]))
    else:
        assert native.native() is not None and native_filter.available()
        kernel = native_filter.PlainFilter(om.table, om.superseded, context, pids, last, out,
                                           infos, stats)  # fmt: skip
        kernel.grow(capacity)
        result = kernel(array, 0)
    return result, out[: result[1]].tobytes(), infos[: result[2]].tolist(), stats.tolist()


def _same(buf: bytearray, ctx: list[int], producers: dict[int, int] | None = None,
          **kw: int) -> Run:  # fmt: skip
    om = _mapped(buf)
    ctx = [om.latest_offset if ctx[0] is None else ctx[0], *ctx[1:]]
    numba_run = _rewrite("numba", om, buf, ctx, producers or {}, **kw)
    c_run = _rewrite("c", om, buf, ctx, producers or {}, **kw)
    assert c_run == numba_run
    return c_run


def _ctx(latest: int | None = None, now: int = NOW, retention: int = DAY,
         upper: int = 1 << 40) -> list[int]:  # fmt: skip
    return [latest, now, retention, upper, MURMUR3, 0]  # type: ignore[list-item]


def _parsed(data: bytes, infos: list[list[int]]) -> int:
    """The records kafka-python reads from the written batches (each checked by its CRC)."""
    records = 0
    for at, size, _, _ in infos:
        batch = KpBatch(data[at : at + size])
        assert batch.validate_crc()
        records += len(list(batch))
    return records


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("now", [NOW, NOW + 2 * DAY])  # tombstones kept, then expired
def test_the_c_rewrite_gives_numbas_bytes(seed: int, now: int) -> None:
    buf = _mixed(seed)
    (stop, _, rows), data, infos, stats = _same(buf, _ctx(now=now))
    assert stop == len(buf) and rows > 0 and stats[1] < stats[0]  # some records went
    assert _parsed(data, infos) == stats[1]


def test_records_past_the_maps_latest_offset_stay() -> None:
    buf = _buffer(4, batches=30)
    _, data, infos, stats = _same(buf, _ctx(latest=200))
    assert _parsed(data, infos) == stats[1]


def test_an_empty_batch_that_must_stay_is_left_to_the_python_path() -> None:
    buf = _mixed(2)
    last_of = {100 + i % 3: -1 for i in range(3)}  # no producer's last batch: all may go
    full = _same(buf, _ctx(), last_of)
    ended = _same(buf, _ctx(upper=1))  # the range ends after offset 0: that batch must stay
    assert ended[0][0] <= full[0][0]


@pytest.mark.parametrize(
    ("out_bytes", "rows", "capacity"), [(3_000, 4096, 1024), (1 << 20, 3, 1024), (1 << 20, 4096, 2)]
)
def test_both_stop_where_the_output_or_the_scratch_runs_out(out_bytes: int, rows: int,
                                                            capacity: int) -> None:  # fmt: skip
    buf = _mixed(7)
    om = _mapped(buf)
    ctx = [om.latest_offset, NOW, DAY, 1 << 40, MURMUR3, 0]
    numba_run = _rewrite("numba", om, buf, ctx, {}, out_bytes=out_bytes, rows=rows)
    c_run = _rewrite("c", om, buf, ctx, {}, out_bytes=out_bytes, rows=rows, capacity=capacity)
    if capacity >= 1024:
        assert c_run == numba_run and c_run[0][0] < len(buf)
    else:  # the C rewrite stops at its first batch too large for the scratch, having grown it
        assert c_run[0][0] <= numba_run[0][0]
        assert c_run[1] == numba_run[1][: len(c_run[1])]


def test_both_stop_at_a_batch_that_is_not_plain_or_does_not_scan() -> None:
    good = _buffer(5, batches=8)
    rng = random.Random(5)
    bad = bytearray(build_batch(_records(rng, 700, 4, 50)))
    bad[61] = 0xFF
    for other in (build_batch(_records(rng, 700, 4, 50), codec=Codec.LZ4), bytes(bad)):
        buf = good + other + _buffer(6, batches=2)
        assert _same(buf, _ctx())[0][0] == len(good)


def test_the_cleaners_filter_takes_the_c_rewrite(monkeypatch: pytest.MonkeyPatch) -> None:
    om = _mapped(_buffer(1))
    for kind, expected in (("native", native_filter.PlainFilter), ("numba", None)):
        monkeypatch.setenv(native.KERNELS_ENV, kind)
        chosen = ChunkFilter(om, (NOW, DAY, 1 << 40), {}, 1 << 16)._filter
        assert isinstance(chosen, native_filter.PlainFilter) == (expected is not None)


def test_arithmetic_wraps_as_numbas() -> None:
    """A delete retention near Long.MAX_VALUE (the horizon wraps, as Java's long does) and a
    corrupt base offset near it: both builds wrap alike."""
    buf = _mixed(4)
    _same(buf, _ctx(retention=(1 << 63) - 1))
    high = bytearray(buf)
    high[0:8] = ((1 << 63) - 5).to_bytes(8, "big")  # the first batch's base offset
    om = _mapped(buf)
    ctx = [om.latest_offset, NOW, DAY, 1 << 40, MURMUR3, 0]
    assert _rewrite("c", om, high, ctx, {}) == _rewrite("numba", om, high, ctx, {})


@pytest.mark.parametrize("seed", range(40))
def test_corrupt_bytes_stop_both_rewrites_alike(seed: int) -> None:
    """Random bytes of the batches overwritten after the map was built from the good ones: the
    C rewrite reads and writes nothing outside its buffers and gives numba's output."""
    rng = random.Random(seed)
    good = _mixed(seed % 5)
    om = _mapped(good)
    bad = bytearray(good)
    for _ in range(rng.randrange(1, 6)):
        bad[rng.randrange(len(bad))] = rng.randrange(256)
    ctx = [om.latest_offset, NOW, DAY, 1 << 40, MURMUR3, 0]
    assert _rewrite("c", om, bad, ctx, {}) == _rewrite("numba", om, bad, ctx, {})


def _superseded_pair(gap: bool) -> bytearray:
    """Batch A (offsets 0-9, or 0-4 and 6-10 with ``gap``), batch B after it with A's keys (so
    every record of A is superseded), then another batch."""
    first = [Record(i + (gap and i >= 5), NOW, b"k%d" % i, b"v", ()) for i in range(10)]
    second = [Record(11 + i, NOW, b"k%d" % i, b"w", ()) for i in range(10)]
    rng = random.Random(3)
    return bytearray(build_batch(first) + build_batch(second)
                     + build_batch(_records(rng, 21, 5, 50)))  # fmt: skip


@pytest.mark.parametrize(("gap", "upper", "passed"), [
    (False, 1 << 40, True),  # every offset marked: dropped without a scan
    (True, 1 << 40, False),  # a gap: offset 5 unmarked, the records are scanned
    (False, 10, False),  # A ends the cleaned range: kept empty, by the Python path
])  # fmt: skip
def test_a_wholly_superseded_batch_goes_unscanned(gap: bool, upper: int, passed: bool) -> None:
    """Batch A's records made unscannable after the map was built: where every offset of A is
    marked superseded (and A need not stay empty) both rewrites pass it, counting its records
    read and keeping none; otherwise both stop at it (their callers then read it and report
    it)."""
    good = _superseded_pair(gap)
    om = _mapped(good)
    bad = bytearray(good)
    bad[61] = 0xFF  # A's first record's length: a varint that never ends
    ctx = [om.latest_offset, NOW, DAY, upper, MURMUR3, 0]
    c_run = _rewrite("c", om, bad, ctx, {})
    assert c_run == _rewrite("numba", om, bad, ctx, {})
    (stop, _, rows), _, infos, stats = c_run
    if passed:
        assert stop == len(bad) and rows == 2 and infos[0][2] == 20  # B then the third batch
        assert stats[0] == 25 and stats[2] == len(bad)  # A's 10 records read, its bytes
        assert stats[1] == 15  # B's 10 and the third batch's 5: none of A's
    else:
        assert (stop, rows, stats[0]) == (0, 0, 0)


def test_seal_writes_each_batchs_crc(monkeypatch: pytest.MonkeyPatch) -> None:
    """``seal`` gives the batches at the infos' rows their CRC-32C (as built: kafka-python reads
    them back), and it is what the cleaner's deflates use where the library is built."""
    good = bytes(_buffer(3, batches=12))
    rows, pos = [], 0
    while pos < len(good):
        size = 12 + int.from_bytes(good[pos + 8 : pos + 12], "big")
        rows.append([pos, size, 0, 0])
        pos += size
    buf = np.frombuffer(good, np.uint8).copy()
    for position, _, _, _ in rows:
        buf[position + 17 : position + 21] = 0
    seal = compressed._sealer()
    assert seal is native_filter.seal
    seal(buf, np.array(rows, np.int64))
    assert buf.tobytes() == good
    assert _parsed(good, rows) > 0
    monkeypatch.setenv(native.KERNELS_ENV, "numba")
    assert compressed._sealer() is None  # numba's CRC in deflate_runs then
