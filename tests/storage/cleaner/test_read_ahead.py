"""The cleaner's read-ahead (``storage.cleaner.read_ahead``): compactions byte for byte the same
with and without its thread, its chunks the store's bytes whatever the walk asks, its inflated
runs ``compressed.inflate``'s, its thread gone when the walk is, a read error the walk's own."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cleaner_fixtures import ManualClock, compact_config, open_log

from kafkatier.storage.cleaner import chunk, inflated_cache, read_ahead
from kafkatier.storage.cleaner import fast as cleaner_fast
from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.cleaner.compressed import Inflated, inflate
from kafkatier.storage.cleaner.kernels.ahead import NO_CACHE, batches_end, inflate_chunk
from kafkatier.storage.cleaner.kernels.codec_runs import META, ROOM
from kafkatier.storage.cleaner.kernels.superseded import NO_DROPS, Drops
from kafkatier.storage.cleaner.kernels.zstd_contexts import ZstdContexts
from kafkatier.storage.cleaner.read_ahead import Chunks
from kafkatier.storage.cleaner.segment_store import SegmentInfo
from kafkatier.storage.errors import InvalidRecordError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.record.builder import build_batch, build_control_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.storage.wire import Codec, ControlType

NOW = 1_700_000_000_000
CODECS = [Codec.NONE, Codec.LZ4, Codec.ZSTD, Codec.LZ4, Codec.ZSTD, Codec.GZIP]
PID = 9


def _records(rng: random.Random, count: int) -> list[Record]:
    """Keys from 300 (a few null), values of 20-400 random bytes (a few tombstones)."""
    return [Record(i, NOW + i, None if rng.random() < 0.03 else b"key-%d" % rng.randrange(300),
                   None if rng.random() < 0.05 else rng.randbytes(rng.randrange(20, 400)))
            for i in range(count)]  # fmt: skip


def _big_log(path: Path, slots: int, **settings: object) -> tuple[LogDirectory, Log]:
    """One segment of about 2 MiB (several read-ahead chunks): batches of every codec, a
    transactional producer's batches with COMMIT and ABORT markers, and a batch of 600 KiB of
    records (larger than a chunk: the walk grows its chunk for it)."""
    config = compact_config(segment_bytes=3 << 20, delete_retention_ms=100,
                            log_cleaner_dedupe_buffer_size=24 * slots, **settings)  # fmt: skip
    log_dir, log = open_log(path, config, ManualClock())
    rng = random.Random(5)
    sequence = 0
    for i in range(2400):
        codec = CODECS[i % len(CODECS)]
        if i % 97 == 5:
            records = _records(rng, 4)
            log.append(build_batch(records, codec=codec, producer_id=PID, producer_epoch=0,
                                   base_sequence=sequence, transactional=True))  # fmt: skip
            sequence += len(records)
            kind = ControlType.COMMIT if i % 2 else ControlType.ABORT
            marker = build_control_batch(kind, producer_id=PID, producer_epoch=0, timestamp=NOW)
            log.append(marker, origin=AppendOrigin.COORDINATOR)
        elif i == 1200:
            big = [Record(j, NOW, b"key-%d" % j, rng.randbytes(60_000)) for j in range(10)]
            log.append(build_batch(big, codec=Codec.LZ4))
        else:
            log.append(build_batch(_records(rng, rng.randrange(1, 12)), codec=codec))
    log.roll()
    return log_dir, log


@pytest.mark.parametrize("slots", [200, 20_000])
def test_compaction_is_the_same_with_and_without_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slots: int, small_chunks: int
) -> None:
    """200 slots: several passes, each map filling mid-segment (the walk stops, and so does the
    thread). 20,000: one pass with the superseded bits (the thread leaves droppable batches
    compressed, and runs pass over them). Both compact twice, the second time past the delete
    horizon. The last side drops nothing unread: every batch inflated and filtered."""
    outputs = []
    for ahead, share, drops in ((True, 1.0, True), (True, 0.4, True), (False, 1.0, True),
                                (False, 1.0, False)):  # fmt: skip
        monkeypatch.setattr(read_ahead, "ENABLED", ahead)
        monkeypatch.setattr(read_ahead, "FIRST_SHARE", share)  # 0.4: the walk inflates the rest
        monkeypatch.setattr(read_ahead, "STEP", 0.0 if share < 1 else read_ahead.STEP)
        if not drops:
            monkeypatch.setattr(chunk.ChunkFilter, "skip", lambda _s, _a, p: p)
            monkeypatch.setattr(chunk.ChunkFilter, "drops", lambda _s: NO_DROPS)
        log_dir, log = _big_log(tmp_path / f"{ahead}-{share}-{drops}", slots)
        assert log.segments[0].size > 20 * max(small_chunks, 1 << 16)  # the store's least
        results = [compact_log(log, now_ms=NOW, first_dirty_offset=None),
                   compact_log(log, now_ms=NOW + 1000, first_dirty_offset=0)]  # fmt: skip
        outputs.append(([s.log_path.read_bytes() for s in log.segments], results))
        log_dir.close()
        assert verify_paths([tmp_path / f"{ahead}-{share}-{drops}"]) == []
        assert _threads() == []
    assert outputs[0] == outputs[1] == outputs[2] == outputs[3]
    assert (outputs[0][1][0].passes > 1) == (slots == 200)


class _Store:
    """A segment store over bytes: what ``Chunks`` reads (``read_chunk``, ``io_buffer_size``),
    each read recorded with its thread; ``fail_at``: a position whose read raises."""

    reads_ahead = False

    def __init__(self, data: bytes, io_buffer_size: int, fail_at: int = -1) -> None:
        self.data = data
        self.io_buffer_size = io_buffer_size
        self.fail_at = fail_at
        self.reads: list[tuple[int, int, str]] = []

    def read_chunk(self, _base: int, position: int, size: int) -> bytes:
        self.reads.append((position, size, threading.current_thread().name))
        if position == self.fail_at:
            raise OSError(5, "Input/output error", "segment.log")
        return self.data[position : position + size]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """Read-ahead chunks of 16 KiB, so that the small segments below take several."""
    monkeypatch.setattr(read_ahead, "CHUNK", 16 << 10)
    return 16 << 10


def _segment(count: int = 400) -> bytes:
    rng = random.Random(3)
    return b"".join(build_batch(_records(rng, rng.randrange(1, 9)), codec=CODECS[i % 6])
                    for i in range(count))  # fmt: skip


def _info(data: bytes) -> SegmentInfo:
    return SegmentInfo(0, len(data), 0, 0, 0)


def _threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("kafkatier-cleaner-")]


def _walk(chunks: Chunks, data: bytes) -> list[int]:
    """The walk's reads, as ``chunk.walk_segment`` goes on (to the end of the whole batches);
    checks each chunk against the bytes."""
    position, starts = 0, []
    while position < len(data):
        size = min(chunks.chunk_size, len(data) - position)
        chunk, array = chunks.read(position, size)
        assert chunk == data[position : position + size] and array.tobytes() == chunk
        starts.append(position)
        position += int(batches_end(array))
    return starts


def test_the_chunks_are_the_stores_and_read_by_the_thread(small_chunks: int) -> None:
    data = _segment()
    store = _Store(data, 4096)
    with Chunks(store, _info(data), ahead=True) as chunks:  # type: ignore[arg-type]
        assert chunks.chunk_size == small_chunks
        starts = _walk(chunks, data)
    assert len(starts) > 3
    assert [(p, s) for p, s, _ in store.reads] == [
        (p, min(chunks.chunk_size, len(data) - p)) for p in starts
    ]
    assert {name for _, _, name in store.reads} == {"kafkatier-cleaner-read-ahead"}
    assert _threads() == []


def test_a_read_elsewhere_stops_the_thread_and_starts_another(small_chunks: int) -> None:
    """A larger chunk (a batch that did not fit) is read by the walk; a chunk at another
    position (the walk went on elsewhere) too, and the thread starts again from there."""
    data = _segment()
    store = _Store(data, 4096)
    with Chunks(store, _info(data), ahead=True) as chunks:  # type: ignore[arg-type]
        first, _ = chunks.read(0, chunks.chunk_size)
        assert first == data[: chunks.chunk_size]
        larger, _ = chunks.read(0, 2 * chunks.chunk_size)
        assert larger == data[: 2 * chunks.chunk_size]
        assert store.reads[-1][2] == threading.current_thread().name
        elsewhere = int(batches_end(np.frombuffer(data[:9000], np.uint8)))
        chunk, _ = chunks.read(elsewhere, chunks.chunk_size)
        assert chunk == data[elsewhere : elsewhere + chunks.chunk_size]
        assert store.reads[-1][2] == "kafkatier-cleaner-read-ahead"
    assert _threads() == []


def test_a_read_error_in_the_thread_is_the_walks(small_chunks: int) -> None:
    data = _segment()
    store = _Store(data, 4096)
    with Chunks(store, _info(data), ahead=True) as chunks:  # type: ignore[arg-type]
        second = int(batches_end(np.frombuffer(data[: chunks.chunk_size], np.uint8)))
        store.fail_at = second
        chunks.read(0, chunks.chunk_size)
        with pytest.raises(OSError, match="Input/output error"):
            chunks.read(second, chunks.chunk_size)
        assert [name for p, _, name in store.reads if p == second] == [
            "kafkatier-cleaner-read-ahead", threading.current_thread().name]  # fmt: skip
    assert _threads() == []


class _SlowStore(_Store):
    """A store whose reads take ``delay`` seconds: the thread falls behind the walk."""

    def __init__(self, data: bytes, io_buffer_size: int, delay: float) -> None:
        super().__init__(data, io_buffer_size)
        self.delay = delay

    def read_chunk(self, _base: int, position: int, size: int) -> bytes:
        time.sleep(self.delay)
        return super().read_chunk(_base, position, size)


def _thread_shares(chunks: Chunks, data: bytes, pause: float) -> list[int]:
    """Walk ``data``, pausing ``pause`` seconds a chunk (a walk with work of its own); per
    chunk, how many of its compressed batches the thread inflated."""
    position, held = 0, []
    while position < len(data):
        _, array = chunks.read(position, min(chunks.chunk_size, len(data) - position))
        held.append(len(chunks._current.rows) if chunks._current is not None else 0)
        time.sleep(pause)
        position += int(batches_end(array))
    return held


def test_the_threads_share_follows_who_waits(monkeypatch: pytest.MonkeyPatch,
                                             small_chunks: int) -> None:  # fmt: skip
    """A thread slower than the walk (a slow store) leaves more of each chunk's batches to the
    walk, down to ``LEAST``; a walk slower than the thread gives it more, up to all; either
    way the walk's runs are what ``inflate`` gives (the batches the thread left are the
    walk's to inflate: ``run`` has none for them)."""
    data = _segment(600)
    with Chunks(_SlowStore(data, 4096, 0.004), _info(data), ahead=True) as chunks:  # type: ignore[arg-type]
        held = _thread_shares(chunks, data, 0.0)
        assert chunks.share == read_ahead.LEAST
    assert held[-3] < held[0] / 2
    monkeypatch.setattr(read_ahead, "FIRST_SHARE", read_ahead.LEAST)
    with Chunks(_Store(data, 4096), _info(data), ahead=True) as chunks:  # type: ignore[arg-type]
        held = _thread_shares(chunks, data, 0.004)
        assert chunks.share == 1.0
    assert held[-3] > 2 * held[0]
    assert _threads() == []


def test_without_the_thread_the_walk_reads_its_io_buffer() -> None:
    data = _segment()
    store = _Store(data, 4096)
    with Chunks(store, _info(data), ahead=False) as chunks:  # type: ignore[arg-type]
        assert chunks.chunk_size == 4096
        _walk(chunks, data)
        assert chunks.run(np.frombuffer(data, np.uint8), 0, 1 << 20) is None
    assert {name for _, _, name in store.reads} == {threading.current_thread().name}


def _same_run(got: Inflated, want: Inflated) -> None:
    assert got.data.tobytes() == want.data.tobytes()
    assert (got.starts, got.real_starts, got.real_sizes, got.codecs, got.last_offsets) == (
        want.starts, want.real_starts, want.real_sizes, want.codecs, want.last_offsets)  # fmt: skip


@pytest.mark.parametrize("dropping", [False, True])
@pytest.mark.parametrize("max_bytes", [1 << 20, 3000, 1])
def test_its_runs_are_what_inflate_gives(
    max_bytes: int, dropping: bool, small_chunks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From every batch the thread inflated: the run ``inflate`` gives (which goes on through a
    gzip batch in Python where the thread's run ends). ``dropping``: every third batch's
    offsets superseded, which both pass over inside a run (and neither inflates). The thread's
    share stays whole (``STEP`` 0), so how many runs it serves does not hang on timing."""
    monkeypatch.setattr(read_ahead, "STEP", 0.0)
    data = _numbered(_segment(120))
    drops = _every_third_dropped(data) if dropping else None
    store = _Store(data, 2048)
    served = gaps = position = 0
    with Chunks(store, _info(data), drops, ahead=True) as chunks:  # type: ignore[arg-type]
        while position < len(data):
            chunk, array = chunks.read(position, min(chunks.chunk_size, len(data) - position))
            whole = int(batches_end(array))
            for pos in _positions(chunk[:whole]):
                got = chunks.run(array, pos, max_bytes)
                if got is None:
                    continue
                served += 1
                gaps += sum(got.real_starts[i] != got.real_starts[i - 1] + got.real_sizes[i - 1]
                            for i in range(1, len(got.starts)))  # fmt: skip
                want = inflate(array[:whole], pos, max_bytes, drops=drops or NO_DROPS)
                assert want is not None
                cut = len(got.starts)  # inflate may go on through a gzip batch
                assert cut == len(want.starts) or want.codecs[cut] == Codec.GZIP
                _same_run(got, _first(want, cut))
            assert chunks.run(np.frombuffer(chunk, np.uint8), 0, max_bytes) is None
            position += whole
    assert served > 40
    assert (gaps > 10) == (dropping and max_bytes > 1)


def _numbered(data: bytes) -> bytes:
    """The batches with consecutive offsets (the base offset is not under the CRC)."""
    out, offset = bytearray(data), 0
    for found in iter_batches(data):
        out[found.position : found.position + 8] = offset.to_bytes(8, "big")
        offset += found.last_offset - found.base_offset + 1
    return bytes(out)


def _every_third_dropped(data: bytes) -> Drops:
    """The superseded bits of every third batch's offsets (the rest unmarked)."""
    offsets = [(b.base_offset, b.last_offset) for b in iter_batches(data)]
    sup = np.zeros(offsets[-1][1] // 8 + 1, np.uint8)
    for first, last in offsets[::3]:
        for offset in range(first, last + 1):
            sup[offset >> 3] |= 1 << (offset & 7)
    ctx = np.array([offsets[-1][1], NOW, 0, offsets[-1][1] + 10, 1, 0], np.int64)
    return Drops(sup, ctx, np.zeros(0, np.int64), np.zeros(0, np.int64))


def _positions(chunk: bytes) -> list[int]:
    return [batch.position for batch in iter_batches(chunk)]


def _first(run: Inflated, count: int) -> Inflated:
    stop = run.starts[count] if count < len(run.starts) else run.data.shape[0]
    rows = slice(0, count)
    return Inflated(run.data[:stop], run.starts[rows], run.real_starts[rows], run.real_sizes[rows],
                    run.codecs[rows], run.last_offsets[rows])  # fmt: skip


def test_batches_end_is_where_the_whole_batches_end() -> None:
    data = _segment(20)
    whole = np.frombuffer(data, np.uint8)
    assert batches_end(whole) == len(data)
    cut = _positions(data)[7]
    assert batches_end(whole[: cut + 30]) == cut
    assert batches_end(whole[:30]) == 0  # the first batch not whole
    bad = bytearray(data)
    bad[cut + 8 : cut + 12] = (3).to_bytes(4, "big")  # a length no batch has
    assert batches_end(np.frombuffer(bytes(bad), np.uint8)) == cut


def test_inflate_chunk_leaves_what_it_cannot_or_need_not_inflate() -> None:
    """Plain, gzip and control batches stay; with ``drop``, so does a batch whose every offset
    is superseded; with too little room, the batches past it."""
    rng = random.Random(1)
    parts = [build_batch(_records(rng, 3), codec=Codec.LZ4),  # offsets 0-2
             build_batch([Record(3 + i, NOW, b"k", b"v") for i in range(2)], codec=Codec.GZIP),
             build_control_batch(ControlType.COMMIT, producer_id=PID, producer_epoch=0,
                                 timestamp=NOW),
             build_batch(_records(rng, 4), codec=Codec.ZSTD),
             build_batch(_records(rng, 2), codec=Codec.NONE)]  # fmt: skip
    data = b"".join(parts)
    array = np.frombuffer(data, np.uint8)
    out = np.empty(ROOM + 10_000, np.uint8)
    meta = np.empty((8, META), np.int64)
    none = NO_DROPS
    box = ZstdContexts().box
    count, total = inflate_chunk(array, len(data), out, meta, *none, False, box, NO_CACHE)
    assert count == 2 and list(meta[:2, 4]) == [int(Codec.LZ4), int(Codec.ZSTD)]
    zstd_at = sum(len(p) for p in parts[:3])
    assert meta[1, 1] == zstd_at
    lz4, zstd = inflate(array, 0, 1 << 20), inflate(array, zstd_at, 1 << 20)
    assert lz4 is not None and zstd is not None
    inflated = _first(lz4, 1).data.tobytes() + _first(zstd, 1).data.tobytes()
    assert out[:total].tobytes() == inflated
    sup = np.full(1, 0b111, np.uint8)  # offsets 0-2 superseded
    ctx = np.array([100, NOW, 0, 100, 1, 0], np.int64)
    drops = Drops(sup, ctx, np.zeros(0, np.int64), np.zeros(0, np.int64))
    count, _ = inflate_chunk(array, len(data), out, meta, *drops, True, box, NO_CACHE)
    assert count == 1 and meta[0, 4] == int(Codec.ZSTD)
    count, _ = inflate_chunk(array, len(data), out[: ROOM + 10], meta, *none, False, box, NO_CACHE)
    assert count == 1


@pytest.mark.parametrize("path", ["read ahead", "walk", "batches"])
@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4])
def test_a_corrupt_batch_past_the_first_chunk_is_named_at_its_file_position(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: int, path: str,
    codec: Codec,
) -> None:  # fmt: skip
    """A batch read from a later chunk knew only its place in the chunk: the error names the
    segment and the batch's position in it (gzip's error named neither), on the walk with and
    without the thread and on the per-batch path (``read_batches``)."""
    monkeypatch.setattr(read_ahead, "ENABLED", path == "read ahead")
    monkeypatch.setattr(cleaner_fast, "ENABLED", path != "batches")
    config = compact_config(segment_bytes=3 << 20)
    log_dir, log = open_log(tmp_path, config, ManualClock())
    rng = random.Random(2)
    for _ in range(400):
        log.append(build_batch(_records(rng, 8), codec=codec))
    log.roll()
    segment = log.segments[0].log_path
    log_dir.close()
    data = bytearray(segment.read_bytes())
    at = next(p for p in _positions(bytes(data)) if p > 5 * max(small_chunks, 1 << 16))
    if codec == Codec.LZ4:
        data[at + 61 + 11] = 0x0F  # the block's first token: a match with nothing before it
    else:
        data[at + 61 + 30] ^= 0x5A  # inside the deflate stream: its check fails
    segment.write_bytes(data)
    log_dir, log = open_log(tmp_path, config, ManualClock())
    with pytest.raises(InvalidRecordError) as raised:
        compact_log(log, now_ms=NOW, first_dirty_offset=None)
    log_dir.close()
    assert raised.value.context["file"] == str(segment)
    assert raised.value.context["position"] == at


@pytest.mark.parametrize(("slots", "share", "wraps"),
                         [(100_000, 1.0, True), (100_000, 0.4, True), (400_000, 0.4, False),
                          (400_000, 1.0, False)])  # fmt: skip
def test_the_rewrite_takes_what_the_map_build_inflated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slots: int, share: float, wraps: bool,
    small_chunks: int,
) -> None:  # fmt: skip
    """The map build inflates into the pass's cache (``inflated_cache``): the read-ahead its
    share of each chunk, the walk the rest after it (``Chunks.inflate_kept``); the rewrite takes
    those batches from the cache as they are (``Chunks.run``) and decodes only the others: the
    same segments and results as with no cache. A budget of 100,000 slots leaves an arena of a
    few chunks' rooms, so the ring wraps and drops its oldest entries; 400,000 holds the whole
    segment. The cleaner's I/O buffer of 64 KiB makes a room (four chunks inflated and one
    batch) 320 KiB."""
    monkeypatch.setattr(read_ahead, "ENABLED", True)
    monkeypatch.setattr(read_ahead, "FIRST_SHARE", share)
    monkeypatch.setattr(read_ahead, "STEP", 0.0)
    seen = {"hits": 0, "dropped": 0, "kept by the walk": 0, "taken": 0}
    get, reserve = inflated_cache.InflatedCache.get, inflated_cache.InflatedCache.reserve
    kept, taken = read_ahead.Chunks.inflate_kept, read_ahead.Chunks._cached_run

    def counted_get(self: inflated_cache.InflatedCache, key: inflated_cache.Key) -> Any:
        found = get(self, key)
        seen["hits"] += found is not None
        return found

    def counted_reserve(self: inflated_cache.InflatedCache) -> Any:
        before = len(self)
        room = reserve(self)
        seen["dropped"] += before - len(self)
        return room

    def counted_kept(self: Chunks, array: Any, pos: int, max_bytes: int) -> Any:
        run = kept(self, array, pos, max_bytes)
        seen["kept by the walk"] += run is not None
        return run

    def counted_taken(self: Chunks, item: Any, pos: int, max_bytes: int) -> Any:
        run = taken(self, item, pos, max_bytes)
        seen["taken"] += run is not None
        return run

    outputs = []
    for cached in (True, False):
        if cached:
            monkeypatch.setattr(inflated_cache.InflatedCache, "get", counted_get)
            monkeypatch.setattr(inflated_cache.InflatedCache, "reserve", counted_reserve)
            monkeypatch.setattr(read_ahead.Chunks, "inflate_kept", counted_kept)
            monkeypatch.setattr(read_ahead.Chunks, "_cached_run", counted_taken)
        else:
            monkeypatch.setattr(inflated_cache, "LEAST", 1 << 30)  # no arena is that large
        log_dir, log = _big_log(tmp_path / str(cached), slots, log_cleaner_io_buffer_size=128 << 10)
        results = [compact_log(log, now_ms=NOW, first_dirty_offset=None),
                   compact_log(log, now_ms=NOW + 1000, first_dirty_offset=0)]  # fmt: skip
        outputs.append(([s.log_path.read_bytes() for s in log.segments], results))
        log_dir.close()
        assert verify_paths([tmp_path / str(cached)]) == []
    assert outputs[0] == outputs[1]
    assert seen["hits"] > 3 and seen["taken"] > 3
    assert (seen["dropped"] > 0) == wraps
    assert (seen["kept by the walk"] > 0) == (share < 1)
    assert _threads() == []
