"""kafkatier.storage.dump.paths: items agree with kafka-python on our writer's logs and on Kafka's
own (the corpus), JSON has exactly the documented fields, index/state files read as Kafka's vectors
say, damage is reported and ends the file, output streams in constant memory."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.record import MemoryRecords
from verify_fixtures import CORPUS, snappy_for_kafka_python, write_log_dir

from kafkatier.storage.dump.items import Item, to_json
from kafkatier.storage.dump.paths import NotDumpableError, dump_file, dump_paths
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import Codec, segment_file_name

VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"
BATCH_FIELDS = [
    "type", "file", "position", "size", "baseOffset", "lastOffset", "count", "magic", "codec",
    "timestampType", "maxTimestamp", "producerId", "producerEpoch", "baseSequence",
    "isTransactional", "isControl", "crcValid",
]  # fmt: skip
RECORD_FIELDS = ["type", "file", "offset", "timestamp", "key", "value", "headers"]
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@pytest.fixture(scope="module", autouse=True)
def _kafka_python_snappy() -> Iterator[None]:
    with snappy_for_kafka_python():
        yield


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_log_dir(tmp_path_factory.mktemp("dump") / "logs")


def of_type(items: list[Item], kind: str) -> list[Item]:
    return [item for item in items if item["type"] == kind]


def theirs(log: Path) -> Iterator[tuple[Any, list[tuple[Any, ...]]]]:
    """(batch, records) as kafka-python reads them."""
    memory = MemoryRecords(log.read_bytes())
    while memory.has_next():
        batch = memory.next_batch()
        records = [
            (r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value,
             [(k, v) for k, v in r.headers])
            for r in batch
        ]  # fmt: skip
        yield batch, records


def ours_from_json(items: list[Item]) -> list[tuple[Any, ...]]:
    """Records from the JSON form, base64 decoded back."""

    def raw(text: str | None) -> bytes | None:
        return None if text is None else base64.b64decode(text)

    out = []
    for item in items:
        if item["type"] == "record":
            j = json.loads(json.dumps(to_json(item)))
            headers = [(k, raw(v)) for k, v in j["headers"]]
            out.append((j["offset"], j["timestamp"], raw(j["key"]), raw(j["value"]), headers))
    return out


# ------------------------------------------------------------------------ our writer's logs


def test_batches_and_records_match_kafka_python(logs: Path) -> None:
    codecs = set()
    for log in sorted(logs.rglob("*.log")):
        items = list(dump_file(log, records=True))
        expected = list(theirs(log))
        batches = of_type(items, "batch")
        assert len(batches) == len(expected) and not of_type(items, "problem")
        position = 0
        for item, (batch, _) in zip(batches, expected, strict=True):
            assert (item["position"], item["size"]) == (position, batch.size_in_bytes)
            position += batch.size_in_bytes
            assert (item["baseOffset"], item["lastOffset"], item["count"]) == (
                batch.base_offset, batch.base_offset + batch.last_offset_delta, batch.records_count
            )  # fmt: skip
            assert (item["producerId"], item["producerEpoch"], item["baseSequence"]) == (
                batch.producer_id, batch.producer_epoch, batch.base_sequence
            )  # fmt: skip
            assert item["codec"] == CODEC_NAMES[batch.compression_type]
            assert (item["isTransactional"], item["isControl"]) == (
                batch.is_transactional, batch.is_control_batch
            )  # fmt: skip
            assert (item["maxTimestamp"], item["crcValid"]) == (batch.max_timestamp, True)
            codecs.add(item["codec"])
        assert ours_from_json(items) == [r for _, records in expected for r in records]
    assert codecs == set(CODEC_NAMES.values())


def test_json_has_exactly_the_documented_fields(logs: Path) -> None:
    items = list(dump_paths([logs / "events-0"], records=True))
    assert {tuple(to_json(i)) for i in of_type(items, "batch")} == {tuple(BATCH_FIELDS)}
    assert {tuple(to_json(i)) for i in of_type(items, "record")} == {tuple(RECORD_FIELDS)}
    markers = [i for i in items if i["type"] == "record" and "controlType" in i]
    assert {m["controlType"] for m in markers} == {"ABORT", "COMMIT"}
    for item in items:
        json.dumps(to_json(item))  # every item is JSON-serialisable


def test_partition_dir_order_and_state_files(logs: Path) -> None:
    items = list(dump_paths([logs / "events-0"]))
    files = [Path(i["file"]).name for i in of_type(items, "file")]
    bases = sorted({name[:20] for name in files if name[:20].isdigit()})
    assert files[-2:] == ["leader-epoch-checkpoint", "partition.metadata"]
    assert [n[:20] for n in files[:-2]] == sorted(n[:20] for n in files[:-2])
    assert len(bases) >= 4
    [txn] = of_type(items, "abortedTxn")
    assert txn["producerId"] == 2000 and txn["firstOffset"] < txn["lastOffset"]
    states = of_type(items, "producerState")
    assert {s["producerId"] for s in states} == {1000, 2000, 3000}
    assert of_type(items, "leaderEpoch") == [
        {"type": "leaderEpoch", "file": str(logs / "events-0" / "leader-epoch-checkpoint"),
         "epoch": 0, "startOffset": 0}
    ]  # fmt: skip


def test_log_dir_dumps_root_files_then_partitions(logs: Path) -> None:
    items = list(dump_paths([logs]))
    names = [Path(i["file"]).name for i in of_type(items, "file")]
    assert names[: names.index("recovery-point-offset-checkpoint") + 1] == [
        ".kafka_cleanshutdown", "log-start-offset-checkpoint", "meta.properties",
        "recovery-point-offset-checkpoint",
    ]  # fmt: skip
    points = {(i["topic"], i["partition"]): i["offset"] for i in of_type(items, "checkpointEntry")}
    ends = {}
    for partition in (0, 1):
        batches = of_type(list(dump_paths([logs / f"events-{partition}"])), "batch")
        ends[("events", partition)] = batches[-1]["lastOffset"] + 1
    assert points == ends
    [meta] = of_type(items, "metaProperties")
    assert meta["version"] == 1 and meta["nodeId"] == 0


# ------------------------------------------------------------------- index files (vectors)


def test_index_files_read_as_kafka_format_vectors(tmp_path: Path) -> None:
    vectors = json.loads((VECTORS / "index_entries.json").read_text())
    cases = [("offset_index", ".index"), ("time_index", ".timeindex")]
    for key, suffix in cases:
        [vector] = vectors[key]
        path = tmp_path / segment_file_name(vector["base_offset"], suffix)
        path.write_bytes(bytes.fromhex(vector["hex"]) + bytes(len(vector["hex"]) // 2 * 3))
        items = list(dump_file(path))
        entry, note = items[1], items[2]
        expected = {k: vector[k] for k in ("offset", "position", "timestamp") if k in vector}
        assert {k: entry[k] for k in expected} == expected
        assert note["type"] == "note" and "3 unused" in note["message"] and len(items) == 3
    [txn] = vectors["aborted_txn"]
    path = tmp_path / segment_file_name(100, ".txnindex")
    path.write_bytes(bytes.fromhex(txn["hex"]) + b"\x00\x00")
    entry, problem = list(dump_file(path))[1:]
    assert (entry["producerId"], entry["firstOffset"], entry["lastOffset"],
            entry["lastStableOffset"]) == (1000, 100, 150, 151)  # fmt: skip
    assert problem == {"type": "problem", "file": str(path), "position": 34,
                       "message": "2 bytes of a partial entry"}  # fmt: skip
    for key, suffix in cases:  # an index cut mid-entry: its whole entries, then the problem
        [vector] = vectors[key]
        path = tmp_path / segment_file_name(vector["base_offset"], suffix)
        whole = bytes.fromhex(vector["hex"])
        path.write_bytes(whole + whole[:5])
        *_, last = dump_file(path)
        assert last["type"] == "problem" and last["position"] == len(whole)
        assert last["message"].startswith("5 bytes of a partial entry")


# ------------------------------------------------------------------------------ damage


def _three_batches(path: Path) -> list[int]:
    """A .log of three batches; returns their positions."""
    data, positions = b"", []
    for i in range(3):
        positions.append(len(data))
        records = [Record(i * 2 + j, 1000 + j, b"k", b"v" * 40) for j in range(2)]
        data += build_batch(records, codec=Codec.GZIP)
    path.write_bytes(data)
    return positions


def test_torn_tail_is_reported_after_the_whole_batches(tmp_path: Path) -> None:
    log = tmp_path / segment_file_name(0, ".log")
    positions = _three_batches(log)
    log.write_bytes(log.read_bytes()[: positions[2] + 30])
    items = list(dump_file(log, records=True))
    assert [i["type"] for i in items] == ["file"] + ["batch", "record", "record"] * 2 + ["problem"]
    assert items[-1]["position"] == positions[2] and "incomplete" in items[-1]["message"]


def test_a_batch_failing_its_crc_is_shown_and_the_next_ones_too(tmp_path: Path) -> None:
    """As Kafka's DumpLogSegments (``isvalid: false``): a batch whose CRC fails but whose
    framing holds is reported, and the batches after it are shown (the dump stopped there,
    hiding valid batches)."""
    log = tmp_path / "events-0" / segment_file_name(0, ".log")
    log.parent.mkdir()
    positions = _three_batches(log)
    data = bytearray(log.read_bytes())
    data[positions[1] + 40] ^= 0xFF
    log.write_bytes(data)
    other = tmp_path / "events-0" / segment_file_name(6, ".log")
    _three_batches(other)
    items = list(dump_paths([log.parent], records=True))
    first = items[: items.index(next(i for i in items if i["file"] == str(other)))]
    assert [i["type"] for i in first] == ["file", "batch", "record", "record", "batch", "problem",
                                          "batch", "record", "record"]  # fmt: skip
    assert first[4]["crcValid"] is False and first[5]["position"] == positions[1]
    assert first[6]["position"] == positions[2] and first[6]["crcValid"] is True
    assert len(of_type(items, "batch")) == 3 + 3


def test_unusable_paths(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list(dump_paths([tmp_path / "nope.log"]))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(NotDumpableError):
        list(dump_paths([tmp_path / "notes.txt"]))


def test_dump_modifies_nothing(logs: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(logs, tmp_path / "copy"))
    for suffix, size in ((".index", 8), (".timeindex", 12)):  # preallocated active indexes
        active = sorted((copy / "events-0").glob(f"*{suffix}"))[-1]
        with open(active, "ab") as f:
            f.write(bytes(size * 50))

    def state() -> dict[str, tuple[str, int]]:
        return {str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
                for p in copy.rglob("*") if p.is_file()}  # fmt: skip

    before = state()
    for _ in dump_paths([copy], records=True):
        pass
    assert state() == before


def test_streams_in_constant_memory(tmp_path: Path) -> None:
    log = tmp_path / segment_file_name(0, ".log")
    with open(log, "wb") as f:
        for b in range(300):
            records = [Record(b * 50 + j, 5000 + j, b"key", b"x" * 64) for j in range(50)]
            f.write(build_batch(records, codec=Codec.LZ4))

    def peak(consume: Any) -> int:
        tracemalloc.start()
        consume(dump_paths([log], records=True))
        result = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return result

    streamed = peak(lambda items: sum(1 for _ in items))
    materialised = peak(list)
    assert streamed * 20 < materialised, (streamed, materialised)


# ------------------------------------------------------------------------------- corpus


CORPUS_SAMPLE = [
    "mscaldas2012__kafka-connect-spooldir",  # lz4, LogAppendTime
    "xpxwo100__bullShit",  # message format v1
    "LanXuage__dspider",  # gzip
    "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions",  # transactional
    "ArthurArutunyan04__Backend_labs",  # snappy, compaction gaps
]


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
@pytest.mark.parametrize("folder", CORPUS_SAMPLE)
def test_corpus_records_match_kafka_python(folder: str) -> None:
    logs = sorted((CORPUS / folder).rglob("*.log"), key=lambda p: -p.stat().st_size)[:40]
    checked = 0
    for log in logs:
        items = list(dump_file(log, records=True))
        assert not of_type(items, "problem"), log
        expected = [r for _, records in theirs(log) for r in records]
        assert ours_from_json(items) == expected, log
        checked += len(expected)
    assert checked > 0
