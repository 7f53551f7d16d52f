"""kafkatier.tiering.metadata: what the sidecar knows of a partition.

Its remote ``manifest`` (one JSON object per partition, committed by conditional put: the commit
point of every remote change) and its ``local`` files, read without taking the writer's place.
"""
