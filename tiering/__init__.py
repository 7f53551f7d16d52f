"""kafkatier.tiering: the S3 tiering sidecar (built on kafkatier.storage; see issue 5)."""
