"""The error root of kafkatier and the storage layer's typed errors.

Every error kafkatier raises derives from :class:`KafkaTierError`, so callers can catch one type.
Errors are picklable (they travel back from Spark executors to the driver), which plain
``Exception`` subclasses with keyword-only constructors are not; :meth:`KafkaTierError.__reduce__`
rebuilds them from their keyword fields.
"""

from __future__ import annotations

import errno
from typing import Any


class KafkaTierError(Exception):
    """Root of every kafkatier error; carries keyword context shown in the message."""

    def __init__(self, message: str, **context: Any) -> None:
        self.message = message
        self.context = context
        for name, value in context.items():
            setattr(self, name, value)
        super().__init__(self._render())

    def _render(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in self.context.items() if v is not None)
        return f"{self.message} ({where})" if where else self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.context))

    def moved(self, by: int) -> KafkaTierError:
        """This error for bytes that begin ``by`` bytes into their file: a ``position`` found
        in a slice, as a position in the whole file (itself when it names no position)."""
        position = self.context.get("position")
        if position is None:
            return self
        return type(self)(self.message, **{**self.context, "position": position + by})


def _rebuild(cls: type[KafkaTierError], message: str, context: dict[str, Any]) -> KafkaTierError:
    return cls(message, **context)


class StorageError(KafkaTierError):
    """Root of errors from kafkatier.storage (the log engine)."""


class CorruptRecordError(StorageError):
    """Bytes that are not a valid record batch; ``file`` and ``position`` say where."""


class InvalidRecordError(StorageError):
    """A well-framed batch whose content breaks Kafka's rules (bad lengths, counts, codecs)."""


class CompressionError(InvalidRecordError):
    """A compressed payload that the codec cannot decode, or a codec Kafka does not know."""


class CorruptIndexError(StorageError):
    """An index file that fails Kafka's sanity checks (size, ordering, range)."""


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot with a bad version, CRC or length."""


class CheckpointError(StorageError):
    """A checkpoint or metadata file that does not parse."""


class LogWriteError(StorageError):
    """A write, allocation or sync the filesystem refused (no space left, quota, I/O error):
    ``file`` and ``position`` say where. The operation that raised it left its log as it was
    before (a partial write is cut off again), so it can be retried once the cause is gone."""

    @classmethod
    def of(cls, action: str, exc: OSError, **context: object) -> LogWriteError:
        """``action`` failed with ``exc``: its strerror (errno name) as the message."""
        name = errno.errorcode.get(exc.errno or 0, "")
        cause = f"{exc.strerror or exc} ({name})" if name else (exc.strerror or str(exc))
        return cls(f"{action}: {cause}", **context)


class OffsetOutOfRangeError(StorageError):
    """A read or truncation at an offset outside the log."""


class ConfigError(KafkaTierError):
    """A setting with a bad name or value; ``setting`` and ``source`` say which and where."""


class ProducerStateError(StorageError):
    """Root of the producer-state rule violations Kafka reports to producers."""


class InvalidProducerEpochError(ProducerStateError):
    """An append with an epoch older than the producer's current one (a fenced producer)."""


class OutOfOrderSequenceError(ProducerStateError):
    """A batch whose first sequence does not follow the producer's last sequence."""


class InvalidTxnStateError(ProducerStateError):
    """A non-transactional append while a transaction is open, or a similar misuse."""


class TransactionCoordinatorFencedError(ProducerStateError):
    """A transaction marker from an older coordinator epoch."""


class RecordTooLargeError(StorageError):
    """A batch larger than ``max.message.bytes`` or ``segment.bytes`` allows."""
