"""``kafkatier produce`` into more partitions than the process may open files, new topic then
existing topic: every record lands where Kafka's partitioner puts it, all durable, none lost."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from kafka.record import MemoryRecords

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.reader import iter_records
from kafkatier.storage.partitioner import assign_partitions

KAFKATIER = Path(sys.executable).with_name("kafkatier")
PARTITIONS, RECORDS, LIMIT = 256, 1024, 48


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def test_produce_to_more_partitions_than_open_files(tmp_path: Path) -> None:
    keys = [f"user-{i}".encode() for i in range(RECORDS)]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": keys, "value": [b"v" * 100] * RECORDS}), source)
    command = [str(KAFKATIER), "produce", str(tmp_path / "logs"), "--topic", "t", "--input",
               str(source), "--compression", "lz4"]  # fmt: skip
    for extra in (["--partitions", str(PARTITIONS)], ["--max-open-files", "16"]):  # new, then
        done = subprocess.run(command + extra, capture_output=True, text=True,
                              preexec_fn=limited, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.startswith(f"produced {RECORDS} records to t\n")
        lines = done.stdout.splitlines()  # ten partitions listed, one line for the rest
        assert len(lines) == 12 and lines[1].startswith("  t-0: ")
        written = len(set(assign_partitions(pa.array(keys), PARTITIONS).tolist()))
        assert lines[-1].startswith(f"  ... and {written - 10} more partitions, ")
    expected = assign_partitions(pa.array(keys), PARTITIONS).tolist()
    with LogDirectory(tmp_path / "logs") as log_dir:
        assert len(log_dir.logs) == PARTITIONS
        found = {
            record.key: p for (_t, p), log in log_dir.logs.items() for record in iter_records(log)
        }
        counts = [log_dir.logs[("t", p)].log_end_offset for p in range(PARTITIONS)]
    assert found == dict(zip(keys, expected, strict=True))
    assert counts == [2 * expected.count(p) for p in range(PARTITIONS)]


def test_a_bad_budget_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"value": [b"v"]}), source)
    done = subprocess.run([str(KAFKATIER), "produce", str(tmp_path / "logs"), "--topic", "t",
                           "--input", str(source), "--max-open-files", "3"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "kafkatier produce: error: must be -1 (half the open-file limit) or at least 16 "
        "(setting=log.max.open.files, value=3)\n"
    )


def test_rows_without_key_or_partition_columns_are_spread_round_robin(tmp_path: Path) -> None:
    """``value`` is the only required column: a file of values alone (JSON Lines, CSV,
    Parquet) gives every record, spread evenly over the partitions as a Kafka producer spreads
    keyless records (each run's round robin from partition 0, as a new producer's
    ``RoundRobinPartitioner``)."""
    sources = tmp_path / "values.jsonl", tmp_path / "values.csv", tmp_path / "values.parquet"
    sources[0].write_text("".join(f'{{"value": "j{i}"}}\n' for i in range(5)))
    sources[1].write_text("value\n" + "".join(f"c{i}\n" for i in range(4)))
    pq.write_table(pa.table({"value": [f"p{i}".encode() for i in range(3)]}), sources[2])
    for i, source in enumerate(sources):
        extra = ["--partitions", "3"] if i == 0 else []
        done = subprocess.run([str(KAFKATIER), "produce", str(tmp_path / "logs"), "--topic", "t",
                               "--input", str(source), *extra],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"produced {(5, 4, 3)[i]} records to t\n")
    with LogDirectory(tmp_path / "logs") as log_dir:
        values = {p: [r.value for r in iter_records(log_dir.logs[("t", p)])] for p in range(3)}
    assert sorted(v for vs in values.values() for v in vs) == sorted(
        [f"j{i}".encode() for i in range(5)] + [f"c{i}".encode() for i in range(4)]
        + [f"p{i}".encode() for i in range(3)]
    )  # fmt: skip
    assert [len(vs) for vs in values.values()] == [2 + 2 + 1, 2 + 1 + 1, 1 + 1 + 1]


def test_columns_of_nulls_only_are_absent_values(tmp_path: Path) -> None:
    """A JSON Lines, CSV or Parquet column holding nothing but nulls has Arrow's null type:
    ``key``, ``headers``, ``timestamp`` and ``partition`` columns of nulls only mean no key, no
    headers, the produce time and the default partitioner, as a null in any other column does
    (it was refused: "column 'key' has type null"), and a ``value`` of nulls only is tombstones."""
    rows = [{"key": None, "value": f"v{i}", "headers": None, "timestamp": None, "partition": None}
            for i in range(4)]  # fmt: skip
    sources = [tmp_path / "nulls.jsonl", tmp_path / "nulls.csv", tmp_path / "nulls.parquet",
               tmp_path / "tombstones.jsonl"]  # fmt: skip
    sources[0].write_text("".join(json.dumps(row) + "\n" for row in rows))
    sources[1].write_text("key,value,timestamp,partition\n"
                          + "".join(f",c{i},,\n" for i in range(4)))  # fmt: skip
    pq.write_table(pa.table({"key": pa.nulls(4), "value": [f"p{i}".encode() for i in range(4)],
                             "headers": pa.nulls(4), "timestamp": pa.nulls(4)}), sources[2])
    sources[3].write_text("".join(json.dumps({"key": f"k{i}", "value": None}) + "\n"
                                  for i in range(4)))  # fmt: skip
    for source in sources:
        done = subprocess.run([str(KAFKATIER), "produce", str(tmp_path / "logs"), "--topic", "t",
                               "--input", str(source), "--partitions", "2"],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
    with LogDirectory(tmp_path / "logs") as log_dir:
        records = [r for p in range(2) for r in iter_records(log_dir.logs[("t", p)])]
    assert len(records) == 16
    keyless = [r for r in records if r.key is None]
    assert sorted(r.value for r in keyless) == sorted(
        [f"{c}{i}".encode() for c in "vcp" for i in range(4)])
    assert all(not r.headers and r.timestamp > 0 for r in keyless)
    assert sorted(r.key for r in records if r.value is None) == [f"k{i}".encode() for i in range(4)]


def kafka_python_records(log_dir: Path, topic: str) -> list[tuple[bytes | None, bytes | None,
                                                                 int, list[Any]]]:
    """(key, value, timestamp, headers) of every record of ``topic``, by kafka-python's parser."""
    out = []
    for path in sorted(log_dir.glob(f"{topic}-*/*.log")):
        records = MemoryRecords(path.read_bytes())
        while records.has_next():
            out += [(r.key, r.value, r.timestamp, r.headers) for r in records.next_batch()]
    return out


def produce(log_dir: Path, topic: str, source: Path, *extra: str) -> Any:
    command = [str(KAFKATIER), "produce", str(log_dir), "--topic", topic, "--input", str(source)]
    return subprocess.run([*command, *extra], capture_output=True, text=True, timeout=120)


def test_inputs_read_as_spark_and_python_write_them(tmp_path: Path) -> None:
    """What an outside tester's files showed: CSV text such as NA, NULL, nan or #N/A is text
    (Arrow's default null markers made those values tombstones and keys null) and a quoted ""
    is an empty value, only an empty field null, as Spark's CSV reader; a JSON Lines row over
    Arrow's 1 MiB block is read; ``"headers": []`` in every row is no headers; ISO timestamps
    with microseconds (Python's ``isoformat()``) keep their milliseconds; a categorical
    (dictionary) key column is partitioned by its values."""
    logs = tmp_path / "logs"
    csv = tmp_path / "x.csv"
    csv.write_text('key,value\nu1,active\nu2,NA\nu3,NULL\nu4,nan\nNA,#N/A\nu6,""\nu7,\n')
    assert produce(logs, "csv", csv).returncode == 0
    assert [(k, v) for k, v, _, _ in kafka_python_records(logs, "csv")] == [
        (b"u1", b"active"), (b"u2", b"NA"), (b"u3", b"NULL"), (b"u4", b"nan"), (b"NA", b"#N/A"),
        (b"u6", b""), (b"u7", None)]  # fmt: skip
    big = tmp_path / "big.jsonl"
    big.write_text(json.dumps({"key": "a", "value": "x" * 2_200_000}) + "\n"
                   + "".join(json.dumps({"key": f"k{i}", "value": "v", "headers": [],
                                         "timestamp": f"2024-01-01T00:00:00.{i}23456+00:00"})
                             + "\n" for i in range(3)))  # fmt: skip
    done = produce(logs, "big", big, "--config", "max.message.bytes=5000000")
    assert done.returncode == 0, done.stderr
    found = kafka_python_records(logs, "big")
    assert len(found[0][1] or b"") == 2_200_000
    assert [(t, h) for _, _, t, h in found[1:]] == [(1704067200000 + i * 100 + 23, [])
                                                     for i in range(3)]  # fmt: skip
    keys = ["a", "b", "a", "c", "zz", "q"] * 3
    pq.write_table(pa.table({"key": pa.array(keys).dictionary_encode(),
                             "value": [b"v"] * len(keys)}), tmp_path / "cat.parquet")  # fmt: skip
    assert produce(logs, "cat", tmp_path / "cat.parquet", "--partitions", "2").returncode == 0
    expected = assign_partitions(pa.array(keys), 2)
    with LogDirectory(logs) as log_dir:
        placed = {p: sorted(r.key for r in iter_records(log_dir.logs[("cat", p)])) for p in (0, 1)}
    assert placed == {p: sorted(k.encode() for k, q in zip(keys, expected, strict=True) if q == p)
                      for p in (0, 1)}  # fmt: skip


def test_a_recreated_topic_starts_from_kafkas_defaults(tmp_path: Path) -> None:
    """A topic deleted (its partition directories removed) and created again has the settings
    it is created with, not the deleted one's: Kafka deletes a topic's configs with it."""
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": [b"k"], "value": [b"v"]}), source)
    logs = tmp_path / "logs"

    def produce(*config: str) -> None:
        extra = [arg for c in config for arg in ("--config", c)]
        done = subprocess.run([str(KAFKATIER), "produce", str(logs), "--topic", "t", "--input",
                               str(source), *extra], capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr

    produce("cleanup.policy=compact", "message.timestamp.type=LogAppendTime")
    settings = logs / "kafkatier-topic.t.properties"
    assert "cleanup.policy=compact" in settings.read_text()
    produce("retention.ms=1000")  # an existing topic: its settings merged
    assert "cleanup.policy=compact" in settings.read_text()
    shutil.rmtree(logs / "t-0")
    produce()
    assert "cleanup.policy" not in settings.read_text()  # only the new topic's id and count
    with LogDirectory(logs) as log_dir:
        log = log_dir.logs[("t", 0)]
        assert not log.config.is_compacted and log.config.message_timestamp_type == "CreateTime"
    shutil.rmtree(logs / "t-0")
    produce("retention.ms=5000")
    assert "retention.ms=5000" in settings.read_text()
    assert "cleanup.policy" not in settings.read_text()


def test_a_record_too_large_for_the_topic_names_the_settings(tmp_path: Path) -> None:
    """A record over the topic's batch limit is one line naming the settings that set it, and
    nothing of the input is appended (``max.message.bytes=0`` and ``segment.bytes=14`` are
    both values Kafka accepts)."""
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": [b"k"], "value": [b"v" * 40]}), source)
    for setting in ("max.message.bytes=0", "segment.bytes=14"):
        done = subprocess.run([str(KAFKATIER), "produce", str(tmp_path / "logs"), "--topic", "t",
                               "--input", str(source), "--config", setting],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert "max.message.bytes and segment.bytes" in done.stderr, done.stderr
        assert "no record of the input was appended" in done.stderr
        with LogDirectory(tmp_path / "logs") as log_dir:
            assert all(log.log_end_offset == 0 for log in log_dir.logs.values())


def test_a_refused_file_leaves_no_topic_and_no_saved_settings(tmp_path: Path) -> None:
    """A file refused for its columns, a row's partition or the topic's record rules (a
    timestamp out of range, a missing key): no partition directories (a
    later ``--partitions`` was refused as a re-partitioning of an empty topic) and no saved
    ``--config`` (a ``cleanup.policy=compact`` saved that way blocked every later ``clean``)."""
    logs = tmp_path / "logs"
    no_value, out_of_range = tmp_path / "no_value.csv", tmp_path / "range.csv"
    no_value.write_text("key,other\na,b\n")
    out_of_range.write_text("value,partition\na,0\nb,9\n")
    assert produce(logs, "orders", no_value, "--partitions", "4").returncode == 2
    done = produce(logs, "ev", out_of_range, "--partitions", "2",
                   "--config", "cleanup.policy=compact")  # fmt: skip
    assert done.returncode == 1 and "partition 9 is outside" in done.stderr
    old, keyless = tmp_path / "old.csv", tmp_path / "keyless.csv"  # refused by the topic's
    old.write_text("value,timestamp\na,1000\n")  # settings (outside tester: these created it)
    keyless.write_text("key,value\n,a\n")
    done = produce(logs, "ts", old, "--config", "message.timestamp.before.max.ms=60000")
    assert done.returncode == 1 and "timestamp 1000 is out of range" in done.stderr
    done = produce(logs, "compacted", keyless, "--config", "cleanup.policy=compact")
    assert done.returncode == 1 and "cannot accept a record without a key" in done.stderr
    assert sorted(p.name for p in logs.iterdir() if not p.name.startswith(".")) == [
        "kafkatier-writer.generation", "meta.properties"]  # fmt: skip
    assert produce(logs, "orders", out_of_range, "--partitions", "10").returncode == 0


def test_produce_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow's numpy conversion imports pandas (0.4 s of a short run's start-up): a file
    with null keys, explicit partitions with nulls, timestamps with nulls and headers goes
    in without it (``storage.arrow.numpy_views``), and every row lands where it says."""
    rows = 40
    table = pa.table({
        "key": pa.array([None if i % 3 == 0 else b"k%d" % i for i in range(rows)]),
        "value": pa.array([b"v%d" % i for i in range(rows)]),
        "partition": pa.array([None if i % 4 else i % 3 for i in range(rows)], pa.int32()),
        "timestamp": pa.array([None if i % 5 == 0 else 1_700_000_000_000 + i for i in range(rows)],
                              pa.int64()),
        "headers": pa.array([[("h", b"%d" % i)] for i in range(rows)],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    })  # fmt: skip
    source = tmp_path / "in.parquet"
    pq.write_table(table, source)
    script = (
        "import sys\n"
        "from kafkatier.cli.main import main\n"
        f"code = main(['produce', {str(tmp_path / 'logs')!r}, '--topic', 't', '--input', "
        f"{str(source)!r}, '--partitions', '3'])\n"
        "print('pandas imported:', 'pandas' in sys.modules, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.strip().endswith("pandas imported: False"), done.stderr[-3000:]
    explicit = [None if i % 4 else i % 3 for i in range(rows)]
    with LogDirectory(tmp_path / "logs") as log_dir:
        found = {record.value: p for (_t, p), log in log_dir.logs.items()
                 for record in iter_records(log)}  # fmt: skip
    assert len(found) == rows
    assert all(found[b"v%d" % i] == p for i, p in enumerate(explicit) if p is not None)
