"""The fault soak's writer: a Spark streaming query through KafkaLogSink, killed at will.

    python bench/soak_writer.py CONFIG CHECKPOINT GENERATION TARGET_BATCH ROWS_PER_BATCH

Streams ``rate-micro-batch`` (batch ``b`` holds values ``b*R .. b*R+R-1``, the same on every
replay) through one exactly-once sink over the two topics of the soak's ``kafkatier.properties``
(``CONFIG``: log dir, topic settings): ``events`` (key ``v % 13``, value :func:`value_of`) and
``state`` (compacted; key ``k<v % 97>``, the same value). A batch after TARGET_BATCH fails
(so Spark replays it in the next run instead of counting it done); once the sink has committed
TARGET_BATCH the query stops and the driver exits 0.
``KAFKATIER_SINK_CRASH`` makes it SIGKILL itself at a chosen point; the soak also kills it from
outside. On its first start in a generation it creates the topics' partitions (new topic ids).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

EVENTS, STATE = "events", "state"
STATE_KEYS = 97
# a short-lived driver: the JVM's quick compiler only (C1) and the serial collector start faster
FAST_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class TargetReached(Exception):
    """A micro-batch past the run's target: failing it keeps Spark from committing it."""


def value_of(generation: int, v: int) -> bytes:
    """Row ``v``'s value: ``g<GEN>-<v>/`` and the SHA-256 of ``v`` in hex, twice (segments
    fill and roll within a few micro-batches; the checker recomputes it)."""
    digest = hashlib.sha256(str(v).encode()).hexdigest()
    return f"g{generation}-{v}/{digest}{digest}".encode()


def value_sql(generation: int) -> str:
    """:func:`value_of` as a Spark SQL expression over the rate source's ``value``."""
    digest = "sha2(CAST(value AS STRING), 256)"
    return f"concat('g{generation}-', CAST(value AS STRING), '/', {digest}, {digest})"


def sink_id(generation: int) -> str:
    return f"soak-g{generation}"


def committed(log_dir: Path, generation: int) -> int:
    """The last batch the generation's sink committed (its bookkeeping file), -1 for none."""
    path = log_dir / f"kafkatier-sink.{sink_id(generation)}.json"
    if not path.exists():
        return -1
    return int(json.loads(path.read_text())["last_committed_batch"])


def main(config_path: Path, checkpoint: str, generation: int, target: int, rows: int) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from spark_settings import spark_builder

    from kafkatier.cli.config.loader import load_config
    from kafkatier.sink import KafkaLogSink
    from kafkatier.sink.txn import topic_partitions
    from kafkatier.storage.log.directory import LogDirectory
    from kafkatier.storage.log.writer_lock import writer_turn

    config = load_config(config_path)
    config.write_topic_configs()
    with writer_turn(config.log_dir, who="soak writer"), LogDirectory(config.log_dir) as logs:
        for name in (EVENTS, STATE):
            topic_partitions(logs, name, config.topics[name].partitions or 1)
    spark = spark_builder("kafkatier-soak").config(
        "spark.driver.extraJavaOptions", FAST_START_JVM).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    source = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows).option("numPartitions", 1).option("startTimestamp", 0)
        .load()
    )  # fmt: skip
    sink = KafkaLogSink(config.log_dir, compression="lz4", sink_id=sink_id(generation))

    def write(df: Any, batch_id: int) -> None:
        if batch_id > target:  # fail it: a batch that returned would count as done for Spark
            raise TargetReached(f"batch {batch_id} is past the target {target}")
        value = value_sql(generation)
        both = df.selectExpr(f"'{EVENTS}' AS topic", "CAST(value % 13 AS STRING) AS key",
                             f"{value} AS value").unionByName(
            df.selectExpr(f"'{STATE}' AS topic", f"concat('k', value % {STATE_KEYS}) AS key",
                          f"{value} AS value"))  # fmt: skip
        sink(both, batch_id)

    query = source.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint).start()
    while committed(config.log_dir, generation) < target:
        if not query.isActive:
            print(f"soak writer: query stopped: {query.exception()}", file=sys.stderr)
            return 1
        time.sleep(0.2)
    with contextlib.suppress(Exception):  # the batch past the target may have failed it
        query.stop()
    sink.close()
    spark.stop()
    return 0


if __name__ == "__main__":
    path, chk, gen, target, rows = sys.argv[1:6]
    sys.exit(main(Path(path), chk, int(gen), int(target), int(rows)))
