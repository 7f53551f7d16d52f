"""kafkatier.storage.cleaner.kernels: the cleaner's numba core.

The bounded key -> offset map (``offset_map``: Kafka's ``SkimpyOffsetMap`` over ``slots``, keys
digested by ``md5`` or ``murmur``) and the walks that consult it without Python per record:
per record (``records``), per batch (``batches``) and per read chunk (``chunks``).
"""
