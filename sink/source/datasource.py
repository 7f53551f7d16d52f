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
from kafkatier.sink.source.plan import (
    Offsets,
    from_json,
    rate_limit,
    starting_offsets,
    survey,
    to_json,
    topic_partitions,
)
from kafkatier.sink.source.queries import batch_plan, micro_batch_plan
from kafkatier.sink.source.read import read_ranges
from kafkatier.sink.source.task import ReadTask
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.log.bounds import PartitionBounds
from kafkatier.storage.log.readonly import TopicPartition

__all__ = ["KafkaTierDataSource", "kafka_schema", "register_data_source"]
REMOTE_LISTING_MAX_AGE_S = 60.0
"""How long a streaming query reuses its listing of the remote store's partitions."""


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
    """Spark reads one ``InputPartition(None)`` when a plan has no partitions: nothing to read."""
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
    """A streaming query. Partitions that appear later (a topic the sink creates, a pattern
    that starts to match) are read from their earliest offset, as Spark does."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._bounds: dict[TopicPartition, PartitionBounds] = {}
        self._target: Offsets | None = None

    def _survey(self) -> dict[TopicPartition, PartitionBounds]:
        """Bounds of every subscribed partition on disk now, kept for :meth:`partitions`: its
        ABORT markers must cover the offsets :meth:`latestOffset` handed out."""
        tps = topic_partitions(self.opts, listing_max_age_s=REMOTE_LISTING_MAX_AGE_S)
        self._bounds = survey(self.opts, tps)
        return self._bounds

    def initialOffset(self) -> dict[str, Any]:
        return to_json(starting_offsets(self.opts, self._survey()))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json(start)
        bounds = self._survey()
        starts = {tp: begin.get(tp, b.log_start) for tp, b in bounds.items()}
        ends = {tp: max(b.latest(self.opts.committed), starts[tp]) for tp, b in bounds.items()}
        if self._target is not None:
            ends = {
                tp: max(min(e, self._target.get(tp, starts[tp])), starts[tp])
                for tp, e in ends.items()
            }
        if isinstance(limit, ReadMaxRows):
            ends = rate_limit(starts, ends, limit.max_rows)
        return to_json({**begin, **ends})

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        if not self._bounds:
            return None
        return to_json({tp: b.latest(self.opts.committed) for tp, b in self._bounds.items()})

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: b.latest(self.opts.committed) for tp, b in self._survey().items()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        bounds = self._bounds
        if not all(tp in bounds and bounds[tp].high_watermark >= e for tp, e in stop.items()):
            bounds = self._survey()  # a restart replays a logged batch before any latestOffset
        return [KafkaTierPartition(t) for t in micro_batch_plan(self.opts, begin, stop, bounds)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to acknowledge: progress lives in Spark's checkpoint, not in the log dir."""
