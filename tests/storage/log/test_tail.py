"""LogFile: a ``.log``'s batch headers read through a window find exactly the batches the
segment's one-``pread``-a-header scan finds (large and small batches, legacy messages, a torn
tail), with each v2 batch's attributes and producer id; framed in Python (``headers``) and by
the C library (``table``: ``storage/native/headers.c``) alike."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkatier.storage import native
from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.log import tail
from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.header_table import Header, HeaderList, HeaderTable
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.log.tail import LogFile
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import ATTR_TRANSACTIONAL, BATCH_HEADER

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
LEGACY = CORPUS / "xpxwo100__bullShit" / "tmp" / "kafka-logs" / "topic1-0"


WALKS = ["python", "table without the library", pytest.param("table", marks=pytest.mark.skipif(
    native.native() is None, reason="the C library cannot be built here: Python frames alone"))]


@pytest.fixture(params=WALKS)
def walk(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Callable[[LogFile, int], list[Header]]:
    """``LogFile.headers``, or ``LogFile.table``'s rows as headers (framed by the C library, or
    without it by ``headers``)."""
    if request.param == "python":
        return lambda log, position=0: list(log.headers(position))
    if request.param == "table without the library":
        monkeypatch.setattr(tail, "native", lambda: None)
    monkeypatch.setattr(tail, "SMALL", 0)  # small files too: framed in C where it is built

    def from_table(log: LogFile, position: int = 0) -> list[Header]:
        rows = log.table(position).rows.tolist()
        return [Header(BatchPosition(*row[:5]), row[5], row[6]) for row in rows]

    return from_table


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
def test_headers_are_the_segment_scan(tmp_path: Path, monkeypatch, window: int, walk) -> None:
    monkeypatch.setattr(tail, "WINDOW", window)
    monkeypatch.setattr(tail, "LARGE_BATCH", window // 16)
    _write(tmp_path / "00000000000000000000.log", seed=window)
    segment = LogSegment(tmp_path, 0, writable=False, read_indexes=False)
    data = (tmp_path / "00000000000000000000.log").read_bytes()
    with LogFile(str(segment.log_path)) as log:
        found = walk(log)
    assert [h.at for h in found] == list(segment.scan_headers())
    fields = [BATCH_HEADER.unpack_from(data, h.at.position) for h in found]
    assert [(h.attributes, h.producer_id) for h in found] == [(f[5], f[9]) for f in fields]
    with LogFile(str(segment.log_path)) as log:
        assert [h.at for h in walk(log, found[7].at.position)] == [h.at for h in found[7:]]


def test_a_torn_tail_ends_the_log_and_a_bad_header_is_named(tmp_path: Path, walk) -> None:
    path = tmp_path / "00000000000000000000.log"
    _write(path, seed=1)
    whole = path.read_bytes()
    with LogFile(str(path)) as log:
        batches = [h.at for h in log.headers()]
    for cut in (1, 30, 60, batches[-1].size - 1):
        path.write_bytes(whole[: len(whole) - cut])
        with LogFile(str(path)) as log:
            assert [h.at for h in walk(log)] == batches[:-1]
    for at, field, value in ((3, 8, 5), (3, 16, 3), (0, 8, 5), (len(batches) - 1, 16, 7)):
        bad = bytearray(whole)  # a batchLength below any batch's; a magic above 2
        bad[batches[at].position + field : batches[at].position + 12 + (field > 8) * 5] = (
            value.to_bytes(4 if field == 8 else 1, "big"))
        path.write_bytes(bad)
        with LogFile(str(path)) as log, pytest.raises(CorruptRecordError) as info:
            walk(log)
        assert (info.value.file, info.value.position) == (str(path), batches[at].position)


@pytest.mark.skipif(not LEGACY.is_dir(), reason=f"Kafka corpus not found at {LEGACY}")
def test_legacy_messages_as_the_segment_scan(tmp_path: Path, walk) -> None:
    shutil.copy(LEGACY / "00000000000000000000.log", tmp_path)
    segment = LogSegment(tmp_path, 0, writable=False, read_indexes=False)
    with LogFile(str(segment.log_path)) as log:
        found = walk(log)
    assert found and [h.at for h in found] == list(segment.scan_headers())
    assert {(h.at.magic, h.attributes, h.producer_id) for h in found} == {(1, 0, -1)}


@pytest.mark.skipif(native.native() is None, reason="the C library cannot be built here")
def test_the_library_stops_at_a_header_across_the_window_end(tmp_path: Path) -> None:
    """A batch whose header runs past the window (though the batch is whole in the file) is
    left for the next read, never framed from bytes past the window."""
    from kafkatier.storage.native.headers import walk_headers

    path = tmp_path / "00000000000000000000.log"
    _write(path, seed=3)
    data = path.read_bytes()
    with LogFile(str(path)) as log:
        batches = [h.at for h in log.headers()]
    for k in (1, 5, len(batches) - 1):
        for into in (0, 17, 30, 60):  # bytes of the k-th header inside the window
            window = data[: batches[k].position + into]
            rows, end = walk_headers(window, 0, len(data))
            assert (len(rows), end) == (k, batches[k].position)
            assert rows[:, 0].tolist() == [b.position for b in batches[:k]]


@pytest.mark.skipif(native.native() is None, reason="the C library cannot be built here")
def test_rows_and_objects_answer_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table framed in C (rows) and one framed in Python (``HeaderList``) give the same
    transactional batches, offsets located and positions, for every offset."""
    path = tmp_path / "00000000000000000000.log"
    _write(path, seed=2)  # every fifth batch transactional
    monkeypatch.setattr(tail, "SMALL", 0)
    with LogFile(str(path)) as log:
        objects, rows = HeaderList(log.headers()), log.table()
    assert isinstance(rows, HeaderTable) and (rows.rows == objects.rows).all()
    assert (rows.last, len(rows)) == (objects.last, 40) and objects.last is not None
    last = objects.headers[-1].at.last_offset
    txns = [h for h in objects.headers if h.attributes & ATTR_TRANSACTIONAL]
    assert len(txns) == 8
    for offset in range(-1, last + 3):
        assert rows.transactional(offset) == objects.transactional(offset) == [
            h for h in txns if h.at.last_offset >= offset]  # fmt: skip
        start = objects.start_of(offset)
        assert rows.start_of(offset) == start
        assert list(rows.positions(start)) == list(objects.positions(start))
        assert all(h.at.last_offset < offset for h in objects.headers[:start])


@pytest.mark.skipif(native.native() is None, reason="the C library cannot be built here")
@pytest.mark.parametrize("seed", range(4))
def test_c_and_python_frame_damaged_files_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Random damage to a log's headers (a length, a magic, an offset byte) and random cuts:
    the C framing finds the same batches as Python's, or the same fault at the same position."""
    monkeypatch.setattr(tail, "SMALL", 0)
    monkeypatch.setattr(tail, "WINDOW", 4096)  # many windows, headers across their ends
    monkeypatch.setattr(tail, "LARGE_BATCH", 4096 // 16)
    rng = random.Random(seed)
    path = tmp_path / "00000000000000000000.log"
    _write(path, seed=seed)
    whole = path.read_bytes()
    with LogFile(str(path)) as log:
        starts = [h.at.position for h in log.headers()]

    def framed(how: Callable[[LogFile], object]) -> object:
        with LogFile(str(path)) as log:
            try:
                return how(log)
            except CorruptRecordError as exc:
                return ("fault", exc.position)

    for _ in range(60):
        data = bytearray(whole[: rng.choice([len(whole), rng.randrange(len(whole))])])
        for _ in range(rng.randint(0, 2)):
            batch = rng.choice(starts)
            field, value = rng.choice([
                (rng.choice([0, 7, 8, 9, 10, 21, 22, 23, 26, 43, 50]), rng.randrange(256)),
                (11, rng.randrange(30)), (16, rng.randrange(5))])  # fmt: skip
            if batch + field < len(data):
                if field == 11:  # a small batchLength, legal or not
                    data[batch + 8 : batch + 11] = bytes(3)
                data[batch + field] = value
        path.write_bytes(bytes(data))
        python = framed(lambda log: [(h.at, h.attributes, h.producer_id) for h in log.headers()])
        c = framed(lambda log: [(BatchPosition(*r[:5]), r[5], r[6])
                                for r in log.table().rows.tolist()])  # fmt: skip
        assert c == python
