"""The ``kafkatier`` Spark data source: Kafka-format partition logs read back as Spark's Kafka
source would read them from a broker, in batch and streaming queries.

    register_data_source(spark)
    df = (spark.read.format("kafkatier").option("path", "/data/kafka-logs")
          .option("subscribe", "events").load())

Rows have exactly the Kafka source's schema (``key, value, topic, partition, offset, timestamp,
timestampType`` and, with ``includeHeaders=true``, ``headers``). Options: ``options``.
With the tiering sidecar's remote options (``remote.storage.url`` ... or ``kafkatier.config``),
a topic whose older segments exist only in the remote store reads whole: ``remote``.
A Spark task reads the offset ranges of one or more partitions (``split``, ``read``), on the
executors; the driver only looks at each log's tail to find its bounds (``storage.log.bounds``).
Streaming offsets are Spark's Kafka offset JSON, ``{"topic": {"0": 42}}``: each micro-batch
reads up to the partitions' last stable offsets, so a query follows a log while the sink
appends to it and never shows a transaction before its COMMIT.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkatier.sink.source.jvm import PYTHON_NAME, use_jvm_reader
from kafkatier.sink.source.options import SourceOptions, parse_options
from kafkatier.sink.source.queries import batch_plan
from kafkatier.sink.source.stream import StreamOffsets
from kafkatier.sink.source.task import ReadTask
from kafkatier.storage.errors import ConfigError

__all__ = ["KafkaTierDataSource", "kafka_schema", "register_data_source"]


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (KafkaRecordToRowConverter), every field nullable."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def register_data_source(spark: SparkSession, reader: str = "auto") -> None:
    """Make ``spark.read.format("kafkatier")`` and ``readStream.format("kafkatier")`` work.

    ``reader``: ``"jvm"`` decodes batch scans of local logs inside Spark's JVM (``jvm.py``:
    compiled on first use, needs a JDK), ``"auto"`` does when it can (else says why, once),
    ``"python"`` decodes in Python workers. Streaming reads, remote segments and legacy message
    sets are always read by the Python reader.

    The registered class carries this driver's working directory (pickled with it to the
    Python workers, whose own working directory is Spark's), so that a relative ``path``
    resolves as Spark's file sources resolve one."""
    cwd = os.getcwd()

    class Registered(KafkaTierDataSource):
        driver_cwd = cwd

    class BehindJvm(Registered):
        @classmethod
        def name(cls) -> str:
            return PYTHON_NAME

    jvm = use_jvm_reader(spark, reader, cwd)
    spark.dataSource.register(BehindJvm if jvm else Registered)


class KafkaTierPartition(InputPartition):
    """One Spark task's work: one or more :class:`ReadTask` ranges (picklable, as Spark
    requires), planned by bytes (``split.py``)."""

    def __init__(self, tasks: tuple[ReadTask, ...]) -> None:
        super().__init__(tasks)
        self.tasks = tasks


class KafkaTierDataSource(DataSource):
    """Registered as ``kafkatier``; reads the partition logs under option ``path``."""

    driver_cwd: str | None = None
    """Where relative paths resolve (set by :func:`register_data_source`)."""

    @classmethod
    def name(cls) -> str:
        return "kafkatier"

    def schema(self) -> StructType:
        opts = parse_options(self.options, streaming=None, base_dir=self.driver_cwd)
        return kafka_schema(opts.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaTierBatchReader(self._checked(schema, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaTierStreamReader(self._checked(schema, streaming=True))

    def _checked(self, schema: StructType, *, streaming: bool) -> SourceOptions:
        opts = parse_options(self.options, streaming=streaming, base_dir=self.driver_cwd)
        expected = kafka_schema(opts.include_headers)
        if schema != expected:
            raise ConfigError(
                "the kafkatier source has a fixed schema (Spark's Kafka source schema; "
                f"headers with includeHeaders=true): expected {expected.simpleString()}, "
                f"got {schema.simpleString()}"
            )
        return opts


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Spark reads one ``InputPartition(None)`` when a plan has no partitions: nothing to read.

    The decoders (numba's kernels, the remote reader) are imported here, in the executors'
    workers that read, not with this module: Spark also loads it in processes that only plan
    (a streaming query's source process, the schema lookup), where they would cost seconds of
    start-up (``bench/read_stream.py`` prints a query's time to its first trigger)."""
    from kafkatier.sink.source.read import read_ranges

    tasks = partition.value
    return iter(()) if tasks is None else read_ranges(tasks)


class KafkaTierBatchReader(DataSourceReader):
    """A batch query: the offsets resolved once, when Spark plans the scan."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        return [KafkaTierPartition(t) for t in batch_plan(self.opts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class KafkaTierStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming query read by the Python reader; its offsets are :class:`StreamOffsets`'
    (``stream.py``), as the JVM reader's are."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.offsets = StreamOffsets(opts)

    def initialOffset(self) -> dict[str, Any]:
        return self.offsets.initial()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return self.offsets.latest(start, max_rows)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.offsets.default_max_rows
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return self.offsets.report_latest()

    def prepareForTriggerAvailableNow(self) -> None:
        self.offsets.prepare_available_now()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return [KafkaTierPartition(t) for t in self.offsets.plan(start, end)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to acknowledge: progress lives in Spark's checkpoint, not in the log dir."""
