"""kafkatier.sink: the Spark side: an exactly-once ``foreachBatch`` sink into Kafka-format
partitions (:class:`KafkaLogSink`) and the ``kafkatier`` Spark data source that replays them.

Names are imported lazily so that ``import kafkatier.sink`` does not start importing pyspark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KafkaLogSink", "KafkaTierDataSource", "register_data_source"]

_LAZY = {
    "KafkaLogSink": "kafkatier.sink.sink",
    "KafkaTierDataSource": "kafkatier.sink.source.datasource",
    "register_data_source": "kafkatier.sink.source.datasource",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkatier.sink' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
