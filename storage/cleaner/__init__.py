"""kafkatier.storage.cleaner: log cleaning as a Kafka broker does it.

Retention (``retention``: ``cleanup.policy=delete``, DeleteRecords) and key compaction
(``compact``: Kafka's ``LogCleaner``: ``choose`` the range, ``build_map`` of the dirty keys,
``filter`` what survives, with ``txn``, ``legacy``, ``fast``, ``chunk`` and ``compressed`` paths),
over a :class:`~kafkatier.storage.cleaner.segment_store.SegmentStore` that the tiering layer also
implements for remote segments. ``clean_pass`` runs both over a log dir (``kafkatier clean``).
"""
