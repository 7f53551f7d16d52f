"""Reads from the remote store by offset and timestamp, joined with the local segments."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from tier_fixtures import CORRUPTIONS, T0, only, write_tiered

from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import TieringError
from kafkatier.tiering.metadata.manifest import object_key
from kafkatier.tiering.read.remote_reader import (
    RemoteLogReader,
    joined_batches,
    joined_offset_for_timestamp,
)
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore


class CountingStore(FsspecStore):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.bytes_read = 0
        self._lock = threading.Lock()  # the chunk cache's read-ahead threads read too

    def get_bytes(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        data = super().get_bytes(key, start, end)
        with self._lock:
            self.bytes_read += len(data)
        return data


class FailsReadsAhead(CountingStore):
    """Every other GET a chunk cache's read-ahead thread sends fails."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.failed = 0
        self._ahead = 0

    def get_bytes(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        if threading.current_thread().name.startswith("kafkatier-read-ahead"):
            with self._lock:
                self._ahead += 1
                fail = self._ahead % 2 == 1
                self.failed += fail
            if fail:
                raise OSError("injected: connection reset")
        return super().get_bytes(key, start, end)


@pytest.fixture
def tiered(tmp_path: Path):
    logs = write_tiered(tmp_path / "logs", steps=80,
                        overrides={"local.retention.bytes": "5000", "retention.bytes": "-1"})
    with ReadOnlyPartition(logs, "tiered", 0) as part:
        batches = [(b.base_offset, bytes(b.buffer)) for s in part.segments for b in s.batches()]
        by_time = {ts: part.offset_for_timestamp(ts) for ts in (T0 - 5, T0 + 7, T0 + 333,
                                                                  T0 + 555, T0 + 10**6)}
    store = CountingStore(f"file://{tmp_path / 'remote'}")
    result = Tierer(TieringConfig(log_dirs=(logs,), remote_url=store.url), store).run_once()
    assert result.total("local_segments_deleted") >= 3
    return logs, store, batches, by_time


def test_joined_read_returns_the_original_log(tiered) -> None:
    logs, store, batches, _ = tiered
    with ReadOnlyPartition(logs, "tiered", 0) as part:
        assert part.segments[0].base_offset > 0  # the start of the log is remote only
    got = [(b.base_offset, bytes(b.buffer)) for b in joined_batches(store, logs, "tiered", 0, 0)]
    assert got == batches
    middle = batches[len(batches) // 3][0] + 1
    got = [b.base_offset for b in joined_batches(store, logs, "tiered", 0, middle)]
    assert got == [o for o, _ in batches if o >= batches[len(batches) // 3][0]]


def test_remote_read_uses_ranged_gets(tiered) -> None:
    _, store, _, _ = tiered
    reader = RemoteLogReader(store, only(store, "tiered", 0), chunk_bytes=256)
    seg = reader.segments[1]
    store.bytes_read = 0
    first = next(reader.batches_from(seg.end_offset))
    assert first.base_offset <= seg.end_offset <= first.last_offset
    assert store.bytes_read < seg.size  # not the whole segment


def test_offset_for_timestamp_matches_the_engine(tiered) -> None:
    logs, store, _, by_time = tiered
    for ts, expected in by_time.items():
        assert joined_offset_for_timestamp(store, logs, "tiered", 0, ts) == expected, ts


def test_a_segment_local_retention_deletes_under_the_read_is_read_from_remote(
    tiered, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local retention deletes the first local segment (its remote copy is finished) just as
    the joined read opens it: the read starts over and returns the original log (the soak's
    concurrent reader found this failing with FileNotFoundError)."""
    logs, store, batches, _ = tiered
    with ReadOnlyPartition(logs, "tiered", 0) as part:
        first_local = part.bases[0]
    assert first_local in only_finished_bases(store)
    original = ReadOnlyPartition.segment
    deleted: list[int] = []

    def racing(self: ReadOnlyPartition, base: int):  # type: ignore[no-untyped-def]
        if base == first_local and not deleted:
            for path in self.directory.glob(f"{first_local:020d}.*"):
                path.unlink()
            deleted.append(base)
        return original(self, base)

    monkeypatch.setattr(ReadOnlyPartition, "segment", racing)
    got = [(b.base_offset, bytes(b.buffer)) for b in joined_batches(store, logs, "tiered", 0, 0)]
    assert deleted and got == batches


def only_finished_bases(store: CountingStore) -> set[int]:
    return {s.base_offset for s in RemoteLogReader(store, only(store, "tiered", 0)).segments}


def _swap_object(store: FsspecStore, key: str, change) -> None:  # type: ignore[no-untyped-def]
    store.put_bytes(key, change(store.get_bytes(key)))


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_corrupt_remote_segment_is_refused_and_named(tiered, kind: str) -> None:
    """Whatever is wrong with the bytes under a segment's key, no record of them is served:
    the read fails naming the object (and where in it)."""
    _, store, batches, _ = tiered
    rp = only(store, "tiered", 0)
    reader = RemoteLogReader(store, rp)
    victim, other = reader.segments[1], reader.segments[0]
    key = object_key(rp, victim, "log")
    other_bytes = store.get_bytes(object_key(rp, other, "log"))
    _swap_object(store, key, lambda data: CORRUPTIONS[kind](data, other_bytes))
    fresh = RemoteLogReader(store, rp)
    served: list[int] = []
    with pytest.raises(TieringError, match=key):
        for batch in fresh.batches_from(victim.base_offset):
            served.append(batch.base_offset)
    expected = {o: b for o, b in batches}
    assert all(o < victim.end_offset + 1 for o in served)
    assert not served or kind == "truncated"  # only whole batches before the cut may be read
    for offset in served:
        assert offset in expected


def _fetch_all(reader: RemoteLogReader, max_bytes: int) -> list[tuple[int, bytes]]:
    """Every remote batch through serve's fetch path: one ``read_remote_run`` a fetch of at most
    ``max_bytes`` (as a consumer reads a partition), from offset 0 to the remote end."""
    from kafkatier.serve.remote_view import read_remote_run
    from kafkatier.storage.record.records import iter_batches

    got: list[tuple[int, bytes]] = []
    offset = 0
    while offset < reader.end_offset:
        data = read_remote_run(reader, offset, reader.end_offset, max_bytes, True)
        assert data, offset
        got += [(b.base_offset, bytes(b.buffer)) for b in iter_batches(data)]
        offset = _last_offset(data) + 1
    return got


def _last_offset(data: bytes) -> int:
    from kafkatier.storage.record.records import iter_batches

    return [b.last_offset for b in iter_batches(data)][-1]


def test_fetches_share_a_chunk_instead_of_fetching_it_again(tiered) -> None:
    """Small fetches (the consumer's max.partition.fetch.bytes) over larger chunks: with the
    chunk cache each byte of a segment is read from the store once; without it, every fetch
    reads its own chunk again (chunk_cache.py). The test's segments fit one chunk each."""
    from kafkatier.tiering.read.chunk_cache import ChunkCache

    _, store, batches, _ = tiered
    rp = only(store, "tiered", 0)
    remote_bytes = sum(s.files["log"].size for s in RemoteLogReader(store, rp).segments)
    expected = [b for b in batches if b[0] < RemoteLogReader(store, rp).end_offset]
    store.bytes_read = 0
    plain = _fetch_all(RemoteLogReader(store, rp, chunk_bytes=4096), max_bytes=600)
    without = store.bytes_read
    store.bytes_read = 0
    cache = ChunkCache()
    cached = _fetch_all(RemoteLogReader(store, rp, chunk_bytes=4096, chunks=cache), 600)
    assert plain == cached == expected
    index_bytes = sum(s.files["index"].size for s in RemoteLogReader(store, rp).segments)
    assert store.bytes_read == remote_bytes + index_bytes < without
    assert cache.hits > 0


def test_a_fetch_ends_with_the_batch_holding_its_end(tiered) -> None:
    """``read_remote_run`` up to an end inside a remote segment (as the local log start may
    lie) sends the batches from the one holding the fetch offset to the one holding
    ``end - 1``, none after; an end past the segment's last offset goes to the run's end."""
    from kafkatier.serve.remote_view import read_remote_run
    from kafkatier.storage.record.records import iter_batches

    _, store, batches, _ = tiered
    reader = RemoteLogReader(store, only(store, "tiered", 0), chunk_bytes=1 << 20)
    seg = reader.segments[1]
    inside = [o for o, _ in batches if seg.base_offset < o <= seg.end_offset]
    for start, end in [(seg.base_offset, inside[len(inside) // 2]),
                       (inside[0], inside[-1] + 1), (seg.base_offset, seg.end_offset + 1)]:
        data = read_remote_run(reader, start, end, 1 << 30, True)
        got = [(b.base_offset, bytes(b.buffer)) for b in iter_batches(data)]
        expected = [(o, b) for i, (o, b) in enumerate(batches)
                    if o < end and (i + 1 == len(batches) or batches[i + 1][0] > start)]
        assert got == expected, (start, end)


@pytest.mark.parametrize("fail_ahead", [False, True])
def test_reading_ahead_serves_the_next_runs_and_reads_nothing_more(
    tmp_path: Path, fail_ahead: bool
) -> None:
    """With read-ahead (chunk_cache.py), the run after the one a fetch used is fetched in the
    background: the fetches return the same batches as without it, the next runs come from
    reads ahead, and the store reads the same bytes (no run fetched twice or for nothing). A
    read-ahead that fails is dropped: the fetch's own GET reads the run, and the batches are the
    same. (Every batch indexed, so each fetch starts at its batch, as it nearly does at Kafka's
    4 KiB interval in segments of megabytes: these are ~1,900 bytes, in runs of up to 512.)"""
    from kafkatier.tiering.read.chunk_cache import ChunkCache

    logs = write_tiered(tmp_path / "logs", steps=80, overrides={
        "local.retention.bytes": "5000", "retention.bytes": "-1", "index.interval.bytes": "1"})
    store = (FailsReadsAhead if fail_ahead else CountingStore)(f"file://{tmp_path / 'remote'}")
    Tierer(TieringConfig(log_dirs=(logs,), remote_url=store.url), store).run_once()
    rp = only(store, "tiered", 0)
    read: dict[int, int] = {}
    got: dict[int, list[tuple[int, bytes]]] = {}
    for threads in (0, 2):
        store.bytes_read = 0
        cache = ChunkCache(read_ahead=threads)
        try:
            reader = RemoteLogReader(store, rp, chunk_bytes=512, chunks=cache)
            got[threads] = _fetch_all(reader, 300)
        finally:
            cache.close()
        read[threads] = store.bytes_read
        assert (cache.ahead > 0) == (threads > 0)
    assert got[2] == got[0] and len(got[0]) > 20
    if fail_ahead:
        assert isinstance(store, FailsReadsAhead) and store.failed > 5  # reads ahead failed
    else:
        assert read[2] == read[0]


def test_the_chunk_cache_keeps_one_run_an_object_within_its_budget() -> None:
    from kafkatier.tiering.read.chunk_cache import ChunkCache

    cache = ChunkCache(max_bytes=100)
    cache.put("a", 10, b"x" * 40)
    assert cache.get("a", 10) == b"x" * 40 and cache.get("a", 30) == b"x" * 20
    assert cache.get("a", 50) is None and cache.get("a", 9) is None and cache.get("b", 10) is None
    cache.put("a", 50, b"y" * 40)  # the reader moved on: the object's earlier run goes
    assert cache.get("a", 10) is None and cache.get("a", 50) == b"y" * 40
    cache.put("b", 0, b"z" * 40)
    cache.get("a", 50)  # "a" used last: "b" is the oldest
    cache.put("c", 0, b"w" * 40)  # 120 bytes > 100: the least recently used ("b") goes
    assert cache.get("b", 0) is None and cache.get("a", 50) and cache.get("c", 0)
    cache.put("d", 0, b"v" * 101)  # larger than the whole budget: not kept
    assert cache.get("d", 0) is None
