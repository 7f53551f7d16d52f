"""What the log tests share: a skip where the C library's queued writes cannot be had."""

from __future__ import annotations

import pytest

from kafkatier.storage.log.queued_writes import QueuedWrites


@pytest.fixture
def c_queues() -> None:
    """Skip the test where the C library is not built (``QueuedWrites.open`` gives None): its
    queued writes and the committed appends at once need it."""
    probe = QueuedWrites.open(1)
    if probe is None:
        pytest.skip("the C library is not built here: nothing is queued")
    probe.finish()
