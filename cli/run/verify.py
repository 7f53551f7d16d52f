"""The checks at the end of ``kafkatier run``: restore, verify, replay, compare with the model.

1. One partition of each topic is restored from the remote store into a fresh directory
   (``tiering.restore``) and must pass ``verify_paths`` (CRCs, indexes, snapshots, txn index).
2. Both topics are replayed with ``spark.read.format("kafkatier")``, ``read_committed``,
   straight from the log dir plus the store (remote-only segments included).
3. The events topic must hold every expected event exactly once (as a multiset: nothing
   missing, nothing extra, nothing twice). The expected state is derived from the events and
   their ``batch`` headers; the state topic's latest value per key must be exactly it, for
   exactly the expected keys, and every record left in it must be a state the job wrote, once.

Every comparison is a Spark aggregation that brings one row to the driver, so the checks scale
with the job as the job does (collecting a 10-minute run's topics into the driver ran it out of
memory). Values are compared as the bytes the job wrote: the expected JSON is produced by the
same ``to_json`` over the same columns, in the same order, as :mod:`kafkatier.cli.run.job`.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.store.object_store import ObjectStore

REPLAYED_COLUMNS = ("partition", "offset", "key", "value", "headers")
"""What the checks read of a replayed topic (the reader's columns of those names)."""
STATE_KEYS = "user_id string, batch long"
"""The fields of a state value that name which state it is."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def restore_one(store: ObjectStore, topic: str, target: Path) -> Check:
    """Restore partition 0 of ``topic`` into a fresh ``target`` and verify it."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    try:
        results = restore_topic(store, topic, target, partitions=[0])
    except (KafkaTierError, OSError) as exc:
        return Check(f"restore {topic}-0 + verify", False, str(exc))
    if not results or results[0].segments == 0:
        return Check(f"restore {topic}-0 + verify", False, "nothing remote to restore")
    problems = verify_paths([target])
    r = results[0]
    verdict = "clean" if not problems else f"{len(problems)} problems: {problems[0]}"
    detail = (f"{r.segments} segments, offsets [{r.log_start_offset}, {r.log_end_offset}), "
              f"{r.bytes_downloaded} bytes -> {target}; verify: {verdict}")  # fmt: skip
    return Check(f"restore {topic}-0 + verify", not problems, detail)


def replay(spark: Any, log_dir: Path, tiering: TieringConfig, topic: str) -> Any:
    """Every committed record of ``topic``, local and remote, as a DataFrame (not collected)."""
    options = {"subscribe": topic, "includeHeaders": "true", "isolationLevel": "read_committed",
               "path": str(log_dir.resolve()), "remote.storage.url": tiering.remote_url,
               "remote.storage.s3.endpoint.url": tiering.endpoint_url or "",
               "remote.storage.s3.region": tiering.region or ""}  # fmt: skip
    options = {k: v for k, v in options.items() if v}
    return spark.read.format("kafkatier").options(**options).load().select(*REPLAYED_COLUMNS)


def event_json(events: Any) -> Any:
    """The events topic's value for each row of ``events`` (columns as ``EVENT_SCHEMA``)."""
    from pyspark.sql import functions as F

    fields = F.struct("event_id", "user_id", "page", "event_type", "ts")
    return events.select(F.to_json(fields).alias("v"))


def check_events(replayed: Any, expected: Any) -> Check:
    """``replayed`` (the events topic) against ``expected`` (one ``v`` column of event JSON)."""
    from pyspark.sql import functions as F

    got = replayed.select(F.col("value").cast("string").alias("v")).groupBy("v").count()
    want = expected.groupBy("v").count()
    both = got.withColumnRenamed("count", "g").join(
        want.withColumnRenamed("count", "w"), "v", "full").fillna(0, ["g", "w"])
    g, w = F.col("g"), F.col("w")
    row = both.agg(
        F.sum(g).alias("got"), F.sum(w).alias("want"),
        F.sum(F.greatest(w - g, F.lit(0))).alias("missing"),
        F.sum(F.greatest(g - w, F.lit(0))).alias("extra"),
        F.count(F.when((g > 1) & (g > w), 1)).alias("twice"),
    ).first()  # fmt: skip
    got_n, want_n = row["got"] or 0, row["want"] or 0
    ok = not row["missing"] and not row["extra"]
    detail = (f"{got_n} records replayed, {want_n} expected: "
              + ("every event exactly once" if ok else f"{row['missing']} missing, "
                 f"{row['extra']} extra ({row['twice']} duplicated)"))  # fmt: skip
    return Check("events: every event exactly once", ok, detail)


def expected_states(events: Any) -> Any:
    """Per (user, batch) of the replayed events: the state the job wrote (its last event by
    (ts, event_id), and how many the batch had), as columns user_id, batch and its JSON ``v``."""
    from pyspark.sql import functions as F

    from kafkatier.cli.run.source import EVENT_SCHEMA

    parsed = events.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
        F.expr("filter(headers, h -> h.key = 'batch')[0].value")
        .cast("string").cast("long").alias("batch"),
    )  # fmt: skip
    last = F.max_by(F.struct("e.event_id", "e.page", "e.event_type", "e.ts"),
                    F.struct("e.ts", "e.event_id"))  # fmt: skip
    per = parsed.groupBy(F.col("e.user_id").alias("user_id"), "batch").agg(
        last.alias("last"), F.count(F.lit(1)).alias("n"))
    value = F.struct("user_id", "last.event_id", "last.page", "last.event_type", "last.ts",
                     F.col("n").alias("batch_events"), "batch")  # fmt: skip
    return per.select("user_id", "batch", F.to_json(value).alias("v"))


def check_state(replayed: Any, events: Any) -> list[Check]:
    """The state topic ``replayed`` against the states derived from the replayed ``events``."""
    states = expected_states(events)
    return [check_latest(replayed, states), check_written_once(replayed, states)]


def check_latest(replayed: Any, states: Any) -> Check:
    """The latest value per key is the state of the user's latest batch, for exactly its users."""
    from pyspark.sql import functions as F

    got = replayed.groupBy(F.col("key").cast("string").alias("user_id")).agg(
        F.max_by(F.col("value").cast("string"), F.struct("partition", "offset")).alias("got"))
    want = states.groupBy("user_id").agg(F.max_by("v", "batch").alias("want"))
    both = got.join(want, "user_id", "full")
    has_want = F.col("want").isNotNull()
    row = both.agg(
        F.count("got").alias("keys"), F.count("want").alias("expected"),
        F.count(F.when(has_want & ~F.col("got").eqNullSafe(F.col("want")), 1)).alias("wrong"),
        F.count(F.when(~has_want, 1)).alias("extra"),
    ).first()  # fmt: skip
    ok = not row["wrong"] and not row["extra"]
    return Check("state: latest value per key", ok,
                 f"{row['keys']} keys, {row['expected']} expected" + ("" if ok else
                 f"; {row['wrong']} wrong or missing, {row['extra']} unexpected keys"))  # fmt: skip


def check_written_once(replayed: Any, states: Any) -> Check:
    """Every record left in the state topic is a state the job wrote, and none is there twice."""
    from pyspark.sql import functions as F

    left = replayed.select(F.col("value").cast("string").alias("got")).select(
        "got", F.from_json("got", STATE_KEYS).alias("s"))
    joined = left.join(states, (F.col("s.user_id") == states["user_id"])
                       & (F.col("s.batch") == states["batch"]), "left")  # fmt: skip
    seen = left.groupBy("s.user_id", "s.batch").count()
    row = joined.agg(
        F.count(F.lit(1)).alias("records"),
        F.count(F.when(~F.col("got").eqNullSafe(F.col("v")), 1)).alias("foreign"),
    ).first()
    twice = seen.filter(F.col("count") > 1).count()
    written = states.count()
    ok = not row["foreign"] and not twice
    return Check("state: every record a state the job wrote, once", ok,
                 f"{row['records']} records left of {written} written" + ("" if ok else
                 f"; {row['foreign']} unknown, {twice} twice"))  # fmt: skip
