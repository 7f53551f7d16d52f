"""The sink's input columns, checked on the driver before a micro-batch writes anything.

The columns are those of Spark's built-in Kafka sink: ``value`` (binary or string, required),
``key`` (binary or string), ``headers`` (array<struct<key: string, value: binary>>),
``partition`` (int), ``timestamp`` (timestamp) and ``topic`` (string). Other columns are an error
rather than silently dropped, as Spark's sink does, so a typo (``vaule``) cannot lose data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkatier.storage.errors import KafkaTierError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType


class SinkSchemaError(KafkaTierError, ValueError):  # type: ignore[misc,unused-ignore]
    """A micro-batch whose columns the sink cannot write; the message names the column and fix."""


KNOWN_COLUMNS = ("key", "value", "headers", "partition", "timestamp", "topic")
ORDER_COLUMN = "_kt_order"
PARTITION_COLUMN = "_kt_partition"


INPUT_ERROR_MARK = "kafkatier input error "
"""How an encode task's message names the sink error it stands for (``InputError.java``'s mark):
``kafkatier input error [InvalidRecordError] ...``; the driver raises that error again
(``jvm.input_error``)."""


def executor_error(exc: KafkaTierError) -> ValueError:
    """``exc``, found by an encode task, as the job's failure carries it to the driver."""
    return ValueError(f"{INPUT_ERROR_MARK}[{type(exc).__name__}] {exc}")


@dataclass(frozen=True)
class InputColumns:
    """Which optional columns a micro-batch carries (``value`` always does)."""

    key: bool
    headers: bool
    partition: bool
    timestamp: bool
    topic: bool


def _type_ok(name: str, dtype: DataType) -> bool:
    from pyspark.sql import types as T

    if name in ("key", "value", "topic"):
        allowed: tuple[type, ...] = (T.BinaryType, T.StringType)
        return isinstance(dtype, T.StringType if name == "topic" else allowed)
    if name == "partition":
        return isinstance(dtype, T.IntegerType | T.ShortType | T.ByteType)
    if name == "timestamp":
        return isinstance(dtype, T.TimestampType | T.TimestampNTZType)
    return _headers_ok(dtype)


def _headers_ok(dtype: DataType) -> bool:
    from pyspark.sql import types as T

    if not isinstance(dtype, T.ArrayType) or not isinstance(dtype.elementType, T.StructType):
        return False
    fields = {f.name: f.dataType for f in dtype.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], T.StringType)
        and isinstance(fields["value"], T.BinaryType)
    )


_EXPECTED = {
    "key": "binary or string",
    "value": "binary or string",
    "topic": "string",
    "partition": "int",
    "timestamp": "timestamp",
    "headers": "array<struct<key: string, value: binary>>",
}
_CAST_TO = {name: expected.split(" ")[0].upper() for name, expected in _EXPECTED.items()}
_CAST_TO["headers"] = "ARRAY<STRUCT<key: STRING, value: BINARY>>"  # its type has spaces


def check_schema(schema: StructType, *, fixed_topic: bool) -> InputColumns:
    """The optional columns present; raises SinkSchemaError naming the column and the fix."""
    names = [f.name for f in schema.fields]
    if "value" not in names:
        raise SinkSchemaError(
            "missing required column 'value' (binary or string); "
            "fix: select your payload as value, e.g. df.selectExpr('CAST(x AS BINARY) AS value')",
            columns=names,
        )
    for f in schema.fields:
        if f.name not in KNOWN_COLUMNS:
            raise SinkSchemaError(
                f"unexpected column {f.name!r}; the sink takes {', '.join(KNOWN_COLUMNS)}; "
                f"fix: drop it or fold it into 'value' or 'headers'",
                column=f.name,
            )
        if not _type_ok(f.name, f.dataType):
            raise SinkSchemaError(
                f"column {f.name!r} has type {f.dataType.simpleString()}, expected "
                f"{_EXPECTED[f.name]}; fix: CAST it (e.g. CAST({f.name} AS "
                f"{_CAST_TO[f.name]}))",
                column=f.name,
            )
    if not fixed_topic and "topic" not in names:
        raise SinkSchemaError(
            "no topic: the sink was created without topic= and the batch has no 'topic' column; "
            "fix: pass KafkaLogSink(..., topic='name') or add a string column 'topic'",
            column="topic",
        )
    present = set(names)
    return InputColumns(
        key="key" in present,
        headers="headers" in present,
        partition="partition" in present,
        timestamp="timestamp" in present,
        topic="topic" in present and not fixed_topic,
    )


def normalize(df: DataFrame, cols: InputColumns) -> DataFrame:
    """The batch reduced to the columns the encoder reads (a fixed topic ignores ``topic``, as
    Spark's Kafka sink does when its ``topic`` option is set); the batch itself where it holds
    just those (both encoders read columns by name): a ``select`` is a py4j round trip and a
    new plan, 6-9 ms of a warm streaming micro-batch's driver time (cProfile of the sink's call
    in ``bench/sink_stream.py``, ad hoc)."""
    keep = [n for n in KNOWN_COLUMNS if n == "value" or getattr(cols, n)]
    if sorted(df.schema.fieldNames()) == sorted(keep):
        return df
    return df.select(*keep)
