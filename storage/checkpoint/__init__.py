"""kafkatier.storage.checkpoint: Kafka's small state files beside the segments.

Offset checkpoints (``checkpoint_file``), the leader-epoch cache and its checkpoint
(``leader_epoch``), and the metadata files (``metadata``: ``partition.metadata`` with the topic
id, ``meta.properties``, the clean-shutdown marker, partition directory names).
"""
