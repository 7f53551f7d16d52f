"""The checks at the end of ``kafkatier run``: restore, verify, replay, compare with the model.

1. One partition of each topic is restored from the remote store into a fresh directory
   (``tiering.restore``) and must pass ``verify_paths`` (CRCs, indexes, snapshots, txn index).
2. Both topics are replayed with ``spark.read.format("kafkatier")``, ``read_committed``: when the
   reader takes the remote options, straight from the log dir plus the store (remote-only
   segments included); otherwise (an older reader) the whole topic is restored into a fresh
   directory, offsets below the remote end are read from there (``read_uncommitted``: see
   :func:`replay`) and the rest from the log dir.
3. The events topic must hold every expected event exactly once (as a multiset: nothing
   missing, nothing extra, nothing twice). The expected state is derived from the events and
   their ``batch`` headers; the state topic's latest value per key must be exactly it, for
   exactly the expected keys, and every record left in it must be a state the job wrote, once.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar.status import PartitionStatus
from kafkatier.tiering.store.object_store import ObjectStore

Record = tuple[int, int, bytes, dict[str, Any], dict[str, bytes]]
"""(partition, offset, key, value as JSON, headers) of one replayed record."""


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


def reader_takes_remote_options() -> bool:
    from kafkatier.sink.source.options import KNOWN_OPTIONS

    return "remote.storage.url" in KNOWN_OPTIONS


def replay(spark: Any, log_dir: Path, tiering: TieringConfig, store: ObjectStore, topic: str,
           statuses: list[PartitionStatus], scratch: Path) -> list[Record]:  # fmt: skip
    """Every committed record of ``topic``, in offset order per partition (module docstring)."""
    base = {"subscribe": topic, "includeHeaders": "true", "isolationLevel": "read_committed"}
    if reader_takes_remote_options():
        remote = {"remote.storage.url": tiering.remote_url,
                  "remote.storage.s3.endpoint.url": tiering.endpoint_url or "",
                  "remote.storage.s3.region": tiering.region or ""}  # fmt: skip
        remote = {k: v for k, v in remote.items() if v}
        return _read(spark, {**base, **remote, "path": str(log_dir.resolve())})
    mine = [s for s in statuses if s.topic == topic]
    ends = {s.partition: s.remote_end for s in mine if s.remote_end is not None}
    if not ends:
        return _read(spark, {**base, "path": str(log_dir.resolve())})
    shutil.rmtree(scratch, ignore_errors=True)
    restore_topic(store, topic, scratch)
    upto = json.dumps({topic: {str(p): e for p, e in ends.items()}})
    local_from = json.dumps({topic: {str(s.partition): ends.get(s.partition, -2) for s in mine}})
    # A restored copy ends inside the transaction its last segment holds the start of (the
    # markers are in later, local segments), so read_committed would stop early there:
    # read_uncommitted up to the remote end. An aborted batch would then show up as extra
    # records and fail the exactly-once check, never pass it wrongly.
    uncommitted = {**base, "isolationLevel": "read_uncommitted"}
    below = _read(spark, {**uncommitted, "path": str(scratch.resolve()), "endingOffsets": upto})
    above = _read(spark, {**base, "path": str(log_dir.resolve()), "startingOffsets": local_from})
    return sorted(below + above, key=lambda r: (r[0], r[1]))


def _read(spark: Any, options: dict[str, str]) -> list[Record]:
    table = (spark.read.format("kafkatier").options(**options).load()
             .select("partition", "offset", "key", "value", "headers").toArrow())  # fmt: skip
    rows = []
    for row in table.to_pylist():
        headers = {h["key"]: h["value"] for h in row["headers"] or []}
        rows.append((row["partition"], row["offset"], row["key"], json.loads(row["value"]),
                     headers))  # fmt: skip
    return sorted(rows, key=lambda r: (r[0], r[1]))


def _canon(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True)


def check_events(replayed: list[Record], expected: Iterable[dict[str, Any]]) -> Check:
    want = Counter(_canon(e) for e in expected)
    got = Counter(_canon(r[3]) for r in replayed)
    missing, extra = want - got, got - want
    twice = sum(1 for k, n in got.items() if n > 1 and want.get(k, 0) < n)
    ok = not missing and not extra
    detail = (f"{sum(got.values())} records replayed, {sum(want.values())} expected: "
              + ("every event exactly once" if ok else f"{sum(missing.values())} missing, "
                 f"{sum(extra.values())} extra ({twice} duplicated)"))  # fmt: skip
    return Check("events: every event exactly once", ok, detail)


def expected_states(events: list[Record]) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (user, batch): the state the job wrote (its last event by (ts, event_id), count)."""
    grouped: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for record in events:
        batch = int(record[4]["batch"].decode())
        grouped.setdefault((record[3]["user_id"], batch), []).append(record[3])
    states = {}
    for (user, batch), evs in grouped.items():
        last = max(evs, key=lambda e: (e["ts"], e["event_id"]))
        states[(user, batch)] = {"user_id": user, "event_id": last["event_id"],
                                 "page": last["page"], "event_type": last["event_type"],
                                 "ts": last["ts"], "batch_events": len(evs), "batch": batch}
    return states


def check_state(replayed: list[Record], events: list[Record]) -> list[Check]:
    states = expected_states(events)
    latest_batch: dict[str, int] = {}
    for user, batch in states:
        latest_batch[user] = max(batch, latest_batch.get(user, -1))
    want = {user: states[(user, b)] for user, b in latest_batch.items()}
    got: dict[str, dict[str, Any]] = {}
    for record in replayed:  # offset order: the last one per key is the latest
        got[record[2].decode()] = record[3]
    wrong = sum(1 for user, value in want.items() if got.get(user) != value)
    extra_keys = len(set(got) - set(want))
    latest_ok = not wrong and not extra_keys
    seen = Counter((r[3]["user_id"], r[3]["batch"]) for r in replayed)
    foreign = sum(1 for r in replayed if states.get((r[3]["user_id"], r[3]["batch"])) != r[3])
    twice = sum(1 for n in seen.values() if n > 1)
    return [
        Check("state: latest value per key", latest_ok,
              f"{len(got)} keys, {len(want)} expected" + ("" if latest_ok else
              f"; {wrong} wrong or missing, {extra_keys} unexpected keys")),
        Check("state: every record a state the job wrote, once", not foreign and not twice,
              f"{len(replayed)} records left of {len(states)} written"
              + ("" if not foreign and not twice else f"; {foreign} unknown, {twice} twice")),
    ]  # fmt: skip
