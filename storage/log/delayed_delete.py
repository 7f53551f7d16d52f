"""Files waiting out ``file.delete.delay.ms`` before they are removed (Kafka's delayed delete).

Retention never unlinks a segment at once: its files are first renamed with the ``.deleted``
suffix appended after the normal one (``00000000000000000042.log.deleted``,
``00000000000000000042.snapshot.deleted``, kafka-format.md §9.1), which takes them out of the log
atomically per file, and removed after the delay so that readers still holding them finish. (The
cleaner renames the segments it replaces the same way but removes them at the end of its pass,
``LocalSegmentStore.finish``: docs/compaction.md §12 says why.)
Kafka schedules each removal on a timer; kafkatier has no background threads, so the paths wait
here and the next clean pass removes those that are due. The list is not persisted: after a crash
or exit the ``.deleted`` files stay on disk and opening the log removes them (§9.3 step 1), as a
broker does at startup.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["PendingDeletions"]


class PendingDeletions:
    """Paths already renamed ``.deleted``, each with the clock time after which it may go."""

    def __init__(self) -> None:
        self._due: list[tuple[int, Path]] = []

    def __len__(self) -> int:
        return len(self._due)

    @property
    def paths(self) -> list[Path]:
        return [path for _, path in self._due]

    def schedule(self, paths: Iterable[Path], due_ms: int) -> None:
        self._due.extend((due_ms, Path(path)) for path in paths)

    def run(self, now_ms: int) -> int:
        """Remove the files whose delay has passed; returns how many were removed."""
        keep: list[tuple[int, Path]] = []
        removed = 0
        for due, path in self._due:
            if due > now_ms:
                keep.append((due, path))
                continue
            try:
                path.unlink()
                removed += 1
            except FileNotFoundError:
                pass  # already removed, e.g. by a reopen of the log
        self._due = keep
        return removed

    def run_all(self) -> int:
        """Remove every pending file now, whatever its delay."""
        return self.run(2**63 - 1)
