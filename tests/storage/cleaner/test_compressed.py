"""``compressed.inflate``: which batches a run of compressed data batches takes, and that anything
else is left to the Python path (which reports it) rather than raised from here; the kernels of
``kernels.codec_runs`` (lz4 and zstd runs) against the Python loop, byte for byte."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import zstandard

from kafkatier.storage.cleaner.compressed import Scratch, deflate, inflate
from kafkatier.storage.cleaner.kernels import codec_runs as kernel
from kafkatier.storage.cleaner.kernels.superseded import NO_DROPS
from kafkatier.storage.cleaner.kernels.zstd_contexts import ZstdContexts
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import _assemble, build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import ATTRIBUTES_OFFSET, BATCH_HEADER, BATCH_HEADER_SIZE, Codec


def data_batch(base: int, n: int = 3, codec: Codec = Codec.LZ4) -> bytearray:
    """``n`` records from offset ``base``, compressed with ``codec`` (lz4 unless said)."""
    records = [Record(base + i, 1_700_000_000_000, b"k%d" % i, b"v" * 50) for i in range(n)]
    return bytearray(build_batch(records, codec=codec))


def zstd_batch(base: int, n: int = 3) -> bytearray:
    return data_batch(base, n, Codec.ZSTD)


def reframed(batch: bytearray, frames: Any) -> bytearray:
    """The zstd batch with its records framed by ``frames(plain records)`` instead."""
    plain = zstandard.ZstdDecompressor().decompress(bytes(batch[BATCH_HEADER_SIZE:]))
    base, _, ple, _, _, attrs, *rest = BATCH_HEADER.unpack_from(batch)
    return bytearray(_assemble(frames(plain), base, ple, attrs, *rest))


def streamed(plain: bytes) -> bytes:
    """As Kafka's Java producer frames zstd (a stream: no content size in the frame)."""
    stream = zstandard.ZstdCompressor(level=3, write_content_size=False).compressobj()
    return stream.compress(plain) + stream.flush()


def two_frames(plain: bytes) -> bytes:
    one = zstandard.ZstdCompressor(level=3)
    return one.compress(plain[:40]) + one.compress(plain[40:])


def cut_short(plain: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(plain)[:-4]


def test_a_run_of_compressed_batches_is_inflated_whole() -> None:
    chunk = np.frombuffer(bytes(data_batch(0) + data_batch(3)), dtype=np.uint8)
    run = inflate(chunk, 0, 1 << 20)
    assert run is not None
    assert run.last_offsets == [2, 5] and run.codecs == [Codec.LZ4, Codec.LZ4]
    assert run.real_starts[1] == run.real_sizes[0]


def test_an_unknown_codec_id_ends_the_run_instead_of_raising() -> None:
    bad = data_batch(3)
    bad[ATTRIBUTES_OFFSET + 1] = (bad[ATTRIBUTES_OFFSET + 1] & ~0x07) | 0x05  # codec id 5
    chunk = np.frombuffer(bytes(data_batch(0) + bad), dtype=np.uint8)
    run = inflate(chunk, 0, 1 << 20)
    assert run is not None and run.last_offsets == [2]  # the run stops before it
    assert inflate(chunk, run.real_sizes[0], 1 << 20) is None  # left to the Python path


def test_a_batch_that_is_not_compressed_data_takes_no_scratch() -> None:
    """A walk over plain batches (or any other the Python path takes) asks for runs at every
    stop; none is made, and the scratch's megabyte is never allocated for it."""
    records = [Record(0, 1_700_000_000_000, b"k", b"v")]
    scratch = Scratch()
    for codec in (Codec.NONE, Codec.LZ4):
        batch = bytearray(build_batch(records, codec=codec, producer_id=5, producer_epoch=0,
                                      base_sequence=0, transactional=True))  # fmt: skip
        assert inflate(np.frombuffer(bytes(batch), np.uint8), 0, 1 << 20, scratch) is None
    assert len(scratch.buf) == 0


def test_runs_inflated_into_one_scratch_hold_each_batch_decompressed() -> None:
    """Runs inflated one after another into one reused buffer: each run's data is its batches'
    headers (length and codec bits rewritten) and decompressed records, whatever the codec,
    also when a batch outgrows the buffer (it is replaced, not resized under the last run)."""
    big = [Record(7 + i, 1_700_000_000_000, b"k", bytes([i % 7]) * 300_000) for i in range(8)]
    small = [Record(3 + i, 1_700_000_000_000, b"z%d" % i, b"w" * 90) for i in range(4)]
    batches = [data_batch(0), bytearray(build_batch(small, codec=Codec.ZSTD)),
               bytearray(build_batch(big, codec=Codec.LZ4))]  # fmt: skip
    scratch = Scratch()
    previous = None
    for batch in batches:
        chunk = np.frombuffer(bytes(batch), dtype=np.uint8)
        run = inflate(chunk, 0, 1 << 20, scratch)
        assert run is not None and run.starts == [0] and run is not previous
        plain = RecordBatch(run.data.tobytes())
        original = RecordBatch(bytes(batch))
        assert plain.codec == Codec.NONE and plain.crc == original.crc  # the CRC is left stale
        assert [(r.offset, r.key, r.value) for r in plain.records()] == [
            (r.offset, r.key, r.value) for r in original.records()
        ]
        previous = run
    assert len(scratch.buf) >= 8 * 300_000


def corrupt_block(batch: bytearray) -> bytearray:
    """The batch with its lz4 block's first token byte made to claim a match it has no data for
    (the CRC is not checked here: decoding is what fails)."""
    bad = bytearray(batch)
    bad[61 + 11] = 0x0F  # no literals, a match of 19+ bytes at an offset that is missing
    return bad


def big(base: int, codec: Codec) -> bytearray:
    """A batch of 120,000 bytes of records (lz4: a frame of several blocks)."""
    records = [Record(base + i, 1_700_000_000_000, b"k", bytes([i]) * 40_000)
               for i in range(3)]  # fmt: skip
    return bytearray(build_batch(records, codec=codec))


RUNS = {
    "lz4 only": [data_batch(0), data_batch(3), data_batch(6, 40)],
    "raw lz4 block": [data_batch(0), bytearray(build_batch(  # incompressible: stored raw
        [Record(3, 1_700_000_000_000, b"k", random.Random(7).randbytes(1000))],
        codec=Codec.LZ4))],
    "then zstd, then lz4": [data_batch(0), bytearray(build_batch(
        [Record(3, 1_700_000_000_000, b"z", b"w" * 90)], codec=Codec.ZSTD)), data_batch(4)],
    "a multi-block frame": [data_batch(0), big(3, Codec.LZ4), data_batch(6)],
    "a block that does not decode": [data_batch(0), corrupt_block(data_batch(3)), data_batch(6)],
    "a batch cut short": [data_batch(0), data_batch(3)[:-5]],
    "zstd only": [zstd_batch(0), zstd_batch(3), zstd_batch(6, 40)],
    "zstd without a content size": [zstd_batch(0), reframed(zstd_batch(3), streamed),
                                    zstd_batch(6)],
    "zstd, two frames in a batch": [zstd_batch(0), reframed(zstd_batch(3, 9), two_frames)],
    "a zstd frame cut short": [zstd_batch(0), reframed(zstd_batch(3, 9), cut_short),
                               zstd_batch(12)],
    "a large zstd batch, then gzip": [zstd_batch(0), big(3, Codec.ZSTD),
                                      data_batch(6, codec=Codec.GZIP), zstd_batch(9)],
}  # fmt: skip


@pytest.mark.parametrize("max_bytes", [1 << 20, 1000])
@pytest.mark.parametrize("name", RUNS)
def test_the_kernel_inflates_as_the_python_loop(
    name: str, max_bytes: int, monkeypatch: Any
) -> None:
    """``kernels.codec_runs`` (Kafka's one-block lz4 frames and zstd frames in one numba call,
    liblz4 and libzstd linked by name) takes what it can of a run and the Python loop the rest:
    the result is the Python loop's alone, byte for byte, wherever the kernel stops (with
    ``max_bytes`` 1000 a large batch finds too little room left for the kernel)."""
    assert kernel.AVAILABLE  # python-lz4's and zstandard's extensions export the functions
    chunk = np.frombuffer(bytes(b"".join(RUNS[name])), dtype=np.uint8)

    def runs() -> list[tuple[Any, ...]]:
        found, pos = [], 0
        while (run := inflate(chunk, pos, max_bytes)) is not None:
            found.append((run.data.tobytes(), run.starts, run.real_starts, run.real_sizes,
                          run.codecs, run.last_offsets))  # fmt: skip
            pos = run.real_starts[-1] + run.real_sizes[-1]
        return found

    with_kernel = runs()
    monkeypatch.setattr(kernel, "AVAILABLE", False)
    assert with_kernel == runs() and with_kernel


@pytest.mark.parametrize("codec", [Codec.LZ4, Codec.ZSTD])
def test_the_kernel_deflates_as_the_python_loop(codec: Codec, monkeypatch: Any) -> None:
    """What the filter wrote for a run goes back as stored batches the same way with the
    kernel as without: a batch kept whole as its original bytes, rebuilt ones compressed
    (compressible, incompressible: an lz4 raw block, no records at all) with length, codec and
    CRC, and one of more than 64 KiB of records (lz4: left to the Python loop; zstd: one
    frame, as zstandard's one-shot compressor writes it)."""
    noise = random.Random(11)
    batches = [data_batch(0, 3, codec), data_batch(3, 30, codec), bytearray(build_batch(
        [Record(33, 1_700_000_000_000, b"k", noise.randbytes(900))], codec=codec)),
        data_batch(34, 2, codec), bytearray(build_batch(
        [Record(36 + i, 1_700_000_000_000, b"k", noise.randbytes(30_000)) for i in range(3)],
        codec=codec))]  # fmt: skip
    chunk = np.frombuffer(bytes(b"".join(batches)), dtype=np.uint8)
    run = inflate(chunk, 0, 1 << 22)
    assert run is not None and len(run.starts) == len(batches)
    out = bytearray(run.data.tobytes())
    rows = []
    for i, start in enumerate(run.starts):
        size = RecordBatch(bytes(out[start:])).size_in_bytes
        if i in (1, 2, 4):  # "rebuilt": one record fewer (the bytes need not parse)
            count = int.from_bytes(out[start + 57 : start + 61], "big")
            out[start + 57 : start + 61] = (count - 1).to_bytes(4, "big")
        if i == 3:  # rebuilt with no records left
            out[start + 57 : start + 61] = (0).to_bytes(4, "big")
            out[start + 8 : start + 12] = (49).to_bytes(4, "big")
            size = 61
        rows.append([start, size, run.last_offsets[i], 1_700_000_000_000])
    plain = np.frombuffer(bytes(out), dtype=np.uint8)
    with_kernel = deflate(run, chunk, plain, rows)
    monkeypatch.setattr(kernel, "AVAILABLE", False)
    assert with_kernel == deflate(run, chunk, plain, rows)
    stored = with_kernel[0]
    first = RecordBatch(stored)
    assert stored[: first.size_in_bytes] == bytes(batches[0])  # kept whole: the original
    for info in with_kernel[1][1:]:
        batch = RecordBatch(stored[info.position :])
        assert batch.is_valid() and batch.codec == codec


@pytest.mark.parametrize(("name", "taken"), [
    ("zstd only", 3), ("zstd without a content size", 3), ("zstd, two frames in a batch", 2),
    ("a zstd frame cut short", 1), ("then zstd, then lz4", 3), ("a multi-block frame", 1),
])  # fmt: skip
def test_the_kernel_takes_the_batches_it_can_decode(name: str, taken: int) -> None:
    """How far one kernel call gets into a run: every lz4 and zstd batch (a zstd frame without
    a content size, as Kafka's Java producer writes it, and several frames in one batch too),
    up to a frame cut short or an lz4 frame of several blocks."""
    chunk = np.frombuffer(bytes(b"".join(RUNS[name])), dtype=np.uint8)
    out = np.empty((1 << 20) + kernel.ROOM, dtype=np.uint8)
    meta = np.empty((64, kernel.META), dtype=np.int64)
    _, count, _ = kernel.inflate_runs(chunk, 0, 1 << 20, out, meta, ZstdContexts().box, *NO_DROPS)
    assert count == taken
