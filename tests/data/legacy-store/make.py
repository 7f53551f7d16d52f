"""Writes legacy-store.tar.gz: a log dir and the file:// remote store its sidecar wrote, by the
release before topic ids were part of the remote layout (commit d8f6cb1), for
tests/tiering/metadata/test_legacy_store.py. Run it with that release's code as ``kafkatier``:

    git worktree add /tmp/rel d8f6cb1 && mkdir -p /tmp/relpkg/kafkatier
    for p in storage sink tiering cli; do ln -s /tmp/rel/$p /tmp/relpkg/kafkatier/$p; done
    cd /tmp && PYTHONPATH=/tmp/relpkg /work/main/.venv/bin/python \
        /work/main/tests/data/legacy-store/make.py /work/main/tests/data/legacy-store

The topic ``tiered`` has two partitions of small segments (plain, idempotent and transactional
batches); every closed segment is uploaded, and the log dir is closed cleanly.
"""

from __future__ import annotations

import itertools
import sys
import tarfile
import tempfile
from pathlib import Path

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import Codec
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.sidecar.tierer import Tierer

T0 = 1_700_000_000_000
TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000",
          "index.interval.bytes": "300", "retention.ms": "-1"}


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with LogDirectory(root / "logs") as log_dir:
            log_dir.topic_configs.update("tiered", TIERED, "legacy fixture")
            for p in (0, 1):
                log = log_dir.get_or_create("tiered", p)
                codecs = itertools.cycle(Codec)
                for step in range(20):
                    recs = [Record(i, T0 + step * 10 + i, b"k%d" % (step * 10 + i), b"v" * 60, ())
                            for i in range(3)]
                    log.append(build_batch(recs, codec=next(codecs)))
                    if step % 4 == 3:
                        pid = 5000 + step
                        log.append(build_batch(recs[:2], producer_id=pid, producer_epoch=0,
                                               base_sequence=0, transactional=True))
                        log.write_txn_marker(pid, 0, commit=step % 8 != 7, timestamp=T0 + step)
        (root / "remote").mkdir()
        config = TieringConfig(log_dirs=(root / "logs",), remote_url=f"file://{root / 'remote'}")
        assert Tierer(config).run_once().failures == 0
        with tarfile.open(out / "legacy-store.tar.gz", "w:gz") as tar:
            tar.add(root / "logs", arcname="logs")
            tar.add(root / "remote", arcname="remote")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
