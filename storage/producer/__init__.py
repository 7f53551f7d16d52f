"""kafkatier.storage.producer: idempotent and transactional producer state of a partition.

One producer's ``entry``, the validation of its appends (``append``), the partition's state
manager (``state``, Kafka's ``ProducerStateManager``) and its ``.snapshot`` files (``snapshot``).
"""
