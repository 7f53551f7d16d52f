"""What each partition's last segment has said so far, kept between reads and carried forward
as the writer appends, so ``kafkatier serve``'s fetches and a Spark streaming query's triggers
near the end of a large active segment cost what was appended since, not the segment.

A :class:`TailState` is the fold of the batch headers of ``<base>.log`` from position 0 to
``framed`` (whole batches only) for one file identity (inode): the last offset, and the
transactions those headers opened, closed and aborted, tracked from ``key`` (the offset the
tracking starts at, the newest producer snapshot's, and the transactions open there; a new
snapshot or closed segment's transaction changes the key and the fold starts again). It holds
no header: its size does not grow with the segment (the ABORT markers aside, which
``PartitionBounds`` lists anyway). A new last segment (a roll), another inode (the cleaner
swapped the file) or a last framed batch no longer where it was (the writer truncated a torn
tail while recovering; the file was rewritten in place) starts a new fold from 0. Each step
frames only the new bytes (``LogFile.table``: in C where the library is built, one header read
again to check the file is the one framed so far).

Before this, the cache kept every header of the segment (241 bytes each as Python objects,
then 56 as rows), within a budget of headers: a partition past it was framed whole at each use
(``bench/read_tail.py --batches 80000``: 2.30 s a trigger over 100 MiB active segments, against
0.27 s over short ones).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.batch_position import BatchPosition, header_at
from kafkatier.storage.log.header_table import Headers
from kafkatier.storage.log.tail import LogFile
from kafkatier.storage.log.txn_tracker import track_txn

MAX_PARTITIONS = 65_536
"""States kept (the least recently used dropped past it): about 800 bytes each, with 1,000 or
20,000 batches in the segment (``python bench/tail_cache_memory.py``), so a ``serve`` of tens
of thousands of partitions keeps them all in some 50 MiB."""
Key = tuple[int, tuple[tuple[int, int], ...]]
"""(offset the transaction tracking starts at, (producer id, first offset) of those open there)."""


@dataclass
class TailState:
    """One last segment's fold (module docstring); used under its ``lock``."""

    base: int
    inode: int
    framed: int = 0  # bytes of the .log framed, whole batches
    last: BatchPosition | None = None  # the last batch framed
    key: Key | None = None
    tracked: int = 0  # bytes whose transactional batches ``ongoing`` and ``aborted`` fold
    ongoing: dict[int, int] = field(default_factory=dict)
    aborted: list[AbortedTxn] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def last_offset(self) -> int | None:
        return None if self.last is None else self.last.last_offset

    def frame(self, log: LogFile) -> tuple[int, Headers]:
        """The batches appended since the last step, framed (and where they start): the last
        offset carried forward. A file whose last framed batch is not there any more (cut
        shorter by a recovering writer, rewritten in place as ``cp`` over it does, or a new
        file given a deleted one's inode number) is framed again from 0."""
        if self.last is not None and not self._last_still_there(log):
            self.framed, self.last, self.key, self.tracked = 0, None, None, 0
        start = self.framed
        table = log.table(start)
        if table.last is not None:
            self.framed, self.last = table.last.position + table.last.size, table.last
        return start, table

    def _last_still_there(self, log: LogFile) -> bool:
        assert self.last is not None
        try:
            return header_at(log.fd, self.last.position, log.size, log.log_path) == self.last
        except CorruptRecordError:
            return False

    def track(self, log: LogFile, key: Key, new: tuple[int, Headers]) -> None:
        """The transactions of every framed batch folded from ``key``; ``new``: the last
        :meth:`frame`'s batches (and where they start), framed again from 0 where the key
        changed."""
        if key != self.key:
            self.key, self.tracked, self.ongoing, self.aborted = key, 0, dict(key[1]), []
        start, table = new
        if self.tracked != start:
            table = log.table(self.tracked)
        for header in table.transactional(key[0]):
            track_txn(header, log.read_bytes, log.log_path, self.ongoing, self.aborted)
        self.tracked = self.framed


class TailCache:
    """Last-segment states per partition directory (module docstring)."""

    def __init__(self) -> None:
        self._states: OrderedDict[str, TailState] = OrderedDict()
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[TailCache], tuple[()]]:
        """Pickled empty: Spark pickles a Python stream reader (which holds one) to send it to
        its workers, and what a cache knows is only good in the process that read it."""
        return TailCache, ()

    @property
    def held(self) -> int:
        """Partitions kept now."""
        with self._lock:
            return len(self._states)

    @contextmanager
    def state(self, path: str, base: int, log: LogFile) -> Iterator[TailState]:
        """The state of the partition at ``path`` whose last segment is ``base``, opened as
        ``log``, held under its lock (a new one where the segment or its file changed)."""
        inode = os.fstat(log.fd).st_ino
        with self._lock:
            state = self._states.pop(path, None)
            if state is None or (state.base, state.inode) != (base, inode):
                state = TailState(base, inode)
            self._states[path] = state
            while len(self._states) > MAX_PARTITIONS:
                self._states.popitem(last=False)
        with state.lock:
            yield state
