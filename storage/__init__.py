"""kafkatier.storage: Kafka's partition log engine in Python (no Spark, no S3).

Files written here are byte-compatible with what a Kafka broker writes. Packages from the bottom
up (each imports only those before it; ``errors``, ``fsutil``, ``wire``, ``java_properties`` and
``partitioner`` are shared modules at this level):

- ``record``: records and batches v2, legacy message sets, varints, compression framings;
- ``checkpoint``: offset and leader-epoch checkpoints, ``partition.metadata``, ``meta.properties``;
- ``config``: topic settings with Kafka's names (``LogConfig``) and where they are kept;
- ``index``: the offset, time and transaction indexes of a segment;
- ``producer``: idempotent and transactional producer state and its snapshots;
- ``log``: segments, the partition log, recovery, reads, the log dir, the read-only view;
- ``arrow``: record batches to and from Arrow tables, and Arrow in and out of a log;
- ``cleaner``: retention and key compaction;
- ``verify`` and ``dump``: ``kafkatier verify`` and ``kafkatier dump`` as libraries.

The entry points a program needs are importable from here (loaded on first use, so importing a
submodule stays cheap): :class:`LogDirectory`, :class:`Log`, :class:`LogConfig`,
:func:`append_arrow`, :func:`read_arrow`, :class:`IsolationLevel`, :class:`ReadOnlyPartition`,
:func:`verify_paths`, :func:`dump_paths` and the error root :class:`KafkaTierError`.
"""

from __future__ import annotations

import importlib
from typing import Any

ENTRY_POINTS = {
    "LogDirectory": "kafkatier.storage.log.directory",
    "Log": "kafkatier.storage.log.log",
    "LogConfig": "kafkatier.storage.config.log_config",
    "append_arrow": "kafkatier.storage.arrow.log",
    "read_arrow": "kafkatier.storage.arrow.log",
    "IsolationLevel": "kafkatier.storage.log.reader",
    "ReadOnlyPartition": "kafkatier.storage.log.readonly",
    "verify_paths": "kafkatier.storage.verify.paths",
    "dump_paths": "kafkatier.storage.dump.paths",
    "KafkaTierError": "kafkatier.storage.errors",
}
"""Public name -> the module that defines it. Named as text, not imported: every module of the
package runs this one first (``from kafkatier.storage import wire`` included), so importing them
here, even for type checking only, would make the package and its modules import each other."""

__all__ = [
    "IsolationLevel",
    "KafkaTierError",
    "Log",
    "LogConfig",
    "LogDirectory",
    "ReadOnlyPartition",
    "append_arrow",
    "dump_paths",
    "read_arrow",
    "verify_paths",
]


def __getattr__(name: str) -> Any:
    module = ENTRY_POINTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkatier.storage' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
