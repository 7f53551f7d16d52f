"""Record input files for ``kafkatier produce``: Parquet, JSON Lines or CSV, read in chunks.

The columns are Spark's Kafka sink columns: ``value`` (required), ``key``, ``headers``
(list of {key, value}), ``timestamp`` (epoch milliseconds or an ISO-8601 text) and ``partition``.
Text columns are written as their UTF-8 bytes, as Kafka's StringSerializer does.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from kafkatier.storage.errors import ConfigError

T = TypeVar("T")
_END = object()

KNOWN_COLUMNS = ("key", "value", "headers", "timestamp", "partition", "topic")
CHUNK_ROWS = 256 * 1024
TEXT_BLOCK_BYTES = 16 << 20
"""Bytes of a CSV or JSON Lines file Arrow parses at a time: a row must fit (Arrow's 1 MiB
default refused rows near Kafka's max.message.bytes; JSON retries larger)."""


def read_chunks(path: Path, fmt: str) -> Iterator[pa.RecordBatch]:
    """Record batches of about CHUNK_ROWS rows, normalised for ``encode_arrow``. A file the
    format's reader refuses (malformed, cut short, of another format) is one error naming the
    file and the format; an empty JSON Lines or CSV file holds no records (as an empty Parquet
    file's row groups)."""
    if fmt != "parquet" and path.stat().st_size == 0:
        return
    try:
        for batch in _batches(path, fmt):
            yield normalise(batch, str(path))
    except pa.ArrowException as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        reason = "".join(c if c.isprintable() else "?" for c in text[:200])  # a binary file's
        raise ConfigError(f"cannot read the input as {fmt}: {reason}", setting="input",
                          source=str(path)) from None  # fmt: skip


def _batches(path: Path, fmt: str) -> Iterator[pa.RecordBatch]:
    if fmt == "parquet":
        yield from pq.ParquetFile(path).iter_batches(CHUNK_ROWS)
    elif fmt == "csv":
        # Only an empty unquoted field is null, as in Spark's CSV reader: Arrow's default list
        # (NA, NULL, nan, N/A, ...) made such values, and a quoted "", tombstones and null keys.
        options = pacsv.ConvertOptions(
            column_types={"key": pa.string(), "value": pa.string()}, null_values=[""],
            strings_can_be_null=True, quoted_strings_can_be_null=False,
        )  # fmt: skip
        reading = pacsv.ReadOptions(block_size=TEXT_BLOCK_BYTES)
        yield from pacsv.open_csv(path, read_options=reading, convert_options=options)
    else:
        yield from _json(path).to_batches(CHUNK_ROWS)


def _json(path: Path) -> pa.Table:
    """The whole file (Arrow parses its blocks in parallel); a row longer than a block is read
    again with blocks large enough (Arrow refuses it: "straddling object")."""
    block = TEXT_BLOCK_BYTES
    while True:
        try:
            return pajson.read_json(path, read_options=pajson.ReadOptions(block_size=block))
        except pa.ArrowInvalid as exc:
            if "straddl" not in str(exc) or block > path.stat().st_size:
                raise
            block *= 4


def prefetched(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """``items``, taken from a thread up to ``depth`` ahead of the caller: the file's next
    chunks are decoded (Arrow's readers release the GIL) while the caller encodes this one, and
    the first ones while the encoder's modules still import. An error of ``items`` is raised
    here, where it would have been; a caller that stops early stops the thread too."""
    ready: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(item: object) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for item in items:
                if not offer(item):
                    return
        except BaseException as exc:  # handed to the caller, raised there
            offer(exc)
            return
        offer(_END)

    threading.Thread(target=read, name="kafkatier-input", daemon=True).start()
    try:
        while (item := ready.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()


def normalise(batch: pa.RecordBatch, source: str) -> pa.RecordBatch:
    """Check the columns and bring ``timestamp`` and ``partition`` to the types we encode."""
    names = batch.schema.names
    if "value" not in names:
        raise ConfigError(
            f"input has no 'value' column (columns: {', '.join(names) or 'none'}); "
            "add one: it holds the record payload",
            setting="value",
            source=source,
        )
    columns = {name: batch.column(name) for name in names if name in KNOWN_COLUMNS}
    if "timestamp" in columns:
        columns["timestamp"] = _timestamps(columns["timestamp"], source)
    if "partition" in columns:
        columns["partition"] = _cast(columns["partition"], pa.int32(), "partition", source)
    return pa.RecordBatch.from_pydict(columns)


def _timestamps(column: pa.Array, source: str) -> pa.Array:
    if pa.types.is_null(column.type) or pa.types.is_timestamp(column.type) or (
        pa.types.is_integer(column.type)
    ):  # nulls only: the produce time (columns.timestamps_column)
        return column
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        # to nanoseconds first: ISO text with micro- or nanoseconds (Python's isoformat()) is
        # refused by a cast to milliseconds; Kafka keeps milliseconds, the rest is cut
        exact = _cast(column, pa.timestamp("ns", tz="UTC"), "timestamp", source)
        return exact.cast(pa.timestamp("ms", tz="UTC"), safe=False)
    if pa.types.is_date(column.type):  # a day: its midnight, UTC
        return column.cast(pa.date64()).cast(pa.int64())
    raise ConfigError(
        f"column 'timestamp' has type {column.type}: use epoch milliseconds or ISO-8601 text",
        setting="timestamp",
        source=source,
    )


def _cast(column: pa.Array, target: pa.DataType, name: str, source: str) -> pa.Array:
    try:
        return column.cast(target)  # Array.cast: pyarrow.compute's import (60 ms) only here
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ConfigError(
            f"column {name!r} cannot be read as {target}: {exc}", setting=name, source=source
        ) from None
