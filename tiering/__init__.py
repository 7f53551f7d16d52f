"""kafkatier.tiering: the S3 tiering sidecar, built on kafkatier.storage (no Spark).

Packages from the bottom up: ``store`` (object stores), ``metadata`` (manifests and the local
view), ``copy`` (upload and local retention), ``cleaner`` (remote retention and compaction),
``read`` (remote reads and restore), ``sidecar`` (the pass, the loop, status and metrics).
``config``, ``errors`` and ``crash`` (SIGKILL test points) serve them all.
"""
