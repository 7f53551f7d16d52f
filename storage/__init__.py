"""kafkatier.storage: Kafka's partition log engine in Python (no Spark, no S3).

Files written here are byte-compatible with what a Kafka broker writes: record batches
(``records``), segments and their indexes, producer state, transactions, checkpoints and recovery.
"""
