"""The sink's appends of a micro-batch into more partitions than the process may open files: the
queue of writes pins each partition's ``.log`` until its write is done, and holds no more of
them at once than half the descriptor budget (``log.max.open.files``, by default half of
``ulimit -n``). A sink writing 2,048 partitions under the common limit of 1,024 failed its
second batch with EMFILE before; here 300 partitions under 96, in a process of its own, through
the sink's ``write_all`` (its one call of the C library a chunk of partitions, the carried state
of each partition from batch to batch), batch after batch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fd_probe import open_descriptors

from kafkatier.storage import native
from kafkatier.storage.log.directory import LogDirectory

LIMIT = 96
PARTITIONS = 300
ROUNDS = 4

WRITER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))
from pathlib import Path
from fd_probe import open_descriptors
from kafkatier.sink.append import Checked, write_all
from kafkatier.sink.pieces import PartitionSpans
from kafkatier.sink.stage import StagingFiles
from kafkatier.storage.log.commit_fields import Carried
from kafkatier.storage.log.committed_all import Later
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
NOW, PID, count, peak = 1_700_000_000_000, 7000, {count}, 0

def txn(seq):
    records = [Record(i, NOW + i, b"k%d" % i, b"v" * 300) for i in range(4)]
    return bytearray(build_batch(records, producer_id=PID, producer_epoch=0,
                                 base_sequence=seq, transactional=True))

with LogDirectory(Path(sys.argv[1])) as logs:
    logs.create_partitions("t", count)
    for log in logs:  # the producer's first transaction, the full way (a sink's first batch)
        log.append_committed(parse_incoming(txn(0), AppendOrigin.CLIENT), PID, 0, timestamp=NOW)
    carried = Carried()
    for round_ in range(1, {rounds}):
        later = Later()
        checked = [Checked(PartitionSpans("t", p, 4, []), 4 * round_, None, [memoryview(txn(0))])
                   for p in range(count)]
        with StagingFiles() as files:
            write_all(checked, logs.get, files, (PID, 0, NOW), None, later, carried)
        later.apply()
        peak = max(peak, open_descriptors())
print(peak, len(carried))
"""


def test_a_batch_into_more_partitions_than_the_process_may_open_files(tmp_path: Path) -> None:
    if native.native() is None:
        pytest.skip("the C library is not built here: the sink's appends queue nothing")
    script = WRITER.format(limit=LIMIT, count=PARTITIONS, rounds=ROUNDS)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, cwd=Path(__file__).parents[1] / "storage",
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    peak, carried = (int(field) for field in done.stdout.split())
    assert peak < LIMIT
    assert carried == PARTITIONS  # every partition went through the one call, batch after batch
    before = open_descriptors()
    with LogDirectory(tmp_path) as logs:
        ends = sorted(log.log_end_offset for log in logs)
    assert ends == [5 * ROUNDS] * PARTITIONS  # 4 records and a COMMIT marker a round
    assert open_descriptors() == before
