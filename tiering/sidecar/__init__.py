"""kafkatier.tiering.sidecar: the sidecar process.

``tierer`` is one pass over every partition (copy, orphans, local and remote retention, remote
compaction); ``loop`` runs passes on file-system events and a timer; ``status`` reports each
partition's tiers and upload lag; ``metrics`` serves them to Prometheus.
"""
