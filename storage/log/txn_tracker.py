"""Transactions followed batch by batch from their headers, as a reader rebuilding the last
stable offset from the files does (``bounds.py``, ``tail_cache.py``): a producer's first
transactional data batch opens its transaction, its COMMIT or ABORT marker closes it, and an
ABORT is kept with the offsets it covers (kafka-format.md §7, §8)."""

from __future__ import annotations

from collections.abc import Callable

from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.header_table import Header
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.wire import ATTR_CONTROL, ATTR_TRANSACTIONAL, ControlType


def track_txn(
    header: Header,
    read: Callable[[int, int], bytes],
    file: str,
    ongoing: dict[int, int],
    aborted: list[AbortedTxn],
) -> None:
    """Open or close a transaction from one batch's header (``ongoing``: producer id -> first
    offset); a transaction marker (small) is read whole, never the data."""
    at, pid = header.at, header.producer_id
    if not header.attributes & ATTR_TRANSACTIONAL:
        return
    if not header.attributes & ATTR_CONTROL:
        ongoing.setdefault(pid, at.base_offset)
        return
    first = ongoing.pop(pid, None)
    if first is None:
        return
    marker = RecordBatch(read(at.position, at.size), file=file)
    if marker.control_record()[0] == ControlType.ABORT:
        lso = min([at.last_offset + 1, *ongoing.values()])
        aborted.append(AbortedTxn(pid, first, at.last_offset, lso))
