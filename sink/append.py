"""The driver's side of a micro-batch: sequences and offsets for the encoded pieces.

The driver is the single writer of every partition: it appends each partition's pieces in task
order, giving each batch the partition's next sequence
(:func:`kafkatier.sink.stage.assign_sequences`) before ``Log.append_batches`` gives it offsets and
checks epoch and sequences as a leader does. Each piece is parsed and its CRCs checked once, by
the leader's own parser, before its sequences are set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kafkatier.sink.plan import Piece
from kafkatier.sink.stage import assign_sequences
from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin


def append_pieces(
    pieces: Iterable[Piece],
    sequences: dict[tuple[str, int], int],
    log_for: Callable[[str, int], Log],
    after_append: Callable[[], None],
) -> set[tuple[str, int]]:
    """Append every piece; ``sequences`` (the producer's next sequence per partition) advances.
    Returns the partitions written."""
    touched: set[tuple[str, int]] = set()
    for piece in pieces:
        tp = (piece.topic, piece.partition)
        batches = parse_incoming(piece.data, AppendOrigin.CLIENT, file=piece.source)
        sequences[tp] = assign_sequences(batches, sequences.get(tp, 0))
        records = sum([batch.records_count for batch in batches])
        if records != piece.records:
            raise CorruptRecordError(
                f"{records} records where the executor encoded {piece.records}",
                file=piece.source,
            )
        log_for(*tp).append_batches(batches)
        touched.add(tp)
        after_append()
    return touched
