"""kafkatier.storage.index: a segment's three index files.

The offset index (``.index``, ``offset_index``) and the time index (``.timeindex``,
``time_index``) share Kafka's fixed-entry, memory-mapped machinery (``base``) and its search
(``search``); the transaction index (``.txnindex``, ``txn_index``) lists aborted transactions.
"""
