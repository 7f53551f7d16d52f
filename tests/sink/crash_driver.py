"""A Spark driver for the sink's crash tests, run as a subprocess and killed at will.

    python crash_driver.py LOG_DIR CHECKPOINT LOCAL_DIR TARGET_BATCH ROWS_PER_BATCH \
        [PARTITIONS [KEYS [SEGMENT_BYTES]]]

Streams ``rate-micro-batch`` (batch ``b`` holds values ``b*R .. b*R+R-1``, the same on every
replay, one input partition so input order is value order) through KafkaLogSink into topic
``events`` (PARTITIONS partitions, default 3, lz4; ``segment.bytes`` SEGMENT_BYTES if given),
keys ``value % KEYS`` (default 13) except every fourth row, which has none.
Batches after TARGET_BATCH are not written; once the sink has committed TARGET_BATCH the driver
stops the query and exits 0. ``KAFKATIER_SINK_CRASH`` (see kafkatier.sink.sink) makes it SIGKILL
itself at a chosen point; the test also kills it from outside at random moments. With
``POWER_LOSS_LOG`` set it records what its fsyncs covered (``power_loss.py``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import power_loss
from spark_settings import spark_builder

TOPIC = "events"
PARTITIONS = 3
SINK_ID = "events"
# each run is short and the test starts seven: the JVM's quick compiler only (C1) and the serial
# collector start faster than the defaults, and nothing here runs long enough to miss C2
FAST_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def committed(log_dir: Path) -> int:
    path = log_dir / f"kafkatier-sink.{SINK_ID}.json"
    if not path.exists():
        return -1
    return int(json.loads(path.read_text())["last_committed_batch"])


def main(
    log_dir: Path,
    checkpoint: str,
    local_dir: str,
    target: int,
    rows: int,
    partitions: int = PARTITIONS,
    keys: int = 13,
    segment_bytes: int | None = None,
) -> int:
    if os.environ.get(power_loss.ENV):
        power_loss.install_recorder(os.environ[power_loss.ENV])
    from kafkatier.sink import KafkaLogSink
    spark = (
        spark_builder("kafkatier-crash")
        .config("spark.local.dir", local_dir)
        .config("spark.driver.extraJavaOptions", FAST_START_JVM)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    source = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", 1)
        .option("startTimestamp", 0)
        .load()
        .selectExpr(
            "CAST(value AS STRING) AS value",
            f"CASE WHEN value % 4 = 0 THEN NULL ELSE CAST(value % {keys} AS STRING) END AS key",
        )
    )
    config = {} if segment_bytes is None else {"segment.bytes": str(segment_bytes)}
    sink = KafkaLogSink(
        log_dir, topic=TOPIC, partitions=partitions, compression="lz4", config=config
    )

    def write(df: Any, batch_id: int) -> None:
        if batch_id <= target:
            sink(df, batch_id)

    query = source.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint).start()
    while committed(log_dir) < target:
        if not query.isActive:
            print(f"query stopped: {query.exception()}", file=sys.stderr)
            return 1
        time.sleep(0.2)
    query.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    log_dir, checkpoint, local_dir, target, rows = sys.argv[1:6]
    shape = [int(arg) for arg in sys.argv[6:9]]
    sys.exit(main(Path(log_dir), checkpoint, local_dir, int(target), int(rows), *shape))
