"""LogFile: a ``.log``'s batch headers read through a window find exactly the batches the
segment's one-``pread``-a-header scan finds (large and small batches, legacy messages, a torn
tail), with each v2 batch's attributes and producer id."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.log import tail
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.log.tail import LogFile
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import BATCH_HEADER

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
LEGACY = CORPUS / "xpxwo100__bullShit" / "tmp" / "kafka-logs" / "topic1-0"


def _write(path: Path, seed: int) -> None:
    """Batches of 1 B to ~200 KiB values (beside and past ``LARGE_BATCH``), some transactional."""
    rng = random.Random(seed)
    offset, data = 0, bytearray()
    for i in range(40):
        n = rng.choice((1, 3))
        size = rng.choice((1, 50, 3000, 70_000, 200_000))
        records = [Record(offset + j, 1000 + j, None, b"v" * size, ()) for j in range(n)]
        txn = {"producer_id": 7, "producer_epoch": 0, "base_sequence": i, "transactional": True}
        data += build_batch(records, **(txn if i % 5 == 4 else {}))
        offset += n
    path.write_bytes(data)


@pytest.mark.parametrize("window", [tail.WINDOW, 100, 70_001])
def test_headers_are_the_segment_scan(tmp_path: Path, monkeypatch, window: int) -> None:
    monkeypatch.setattr(tail, "WINDOW", window)
    monkeypatch.setattr(tail, "LARGE_BATCH", window // 16)
    _write(tmp_path / "00000000000000000000.log", seed=window)
    segment = LogSegment(tmp_path, 0, writable=False, read_indexes=False)
    data = (tmp_path / "00000000000000000000.log").read_bytes()
    with LogFile(str(segment.log_path)) as log:
        found = list(log.headers())
    assert [h.at for h in found] == list(segment.scan_headers())
    fields = [BATCH_HEADER.unpack_from(data, h.at.position) for h in found]
    assert [(h.attributes, h.producer_id) for h in found] == [(f[5], f[9]) for f in fields]
    with LogFile(str(segment.log_path)) as log:
        assert [h.at for h in log.headers(found[7].at.position)] == [h.at for h in found[7:]]


def test_a_torn_tail_ends_the_log_and_a_bad_header_is_named(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    _write(path, seed=1)
    whole = path.read_bytes()
    with LogFile(str(path)) as log:
        batches = [h.at for h in log.headers()]
    for cut in (1, 30, batches[-1].size - 1):
        path.write_bytes(whole[: len(whole) - cut])
        with LogFile(str(path)) as log:
            assert [h.at for h in log.headers()] == batches[:-1]
    bad = bytearray(whole)
    bad[batches[3].position + 8 : batches[3].position + 12] = (5).to_bytes(4, "big")
    path.write_bytes(bad)
    with LogFile(str(path)) as log, pytest.raises(CorruptRecordError) as info:
        list(log.headers())
    assert (info.value.file, info.value.position) == (str(path), batches[3].position)


@pytest.mark.skipif(not LEGACY.is_dir(), reason=f"Kafka corpus not found at {LEGACY}")
def test_legacy_messages_as_the_segment_scan(tmp_path: Path) -> None:
    shutil.copy(LEGACY / "00000000000000000000.log", tmp_path)
    segment = LogSegment(tmp_path, 0, writable=False, read_indexes=False)
    with LogFile(str(segment.log_path)) as log:
        found = list(log.headers())
    assert found and [h.at for h in found] == list(segment.scan_headers())
    assert {(h.at.magic, h.attributes, h.producer_id) for h in found} == {(1, 0, -1)}
