"""Per-partition remote metadata: one JSON manifest per partition, committed by conditional put.

Object layout under the remote root (``s3://bucket/prefix``), ``<p>`` being the partition's
folder (``<topic>-<topicId>/<partition>``, see identity.py)::

    <p>/manifest.json                     the partition's metadata (commit point)
    <p>/<base:020d>-<attempt>/log         the segment's .log
                          .../index       .index
                          .../timeindex, txnindex (when present)
                          .../snapshot    the producer snapshot at the segment end

``<attempt>`` is a fresh UUID per upload attempt, so a retried or concurrent upload never
overwrites an object another attempt (or a reader) may be using. The manifest is JSON::

    {"version": 1, "topic": ..., "partition": ..., "topic_id": ..., "log_start_offset": ...,
     "topic_config": {Kafka name: value, ...},
     "topic_partitions": the topic's partition count as its log dir recorded it (absent: none),
     "cleaner_checkpoint": first dirty offset of remote compaction (absent: never compacted),
     "cleaner_map_end": where its last cleaning's offset map ended (absent: never compacted),
     "segments": [{"base_offset", "end_offset" (last offset, inclusive, as Kafka's
                   RemoteLogSegmentMetadata), "max_timestamp", "size", "state", "attempt",
                   "owner", "updated_ms", "leader_epochs": [[epoch, start_offset], ...],
                   "files": {"log": {"size", "sha256", "etag"}, ...}}]}

States follow Kafka's RemoteLogSegmentState. COPY_SEGMENT_STARTED is an intent (the attempt's
objects may be missing or partial: nobody reads them); COPY_SEGMENT_FINISHED is written only
after every object of the attempt was uploaded and verified, so a FINISHED entry never names a
missing or partial object. DELETE_SEGMENT_STARTED is written before objects are removed;
the entry leaves the manifest once they are gone (DELETE_SEGMENT_FINISHED is that removal).

Every change is read-modify-write with ``If-Match`` on the manifest's entity tag (``If-None-Match:
*`` to create it), retried from a fresh read when another writer won: the manifest can only move
from one consistent state to the next.
"""

from __future__ import annotations

import enum
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkatier.tiering.errors import TieringError
from kafkatier.tiering.metadata.identity import RemotePartition

MANIFEST_VERSION = 1
MANIFEST_NAME = "manifest.json"
FILE_KINDS = ("log", "index", "timeindex", "txnindex", "snapshot")
"""Object names of one segment attempt, in upload order (the .log first, the largest)."""


class SegmentState(enum.StrEnum):
    COPY_SEGMENT_STARTED = "COPY_SEGMENT_STARTED"
    COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
    DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"
    DELETE_SEGMENT_FINISHED = "DELETE_SEGMENT_FINISHED"


@dataclass(frozen=True)
class RemoteFile:
    size: int
    sha256: str
    etag: str = ""


@dataclass
class RemoteSegment:
    """One upload attempt of one segment (see the module docstring for its states)."""

    base_offset: int
    end_offset: int
    max_timestamp: int
    size: int
    state: SegmentState
    attempt: str
    owner: str = ""
    updated_ms: int = 0
    leader_epochs: list[tuple[int, int]] = field(default_factory=list)
    files: dict[str, RemoteFile] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.state is SegmentState.COPY_SEGMENT_FINISHED

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["state"] = self.state.value
        out["leader_epochs"] = [list(e) for e in self.leader_epochs]
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RemoteSegment:
        return cls(
            base_offset=int(raw["base_offset"]),
            end_offset=int(raw["end_offset"]),
            max_timestamp=int(raw["max_timestamp"]),
            size=int(raw["size"]),
            state=SegmentState(raw["state"]),
            attempt=str(raw["attempt"]),
            owner=str(raw.get("owner", "")),
            updated_ms=int(raw.get("updated_ms", 0)),
            leader_epochs=[(int(e), int(o)) for e, o in raw.get("leader_epochs", [])],
            files={k: RemoteFile(**v) for k, v in raw.get("files", {}).items()},
        )


@dataclass
class PartitionManifest:
    """The remote metadata of one partition (module docstring)."""

    topic: str
    partition: int
    topic_id: str = ""
    log_start_offset: int = 0
    segments: list[RemoteSegment] = field(default_factory=list)
    topic_config: dict[str, str] = field(default_factory=dict)
    """The topic's overrides (``kafkatier-topic.<topic>.properties``), restored with the data."""
    topic_partitions: int | None = None
    """The topic's partition count recorded in that file when the partition last uploaded (a
    restore of every partition records it again); None: not recorded. Written only once set."""
    cleaner_checkpoint: int | None = None
    """Remote compaction's cleaner-offset-checkpoint (first dirty offset of the remote copy);
    None: never compacted. Written only once set, so older manifests read unchanged."""
    cleaner_map_end: int | None = None
    """Where the last remote cleaning's offset map ended (one past its last offset): a
    cleaning with no record past it and no more remote-only segments would rewrite the same
    segments to the same records (tiering/cleaner/compaction.py). Written only once set."""
    abandoned: dict[str, int] = field(default_factory=dict)
    """Attempt ids an orphan sweep claimed (tiering/copy/orphans.py) -> when, in ms: such an
    attempt is never committed. Written only when not empty."""

    def finished(self) -> list[RemoteSegment]:
        """FINISHED segments by base offset: what readers and restores may use."""
        return sorted((s for s in self.segments if s.finished), key=lambda s: s.base_offset)

    def contiguous(self) -> list[RemoteSegment]:
        """FINISHED segments from the first up to any gap in offsets: the remote log proper.
        A gap is transient (a segment still uploading while a later one finished, or one
        whose attempt died): what lies beyond it is served once the gap is filled."""
        chain: list[RemoteSegment] = []
        for seg in self.finished():
            if chain and seg.base_offset != chain[-1].end_offset + 1:
                break
            chain.append(seg)
        return chain

    def find(self, attempt: str) -> RemoteSegment | None:
        return next((s for s in self.segments if s.attempt == attempt), None)

    def finished_for(self, base_offset: int) -> RemoteSegment | None:
        return next((s for s in self.finished() if s.base_offset == base_offset), None)

    @property
    def highest_offset(self) -> int:
        """Kafka's highestOffsetInRemoteStorage: -1 when nothing is FINISHED."""
        return max((s.end_offset for s in self.finished()), default=-1)

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {
            "version": MANIFEST_VERSION,
            "topic": self.topic,
            "partition": self.partition,
            "topic_id": self.topic_id,
            "log_start_offset": self.log_start_offset,
            "topic_config": self.topic_config,
            "segments": [s.to_json() for s in sorted(self.segments, key=_order)],
        }
        if self.topic_partitions is not None:
            body["topic_partitions"] = self.topic_partitions
        if self.cleaner_checkpoint is not None:
            body["cleaner_checkpoint"] = self.cleaner_checkpoint
        if self.cleaner_map_end is not None:
            body["cleaner_map_end"] = self.cleaner_map_end
        if self.abandoned:
            body["abandoned"] = self.abandoned
        return json.dumps(body, indent=1, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, key: str) -> PartitionManifest:
        try:
            raw = json.loads(data)
            if raw.get("version") != MANIFEST_VERSION:
                raise TieringError("unsupported manifest version", key=key)
            return cls(
                topic=str(raw["topic"]),
                partition=int(raw["partition"]),
                topic_id=str(raw.get("topic_id", "")),
                log_start_offset=int(raw.get("log_start_offset", 0)),
                segments=[RemoteSegment.from_json(s) for s in raw.get("segments", [])],
                topic_config={str(k): str(v) for k, v in raw.get("topic_config", {}).items()},
                topic_partitions=_optional_int(raw.get("topic_partitions")),
                cleaner_checkpoint=_optional_int(raw.get("cleaner_checkpoint")),
                cleaner_map_end=_optional_int(raw.get("cleaner_map_end")),
                abandoned={str(k): int(v) for k, v in raw.get("abandoned", {}).items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # JSON not an object
            raise TieringError(f"malformed manifest: {exc}", key=key) from None


def _optional_int(value: object) -> int | None:
    return None if value is None else int(str(value))


def _order(segment: RemoteSegment) -> tuple[int, str]:
    return segment.base_offset, segment.attempt


def manifest_key(rp: RemotePartition) -> str:
    return rp.prefix + MANIFEST_NAME


def attempt_prefix(rp: RemotePartition, base_offset: int, attempt: str) -> str:
    return f"{rp.prefix}{base_offset:020d}-{attempt}/"


def object_key(rp: RemotePartition, segment: RemoteSegment, kind: str) -> str:
    return attempt_prefix(rp, segment.base_offset, segment.attempt) + kind


def now_ms() -> int:
    return int(time.time() * 1000)
