"""``kafkatier demo``: the engine end to end on embedded sample data (what ``make run`` runs).

It writes a small ``orders`` topic into a log directory the way the Spark sink will (Arrow in,
Kafka's default partitioner, lz4 batches, an idempotent producer, one committed and one aborted
transaction), closes it cleanly, reopens it, reads it back in both isolation levels and checks
every file with the same code as ``kafkatier verify``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatier.cli.commands import summary

if TYPE_CHECKING:  # the command's libraries are imported where it runs: cli/commands.py
    import pyarrow as pa

    from kafkatier.storage.log.directory import LogDirectory

TOPIC = "orders"
PARTITIONS = 3
PRODUCER_ID = 1000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help=summary("demo"),
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dir", type=Path, default=Path("demo-logs"), help="log directory (default ./demo-logs)"
    )
    parser.add_argument("--records", type=int, default=30_000, help="sample rows (default 30000)")
    parser.set_defaults(func=run)


def sample_orders(rows: int, offset: int = 0) -> pa.Table:
    """Deterministic sample rows: 16-byte customer keys, JSON order values, one header."""
    import pyarrow as pa

    ids = range(offset, offset + rows)
    keys = [f"customer-{i % 997:07d}".encode() for i in ids]
    values = [f'{{"order":{i},"amount":{(i * 37) % 1000}.{i % 100:02d}}}'.encode() for i in ids]
    headers = [[{"key": "source", "value": b"kafkatier-demo"}] for _ in ids]
    stamps = [1_700_000_000_000 + i * 10 for i in ids]
    return pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "headers": pa.array(
                headers, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
            ),
            "timestamp": pa.array(stamps, pa.int64()),
        }
    )


def _write(log_dir: LogDirectory, table: pa.Table) -> None:
    import pyarrow as pa

    from kafkatier.storage.arrow.log import append_arrow
    from kafkatier.storage.partitioner import assign_partitions

    log_dir.topic_configs.update(
        TOPIC, {"compression.type": "lz4", "segment.bytes": str(256 * 1024)}, source="demo"
    )
    log_dir.create_partitions(TOPIC, PARTITIONS)
    logs = [log_dir.logs[(TOPIC, p)] for p in range(PARTITIONS)]
    parts = assign_partitions(table.column("key"), PARTITIONS)
    for partition, log in enumerate(logs):
        rows = table.filter(pa.array(parts == partition))
        append_arrow(log, rows, producer_id=PRODUCER_ID + partition, producer_epoch=0,
                     base_sequence=0)  # fmt: skip
        txn_pid = PRODUCER_ID + 100 + partition
        for commit in (True, False):
            batch = sample_orders(5, offset=10_000_000 + partition * 10 + int(commit))
            append_arrow(log, batch, producer_id=txn_pid, producer_epoch=0,
                         base_sequence=0 if commit else 5, transactional=True)  # fmt: skip
            log.write_txn_marker(txn_pid, 0, commit=commit)
    log_dir.flush()


def run(args: argparse.Namespace) -> int:
    from kafkatier.storage.arrow.log import read_arrow
    from kafkatier.storage.log.directory import LogDirectory
    from kafkatier.storage.log.reader import IsolationLevel
    from kafkatier.storage.log.writer_lock import writer_turn
    from kafkatier.storage.verify.paths import verify_paths

    if args.dir.exists():
        shutil.rmtree(args.dir)
    table = sample_orders(args.records)
    with writer_turn(args.dir, who="kafkatier demo"), LogDirectory(args.dir) as log_dir:
        _write(log_dir, table)
    print(f"wrote {args.records} records (+ a committed and an aborted transaction per partition)")
    print(f"to {TOPIC}, {PARTITIONS} partitions, lz4, in {args.dir}/")
    with LogDirectory(args.dir) as log_dir:
        for log in log_dir:
            committed = read_arrow(log, isolation=IsolationLevel.READ_COMMITTED).num_rows
            everything = read_arrow(log).num_rows
            print(
                f"  {log.topic}-{log.partition}: offsets {log.log_start_offset}.."
                f"{log.log_end_offset - 1}, {len(log.segments)} segments, "
                f"{committed} records read_committed, {everything} read_uncommitted"
            )
    problems = verify_paths([args.dir])
    for problem in problems:
        print(f"  problem: {problem}")
    print("verify: clean" if not problems else f"verify: {len(problems)} problems")
    print(f"inspect it with: kafkatier dump {args.dir}/{TOPIC}-0 --records | head")
    return 0 if not problems else 1
