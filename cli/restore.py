"""``kafkatier restore``: rebuild a topic's partition directories from the remote store."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatier.cli.commands import summary

if TYPE_CHECKING:
    from kafkatier.tiering.store.object_store import ObjectStore

EPILOG = """\
The remote store and its settings come from the configuration file (--config); the
credentials from the usual AWS chain (environment, ~/.aws, profile). Only segments whose copy
is COPY_SEGMENT_FINISHED are restored, with their original offsets, indexes, transaction index
and producer snapshot; then leader-epoch-checkpoint, partition.metadata, the topic's settings
and the log dir's checkpoints. Every file is checked (size and SHA-256) before it is put in
place, so an interrupted restore is resumed by running the same command again.

exit codes: 0 restored, 1 failed, 2 usage or configuration error.

examples:
  kafkatier restore --config conf/sidecar.properties --topic events --to /data/restored
  kafkatier restore --config sidecar.properties --topic events --partition 3 --to DIR \\
      --from-timestamp 1700000000000
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "restore",
        help=summary("restore"),
        description="Download a topic's remote segments into partition directories under DIR.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, type=Path,
                        help="configuration file (conf/kafkatier.properties or a sidecar file)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=_at_least(0), action="append",
                        help="only this partition (repeatable; default: all)")  # fmt: skip
    parser.add_argument("--to", required=True, type=Path, metavar="DIR",
                        help="target log dir")  # fmt: skip
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-offset", type=_at_least(0), metavar="O",
                       help="start at the segment holding offset O (the log start becomes O)")
    start.add_argument("--from-timestamp", type=_at_least(0), metavar="MS",
                       help="start at the first segment with a record at or after MS")
    parser.add_argument("--topic-id", metavar="ID",
                        help="the incarnation to restore when the topic was deleted and created "
                        "again (default: the one DIR holds, else the only one)")
    parser.add_argument("--threads", type=_at_least(1), default=8, help="parallel downloads [8]")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kafkatier.cli.config.loader import load_config  # see cli/commands.py
    from kafkatier.cli.config.remote import remote_storage

    with remote_storage(load_config(args.config)) as tiering:
        return _restore(args, tiering.open_store())


def _restore(args: argparse.Namespace, store: ObjectStore) -> int:
    from tqdm import tqdm

    from kafkatier.tiering.read.restore import RestoreResult, restore_topic

    bar = tqdm(unit="B", unit_scale=True, desc=f"restore {args.topic}",
               disable=args.quiet or not sys.stderr.isatty())  # fmt: skip

    def report(result: RestoreResult) -> None:
        bar.write(
            f"{result.topic}-{result.partition}: {result.segments} segments, offsets "
            f"[{result.log_start_offset}, {result.log_end_offset}), "
            f"{result.files_downloaded} files downloaded, {result.files_skipped} already in place"
        )

    with bar:
        results = restore_topic(
            store, args.topic, args.to, partitions=args.partition,
            from_offset=args.from_offset, from_timestamp=args.from_timestamp,
            threads=args.threads, progress=bar.update, on_partition=report,
            topic_id=args.topic_id,
        )
    if not results:
        print(f"kafkatier restore: no remote data for topic {args.topic}", file=sys.stderr)
        return 1
    starts = args.from_offset is not None or args.from_timestamp is not None
    empty = [f"{r.topic}-{r.partition}" for r in results if not r.segments]
    if starts and empty:  # the offset or time is past what the remote copy holds
        start = (f"--from-offset {args.from_offset}" if args.from_offset is not None
                 else f"--from-timestamp {args.from_timestamp}")  # fmt: skip
        print(f"kafkatier restore: {start} is past the remote copy of {', '.join(empty)}: "
              "nothing of it restored", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    parse.__name__ = "int"  # argparse's "invalid int value" for a text that is no number
    return parse
