"""kafkatier.tiering.copy: local segments to the remote store, then off the local disk.

``upload`` copies a closed segment with Kafka's copy lifecycle; ``orphans`` removes what failed
attempts left; ``local_retention`` deletes local segments once their remote copy is durable.
"""
