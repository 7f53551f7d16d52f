"""kafkatier.storage.dump: ``kafkatier dump`` as a library, as Kafka's ``kafka-dump-log.sh``.

``paths`` walks the given paths; ``log`` yields a segment's batches and records, ``state`` its
indexes and the state files; ``items`` is the item format and its JSON form.
"""
