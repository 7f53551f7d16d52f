"""kafkatier.storage.log: one partition's log, and a log directory of them.

A :class:`~kafkatier.storage.log.log.Log` is ordered ``segment``s (batches located by
``batch_position``); it appends with the leader's checks (``validator``, ``append``), rolls
(``roll``), loads with Kafka's crash recovery (``loader``), serves reads (``reader``) and deletes
files after ``file.delete.delay.ms`` (``delayed_delete``). ``directory`` is a ``log.dirs`` entry;
``writer_lock`` gives its writers turns. ``readonly`` views a partition without recovering or
writing it, beside a live writer (the Spark reader and the tiering sidecar use it).
"""
