"""kafkatier.storage.verify: ``kafkatier verify`` as a library: read-only checks of log dirs,
partitions and single files against Kafka's formats and what a broker derives from them.

``paths`` is the entry point; ``files`` names what a path is; ``partition``, ``segment`` and
``index`` check the files; ``state``, ``epochs``, ``cleaned`` and ``compaction`` replay the
batches and compare what Kafka would persist; ``problem`` is what is reported.
"""
