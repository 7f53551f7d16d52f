"""``kernels.zstd_contexts``: the codec kernels keep one zstd decompression and one compression
context per thread, the same from call to call, another in another thread, and free them when
the thread's holder goes; batches decoded and compressed again through kept contexts are the
bytes fresh ones give (zstandard's, and the Python loop's)."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zstandard

from kafkatier.storage.cleaner.compressed import deflate, inflate
from kafkatier.storage.cleaner.kernels import codec_runs as kernel
from kafkatier.storage.cleaner.kernels import zstd_contexts
from kafkatier.storage.cleaner.kernels.codec_runs import CCTX, DCTX
from kafkatier.storage.cleaner.kernels.superseded import NO_DROPS
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import BATCH_HEADER_SIZE, Codec

pytestmark = pytest.mark.skipif(not kernel.AVAILABLE, reason="no lz4/zstd library to link")
NOW = 1_700_000_000_000


def zstd_run(base: int, batches: int = 3, records: int = 20) -> np.ndarray:
    parts = [build_batch([Record(base + b * records + i, NOW, b"k%d" % i, b"v%d" % (b * i) * 40)
                          for i in range(records)], codec=Codec.ZSTD)
             for b in range(batches)]  # fmt: skip
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def rebuilt(chunk: np.ndarray) -> tuple[bytes, list[Any]]:
    """The run inflated and each batch written back with its first record dropped (so
    compressed again), through the kernels."""
    run = inflate(chunk, 0, 1 << 20)
    assert run is not None
    out = bytearray(run.data.tobytes())
    rows = []
    for start, last in zip(run.starts, run.last_offsets, strict=True):
        size = RecordBatch(bytes(out[start:])).size_in_bytes
        count = int.from_bytes(out[start + 57 : start + 61], "big")
        out[start + 57 : start + 61] = (count - 1).to_bytes(4, "big")
        rows.append([start, size, last, NOW])
    return deflate(run, chunk, np.frombuffer(bytes(out), dtype=np.uint8), rows)


def test_a_thread_keeps_its_contexts_from_call_to_call() -> None:
    box = zstd_contexts.of_thread()
    rebuilt(zstd_run(0))
    made = (int(box[DCTX]), int(box[CCTX]))
    assert made[0] and made[1]  # both made at the first zstd batch
    rebuilt(zstd_run(100))
    assert (int(box[DCTX]), int(box[CCTX])) == made
    assert zstd_contexts.of_thread() is box


def test_another_thread_has_its_own_and_frees_them_when_it_ends() -> None:
    mine = zstd_contexts.of_thread()
    rebuilt(zstd_run(0))
    seen: list[np.ndarray] = []

    def work() -> None:
        box = zstd_contexts.of_thread()
        rebuilt(zstd_run(50))
        seen.append(box.copy())
        seen.append(box)  # the thread's own array, to look at once the thread is gone

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    del thread
    gc.collect()
    theirs, left = seen
    assert theirs[DCTX] and theirs[CCTX]
    assert int(theirs[DCTX]) != int(mine[DCTX]) and int(theirs[CCTX]) != int(mine[CCTX])
    assert not left.any()  # freed with the thread's holder (and the pointers cleared)
    assert mine[DCTX] and mine[CCTX]  # this thread's still there


def test_kept_contexts_write_what_fresh_ones_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches rebuilt one run after another through the thread's kept contexts equal those
    of a fresh holder and of the Python loop, and each frame is zstandard's one-shot one."""
    runs = [zstd_run(base, 4, 10 + base % 7) for base in (0, 100, 200)]
    kept = [rebuilt(chunk) for chunk in runs]
    fresh = zstd_contexts.ZstdContexts()
    monkeypatch.setattr(zstd_contexts, "of_thread", lambda: fresh.box)
    assert [rebuilt(chunk) for chunk in runs] == kept
    monkeypatch.setattr(kernel, "AVAILABLE", False)
    assert [rebuilt(chunk) for chunk in runs] == kept
    for stored, infos in kept:
        for info in infos:
            batch = RecordBatch(stored[info.position : info.position + info.size])
            assert batch.is_valid() and batch.codec == Codec.ZSTD
            plain = zstandard.ZstdDecompressor().decompress(
                stored[info.position + BATCH_HEADER_SIZE : info.position + info.size]
            )
            one_shot = zstandard.ZstdCompressor(level=3).compress(plain)
            assert stored[info.position + BATCH_HEADER_SIZE : info.position + info.size] == one_shot


def test_a_frame_that_fails_leaves_the_context_fit_for_the_next() -> None:
    """A zstd frame cut short stops the kernel at its batch; the thread's context then decodes
    the next run as a fresh one does."""
    good = zstd_run(0, 2)
    first = RecordBatch(bytes(good)).size_in_bytes
    broken = bytearray(good.tobytes())
    broken[first - 3 : first] = b"\x00\x00\x00"  # the first batch's frame ends in zeros
    box = zstd_contexts.of_thread()
    out = np.empty((1 << 20) + kernel.ROOM, dtype=np.uint8)
    meta = np.empty((8, kernel.META), dtype=np.int64)
    _, count, _ = kernel.inflate_runs(np.frombuffer(bytes(broken), np.uint8), 0, 1 << 20, out,
                                      meta, box, *NO_DROPS)  # fmt: skip
    assert count == 0 and box[DCTX]  # refused at once, with the context made
    _, count, total = kernel.inflate_runs(good, 0, 1 << 20, out, meta, box, *NO_DROPS)
    fresh_out = np.empty_like(out)
    fresh = zstd_contexts.ZstdContexts()
    again = kernel.inflate_runs(good, 0, 1 << 20, fresh_out, meta.copy(), fresh.box, *NO_DROPS)
    assert again[1:] == (count, total)
    assert count == 2 and out[:total].tobytes() == fresh_out[:total].tobytes()


def test_a_process_that_kept_contexts_exits_without_a_word(tmp_path: Path) -> None:
    """The main thread's holder is collected at interpreter exit, when imports no longer work:
    freeing it there must print nothing (it printed "Exception ignored in ... ImportError")."""
    here = str(Path(__file__).parent)
    script = (
        f"import sys; sys.path.insert(0, {here!r})\n"
        "from test_zstd_contexts import rebuilt, zstd_run\n"
        "from kafkatier.storage.cleaner.kernels import zstd_contexts\n"
        "rebuilt(zstd_run(0))\n"
        "assert zstd_contexts.of_thread().all()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
