"""kafkatier.tiering.read: the remote copy read back.

``remote_reader`` reads a partition by offset or time from remote segments joined with the local
ones; ``restore`` rebuilds partition directories from the remote store with offsets intact.
"""
