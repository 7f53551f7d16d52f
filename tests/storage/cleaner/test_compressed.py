"""``compressed.inflate``: which batches a run of compressed data batches takes, and that anything
else is left to the Python path (which reports it) rather than raised from here."""

from __future__ import annotations

import numpy as np

from kafkatier.storage.cleaner.compressed import Scratch, inflate
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import ATTRIBUTES_OFFSET, Codec


def lz4_batch(base: int, n: int = 3) -> bytearray:
    records = [Record(base + i, 1_700_000_000_000, b"k%d" % i, b"v" * 50) for i in range(n)]
    return bytearray(build_batch(records, codec=Codec.LZ4))


def test_a_run_of_compressed_batches_is_inflated_whole() -> None:
    chunk = np.frombuffer(bytes(lz4_batch(0) + lz4_batch(3)), dtype=np.uint8)
    run = inflate(chunk, 0, 1 << 20)
    assert run is not None
    assert run.last_offsets == [2, 5] and run.codecs == [Codec.LZ4, Codec.LZ4]
    assert run.real_starts[1] == run.real_sizes[0]


def test_an_unknown_codec_id_ends_the_run_instead_of_raising() -> None:
    bad = lz4_batch(3)
    bad[ATTRIBUTES_OFFSET + 1] = (bad[ATTRIBUTES_OFFSET + 1] & ~0x07) | 0x05  # codec id 5
    chunk = np.frombuffer(bytes(lz4_batch(0) + bad), dtype=np.uint8)
    run = inflate(chunk, 0, 1 << 20)
    assert run is not None and run.last_offsets == [2]  # the run stops before it
    assert inflate(chunk, run.real_sizes[0], 1 << 20) is None  # left to the Python path


def test_runs_inflated_into_one_scratch_hold_each_batch_decompressed() -> None:
    """Runs inflated one after another into one reused buffer: each run's data is its batches'
    headers (length and codec bits rewritten) and decompressed records, whatever the codec,
    also when a batch outgrows the buffer (it is replaced, not resized under the last run)."""
    big = [Record(7 + i, 1_700_000_000_000, b"k", bytes([i % 7]) * 300_000) for i in range(8)]
    small = [Record(3 + i, 1_700_000_000_000, b"z%d" % i, b"w" * 90) for i in range(4)]
    batches = [lz4_batch(0), bytearray(build_batch(small, codec=Codec.ZSTD)),
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
