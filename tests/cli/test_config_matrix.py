"""Topic settings a user may give, drawn at random, through every command that touches the data:
``produce`` (twice, so that segments roll and compaction has something to do), ``clean``, a
sidecar pass to a remote store, ``restore``, the Spark reader over both tiers, and the Spark sink
(a micro-batch into a second topic of the same settings). Whatever the settings, the commands
succeed, every log verifies, the sink's rows read back committed and whole, and what can be read
(remote joined with local) is the produced records: each at its own offset, unchanged; all of
them where neither retention nor compaction may remove one; every key's latest record where
only compaction may. ``spark.read.format("kafkatier")`` reads exactly that too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatier.cli.main import main
from kafkatier.sink import KafkaLogSink
from kafkatier.sink.source.datasource import register_data_source
from kafkatier.storage.arrow.log import read_arrow
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.reader import IsolationLevel
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.read.remote_reader import joined_batches
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore

TOPIC = "matrix"
PARTITIONS = 2
Produced = dict[int, dict[int, tuple[bytes | None, bytes | None]]]  # partition -> offset -> kv

TOPIC_SETTINGS = st.fixed_dictionaries(
    {
        "segment.bytes": st.sampled_from(["700", "4096", "65536", "1073741824"]),
        "max.message.bytes": st.sampled_from(["1000", "1048588"]),
        "segment.ms": st.sampled_from(["1", "604800000"]),
        "cleanup.policy": st.sampled_from(["delete", "compact", "compact,delete"]),
        "message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"]),
        "min.compaction.lag.ms": st.sampled_from(["0", "3600000"]),
        "min.cleanable.dirty.ratio": st.sampled_from(["0.01", "0.5"]),
        "delete.retention.ms": st.sampled_from(["0", "86400000"]),
        "local.retention.bytes": st.sampled_from(["-2", "1000"]),
        "retention.ms": st.just("-1"),
        "remote.storage.enable": st.just("true"),
    }
)
COMPRESSION = st.sampled_from(["none", "lz4", "zstd", "gzip", "snappy"])


def _input(path: Path, start: int, rows: int) -> Path:
    keys = [f"key-{i % 13}".encode() for i in range(start, start + rows)]
    values = [None if i % 17 == 5 else f"value-{i:05d}".encode() * 3
              for i in range(start, start + rows)]  # fmt: skip
    pq.write_table(pa.table({"key": pa.array(keys, pa.binary()),
                             "value": pa.array(values, pa.binary())}), path)  # fmt: skip
    return path


def _records(batches: object) -> dict[int, tuple[bytes | None, bytes | None]]:
    found: dict[int, tuple[bytes | None, bytes | None]] = {}
    for batch in batches:  # type: ignore[attr-defined]
        if batch.is_control:
            continue
        for record in batch.records():
            assert record.offset not in found, f"offset {record.offset} read twice"
            found[record.offset] = (record.key, record.value)
    return found


def _local(logs: Path) -> Produced:
    with LogDirectory(logs) as log_dir:
        return {log.partition: _records(b for s in log.segments for b in s.batches())
                for log in log_dir if log.topic == TOPIC}  # fmt: skip


def _check_survivors(produced: Produced, read: Produced, policy: str) -> None:
    for partition, originals in produced.items():
        got = read[partition]
        assert list(got) == sorted(got)
        for offset, kv in got.items():
            assert originals.get(offset) == kv, (partition, offset)  # each at its own offset
        if policy == "delete":  # retention is off: nothing may go
            assert got == originals
            continue
        latest: dict[bytes | None, int] = {}
        for offset, (key, _) in originals.items():
            latest[key] = offset
        for key, offset in latest.items():  # compaction keeps every key's latest record
            if originals[offset][1] is not None:
                assert offset in got, (partition, key, offset)


def _spark_read(spark: Any, logs: Path, url: str) -> Produced:
    """The topic through the Spark data source, remote and local tiers together."""
    register_data_source(spark)
    df = (spark.read.format("kafkatier").option("path", str(logs)).option("subscribe", TOPIC)
          .option("remote.storage.url", url).load())  # fmt: skip
    out: Produced = {p: {} for p in range(PARTITIONS)}
    for row in df.select("partition", "offset", "key", "value").collect():
        key = bytes(row.key) if row.key is not None else None
        value = bytes(row.value) if row.value is not None else None
        out[row.partition][row.offset] = (key, value)
    return {p: dict(sorted(found.items())) for p, found in out.items()}


def _check_sink(spark: Any, logs: Path, topic: dict[str, str], compression: str) -> None:
    """One micro-batch through the sink into a topic of the same settings: every row once,
    read_committed, and the log dir verifies."""
    rows = 300
    frame = spark.range(0, rows, 1, 2).selectExpr(
        "CAST(CONCAT('key-', id % 13) AS BINARY) AS key",
        "CAST(CONCAT('value-', lpad(CAST(id AS STRING), 5, '0')) AS BINARY) AS value")  # fmt: skip
    sink = KafkaLogSink(logs, topic=f"{TOPIC}-sink", partitions=PARTITIONS,
                        compression=compression, config=topic)  # fmt: skip
    sink(frame, 0)
    sink.close()
    with LogDirectory(logs) as log_dir:
        values = sorted(v for log in log_dir if log.topic == f"{TOPIC}-sink"
                        for v in read_arrow(log, isolation=IsolationLevel.READ_COMMITTED)
                        ["value"].to_pylist())  # fmt: skip
    assert values == [f"value-{i:05d}".encode() for i in range(rows)]
    assert verify_paths([logs]) == []


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(topic=TOPIC_SETTINGS, compression=COMPRESSION)
def test_every_command_under_random_topic_settings(
    tmp_path_factory, spark: Any, topic: dict[str, str], compression: str  # type: ignore[no-untyped-def]
) -> None:
    root = tmp_path_factory.mktemp("matrix")
    logs, restored = root / "logs", root / "restored"
    extra = [arg for k, v in topic.items() for arg in ("--config", f"{k}={v}")]
    for start in (0, 400):
        source = _input(root / f"in-{start}.parquet", start, 400)
        assert main(["produce", str(logs), "--topic", TOPIC, "--input", str(source),
                     "--partitions", str(PARTITIONS), "--compression", compression,
                     *extra]) == 0  # fmt: skip
    produced = _local(logs)
    assert main(["clean", str(logs)]) == 0
    (root / "remote").mkdir()  # the "bucket": there even if nothing closed to upload
    store = FsspecStore(f"file://{root / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url)
    assert Tierer(config, store).run_once().failures == 0
    conf = root / "restore.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={store.url}\n")
    code = main(["restore", "--config", str(conf), "--topic", TOPIC, "--to", str(restored),
                 "--quiet"])  # fmt: skip
    assert code in (0, 1)  # 1: nothing was closed, so nothing went remote
    assert verify_paths([logs]) == []
    if restored.exists():
        assert verify_paths([restored]) == []
    read = {p: _records(joined_batches(store, logs, TOPIC, p, 0)) for p in range(PARTITIONS)}
    _check_survivors(produced, read, topic["cleanup.policy"])
    assert _spark_read(spark, logs, store.url) == read
    _check_sink(spark, logs, topic, compression)
    if code == 0:
        remote = _local(restored)
        for partition, records in remote.items():
            assert records == {o: kv for o, kv in read[partition].items() if o in records}
