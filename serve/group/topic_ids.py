"""Which incarnation of each topic the committed offsets belong to.

Kafka's coordinator deletes a topic's committed offsets when the topic is deleted; here a topic
is deleted by removing its partition directories, which the server may not even be running to
see, and Kafka's offset records carry no topic id. So the offsets dir keeps, beside
``__consumer_offsets``, the id each committed topic had at its last commit
(``committed-topic-ids``: JSON, ``{"<topic>": "<topic id>"}``, replaced atomically). A topic
found under another id (deleted and created again) has no committed offset: a fetch answers
-1, so the group starts as ``auto.offset.reset`` says instead of resuming the old topic's
positions in the new one, and the next commit of it tombstones the old commits of every group
(offset_store.py). Commits made before this file existed match any id.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.fsutil import atomic_write

FILE_NAME = "committed-topic-ids"


class TopicIds:
    """The recorded topic ids of an offsets dir (module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE_NAME
        self._lock = threading.Lock()
        self._ids: dict[str, str] = {}
        if self.path.exists():
            try:
                loaded = json.loads(self.path.read_bytes())
                self._ids = {str(t): str(i) for t, i in loaded.items()}
            except (ValueError, AttributeError) as exc:
                raise KafkaTierError(f"unreadable committed topic ids: {exc}",
                                     file=str(self.path)) from None  # fmt: skip

    def stale(self, topic: str, topic_id: str | None) -> bool:
        """Whether ``topic``'s commits belong to another incarnation than ``topic_id`` (None:
        the topic is not there now, which says nothing: a log dir may be offline)."""
        with self._lock:
            recorded = self._ids.get(topic)
        return recorded is not None and topic_id is not None and recorded != topic_id

    def record(self, ids: dict[str, str]) -> None:
        """Keep ``ids`` (topic -> id), durably, where they differ from what is kept."""
        with self._lock:
            if all(self._ids.get(t) == i for t, i in ids.items()):
                return
            merged = {**self._ids, **ids}
            atomic_write(self.path, json.dumps(merged, sort_keys=True).encode())
            self._ids = merged
