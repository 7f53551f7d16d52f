"""kafkatier.storage.record: Kafka's record format, independent of files.

One v2 ``record`` and its ``varint``s; record batches v2 viewed in place (``batch``) and built
(``builder``); batches read from a buffer (``records``); legacy message sets v0/v1 (``legacy``);
the codecs' payload framings (``compression``, with Kafka's lz4 frame in ``lz4_frame``); the
batches' CRC-32C (``crc``).
"""
