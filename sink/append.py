"""The driver's side of a micro-batch: sequences and offsets for the encoded pieces.

The driver is the single writer of every partition: it appends each partition's pieces in task
order, giving each batch the partition's next sequence
(:func:`kafkatier.sink.stage.assign_sequences`) before ``Log.append`` gives it offsets and checks
epoch and sequences as a leader does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kafkatier.sink.plan import Piece
from kafkatier.sink.stage import assign_sequences
from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.log.log import Log


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
        sequences[tp], records = assign_sequences(
            piece.data, sequences.get(tp, 0), source=piece.source
        )
        if records != piece.records:
            raise CorruptRecordError(
                f"{records} records where the executor encoded {piece.records}",
                file=piece.source,
            )
        log_for(*tp).append(piece.data, owned=True)
        touched.add(tp)
        after_append()
    return touched
