"""kafkatier.sink: the Spark foreachBatch sink (built on kafkatier.storage; see issue 4)."""
