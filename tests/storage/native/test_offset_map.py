"""The cleaner's map build in C (``storage/native/offset_map.c``) against numba's ``map_chunk``:
for the same buffer, start offset and limit, the same stopping point, fullness, size, latest
offset, table (every slot) and superseded bits; and a whole compaction with either, the same
cleaned log, byte for byte."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from kafkatier.storage import native
from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.cleaner.kernels.chunks import map_chunk
from kafkatier.storage.cleaner.kernels.offset_map import MURMUR3, OffsetMap
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.native import offset_map as native_map
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import Codec
from tests.storage.native.test_kernels import needs_cc

pytestmark = needs_cc
NOW = 1_700_000_000_000


def _key(rng: random.Random, keys: int) -> bytes | None:
    """Keys from a small space (repeats supersede), some null, empty or longer than a block."""
    roll = rng.random()
    if roll < 0.08:
        return None
    if roll < 0.1:
        return b""
    k = rng.randrange(keys)
    return (b"key-%d-" % k) * (1 + k % 5)  # 7 to 60 bytes: every MurmurHash3 tail length


def _records(rng: random.Random, first: int, n: int, keys: int) -> list[Record]:
    return [Record(first + i, NOW + rng.randrange(-5, 1000), _key(rng, keys),
                   None if rng.random() < 0.05 else rng.randbytes(rng.randrange(40)),
                   tuple((f"h{h}", rng.choice([None, b"v"])) for h in range(rng.randrange(3))))
            for i in range(n)]  # fmt: skip


def _buffer(seed: int, batches: int = 40, keys: int = 60) -> bytearray:
    """Plain batches of 1 to 30 records with consecutive offsets."""
    rng = random.Random(seed)
    out, offset = bytearray(), 0
    for _ in range(batches):
        n = rng.randrange(1, 31)
        out += build_batch(_records(rng, offset, n, keys))
        offset += n
    return out


def _map(kind: str, buf: bytearray, start: int, limit: int | None,
         capacity: int = 1024) -> tuple[tuple[int, bool, int, int], OffsetMap]:  # fmt: skip
    """One build over ``buf`` by ``kind`` (``numba`` or ``c``), on a fresh small map."""
    om = OffsetMap(64 * 1024, 0.9, MURMUR3)
    om.clear(max_keys=2_000, start=0)
    array = np.frombuffer(bytes(buf), np.uint8)
    cap = om.max_desired_size if limit is None else limit
    if kind == "numba":
        found = map_chunk(om.table, array, 0, start, 0, cap, -1, MURMUR3, om.superseded, 0)
        result = (int(found[0]), bool(found[1]), int(found[2]), int(found[3]))
    else:
        assert native.native() is not None  # the library bound
        result = native_map.PlainMap(om.table, om.superseded, capacity)(array, 0, start, 0, cap,
                                                                        -1, 0)  # fmt: skip
    return result, om


def _same(buf: bytearray, start: int = 0, limit: int | None = None, capacity: int = 1024) -> int:
    """Both builds agree in every respect; returns where they stopped (a key put twice or more
    before it, in the buffers here, so the superseded bits are compared too)."""
    (numba_result, a), (c_result, b) = (
        _map("numba", buf, start, limit),
        _map("c", buf, start, limit, capacity),
    )
    assert c_result == numba_result
    assert np.array_equal(a.table, b.table)
    assert np.array_equal(a.superseded, b.superseded)
    assert a.superseded.any() or c_result[2] < 60, "no key repeated: superseded bits untested"
    return c_result[0]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("start", "limit"), [(0, None), (137, None), (0, 25), (300, 9)])
def test_the_c_build_gives_numbas_map(seed: int, start: int, limit: int | None) -> None:
    buf = _buffer(seed)
    stopped = _same(buf, start, limit)
    if limit is None:
        assert stopped == len(buf)  # every batch plain: the walk ends at the buffer's end


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_a_batch_larger_than_the_scratch_grows_it(capacity: int) -> None:
    assert _same(_buffer(11), capacity=capacity) == len(_buffer(11))


def test_the_map_filling_inside_a_batch_stops_there() -> None:
    buf = _buffer(3)
    (pos, full, size, latest), _ = _map("c", buf, 0, 25)
    assert full and size == 25 and latest >= 0 and pos < len(buf)
    _same(buf, 0, 25)


def test_both_stop_at_the_first_batch_that_is_not_plain() -> None:
    plain = _buffer(5, batches=10)
    rng = random.Random(5)
    for other in (build_batch(_records(rng, 900, 4, 60), codec=Codec.LZ4),
                  build_batch(_records(rng, 900, 4, 60), producer_id=7, producer_epoch=0,
                              base_sequence=0, transactional=True)):  # fmt: skip
        assert _same(plain + other + _buffer(6, batches=3)) == len(plain)


def test_both_stop_at_a_batch_whose_records_do_not_scan() -> None:
    good = _buffer(8, batches=6)
    bad = bytearray(build_batch(_records(random.Random(8), 500, 5, 60)))
    bad[61] = 0xFF  # the first record's length varint never ends within five bytes
    tail = _buffer(9, batches=2)
    assert _same(good + bad + tail) == len(good)
    first = 12 + int.from_bytes(tail[8:12], "big")  # the tail's first batch, whole
    assert _same(good + tail[:-3]) == len(good) + first  # the last batch cut short


def test_a_compaction_is_the_same_with_either(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    cfg = LogConfig.from_properties(
        {"cleanup.policy": "compact", "segment.bytes": "60000"}, source="test"
    )
    source = tmp_path / "source"
    with LogDirectory(source, config_for=lambda _t: cfg, clock=lambda: NOW) as logs:
        log = logs.get_or_create("t", 0)
        buf = _buffer(21, batches=120, keys=300)
        log.append(bytes(buf))
        log.roll()
    cleaned = {}
    calls: list[int] = []
    c_build = native_map.PlainMap.__call__
    monkeypatch.setattr(native_map.PlainMap, "__call__",
                        lambda *a: calls.append(1) or c_build(*a))  # fmt: skip
    for kind in ("numba", "native"):
        monkeypatch.setenv(native.KERNELS_ENV, kind)
        copy = tmp_path / kind
        shutil.copytree(source, copy)
        with LogDirectory(copy, config_for=lambda _t: cfg, clock=lambda: NOW) as logs:
            log = logs.get("t", 0)
            assert log is not None
            result = compact_log(log, now_ms=NOW, first_dirty_offset=None)
            assert result.records_removed > 0
        cleaned[kind] = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*.log")}
        assert bool(calls) == (kind == "native")  # the C build served where chosen, only there
    assert cleaned["numba"] == cleaned["native"]


def test_a_base_offset_near_the_int64_limit_wraps_as_numbas() -> None:
    """A corrupt header's base offset: the offsets wrap in both builds alike (Java's long)."""
    buf = _buffer(12)
    buf[0:8] = ((1 << 63) - 3).to_bytes(8, "big")
    _same(buf)


@pytest.mark.parametrize("seed", range(40))
def test_corrupt_bytes_stop_both_builds_alike(seed: int) -> None:
    """Random bytes of the batches overwritten (lengths, varints, counts, attributes): the C
    build reads no byte outside the buffer and stops where numba's does, with the same map."""
    rng = random.Random(seed)
    buf = _buffer(seed % 7, batches=12)
    for _ in range(rng.randrange(1, 6)):
        buf[rng.randrange(len(buf))] = rng.randrange(256)
    (numba_result, a), (c_result, b) = _map("numba", buf, 0, None), _map("c", buf, 0, None)
    assert c_result == numba_result
    assert np.array_equal(a.table, b.table) and np.array_equal(a.superseded, b.superseded)
