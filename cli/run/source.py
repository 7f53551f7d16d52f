"""The generated clickstream of ``kafkatier run``: a PySpark streaming data source and its model.

Event ``i`` of a stream is a pure function of (seed, users, base time, i): a SplitMix64 hash of
``seed`` and ``i`` picks the user, page and event type, and ``ts = base + i`` ms. So the
verifier knows exactly which events the stream produced from the source's committed offset
alone (:func:`clickstream_table`, run on the executors by the checks), with no copy of the data
kept on the side.

Offsets are ``{"id": next event, "base": base time in ms}``; the base is fixed by the first
offset of a checkpoint, so a restarted query continues the same stream. ``maxRows`` caps the
stream (``run.batches`` micro-batches of ``rowsPerBatch``): once reached the source reports no
new data, the query goes idle, and stopping it interrupts nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

EVENT_SCHEMA = "event_id string, user_id string, page string, event_type string, ts long"
"""The clickstream's columns, also the landing-folder JSON format (``run.input=files``)."""
PAGES = ("/", "/search", "/catalog", "/product", "/cart", "/checkout", "/account", "/help")
EVENT_TYPES = ("view",) * 12 + ("click",) * 5 + ("add_to_cart",) * 2 + ("purchase",)
SOURCE_NAME = "kafkatier-clickstream"
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return (z ^ (z >> np.uint64(31))) & _M64


def clickstream_table(seed: int, users: int, base_ms: int, start: int, end: int) -> pa.Table:
    """Events ``start <= i < end`` of the stream (module docstring), as Arrow."""
    ids = np.arange(start, end, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = _splitmix64(ids ^ (np.uint64(seed) * np.uint64(0x100000001B3)))
    user = (h % np.uint64(users)).astype(np.int64)
    page = ((h >> np.uint64(20)) % np.uint64(len(PAGES))).astype(np.int64)
    kind = ((h >> np.uint64(40)) % np.uint64(len(EVENT_TYPES))).astype(np.int64)
    return pa.table({
        "event_id": [f"{seed}-{i}" for i in range(start, end)],
        "user_id": [f"user-{u:05d}" for u in user.tolist()],
        "page": [PAGES[p] for p in page.tolist()],
        "event_type": [EVENT_TYPES[k] for k in kind.tolist()],
        "ts": pa.array(base_ms + np.arange(start, end, dtype=np.int64), pa.int64()),
    })  # fmt: skip


@dataclass(frozen=True)
class _Range:
    start: int
    end: int
    base: int


class Reader(DataSourceStreamReader):
    """Offsets and partitions of the generated stream (module docstring)."""

    def __init__(self, options: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in options.items()}  # Spark's options ignore case
        self.seed = int(options["seed"])
        self.users = int(options["users"])
        self.per_batch = int(options["rowsperbatch"])
        self.max_rows = int(options.get("maxrows", "-1"))
        self.rate = int(options.get("rowspersecond", "-1"))
        self.base = int(options["basems"])  # fixed by the driver: Spark may ask twice
        self.first: int | None = None
        self.started = time.monotonic()

    def initialOffset(self) -> dict[str, int]:
        return {"id": 0, "base": self.base}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:
        if self.first is None:
            self.first = start["id"]
        end = start["id"] + self.per_batch
        if self.max_rows >= 0:
            end = min(end, self.first + self.max_rows)
        if self.rate > 0:
            elapsed = time.monotonic() - self.started
            end = min(end, self.first + int(elapsed * self.rate))
        return {"id": max(end, start["id"]), "base": start["base"]}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[Any]:
        lo, hi, base = start["id"], end["id"], end["base"]
        mid = (lo + hi) // 2
        return [InputPartition(_Range(a, b, base)) for a, b in ((lo, mid), (mid, hi)) if b > a]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        r = partition.value
        yield from clickstream_table(self.seed, self.users, r.base, r.start,
                                     r.end).to_batches()  # fmt: skip

    def commit(self, end: dict[str, int]) -> None:
        del end


class Clickstream(DataSource):
    """``format("kafkatier-clickstream")``: options seed, users, rowsPerBatch, baseMs (the first
    event's time, used only by a new checkpoint), maxRows, rowsPerSecond."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return EVENT_SCHEMA

    def streamReader(self, schema: Any) -> Reader:
        del schema
        return Reader(dict(self.options))


def register_clickstream(spark: Any) -> None:
    """Make ``spark.readStream.format("kafkatier-clickstream")`` available."""
    spark.dataSource.register(Clickstream)
