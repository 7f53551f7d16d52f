"""kafkatier.tiering.cleaner: retention and key compaction of a partition's remote copy.

``retention`` expires remote segments (Kafka's RLM expiration) and ``local_log_start`` makes the
local files follow; ``compaction`` runs the local cleaner's own code over the remote segments
(``view`` of the whole log, ``segment_store`` for reads and writes, ``swap`` to commit a cleaned
group); ``clean_pass`` is one pass by hand (``kafkatier clean --remote``).
"""
