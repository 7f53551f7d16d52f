"""``kafkatier produce``: append records from a file to a topic, as a Kafka producer would."""

from __future__ import annotations

import argparse
from pathlib import Path

from kafkatier.cli.commands import summary
from kafkatier.cli.formats import FORMATS

EPILOG = """\
examples:
  kafkatier produce /data/kafka-logs --topic events --input events.parquet --partitions 8
  kafkatier produce /data/kafka-logs --topic events --input more.jsonl --compression lz4
  kafkatier produce /data/kafka-logs --topic users --input users.csv \\
      --config cleanup.policy=compact --config segment.bytes=104857600

Input columns (Spark's Kafka sink columns): value (required), key, headers (list of
{key, value}), timestamp (epoch ms or ISO-8601), partition. Keyed records go to
(murmur2(key) & 0x7fffffff) % partitions, exactly Kafka's default partitioner; keyless records
are spread evenly; a partition column wins. --config settings use Kafka's topic config names and
are saved in LOG_DIR/kafkatier-topic.<topic>.properties for every later tool.
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "produce",
        help=summary("produce"),
        description="Append records from a file into a topic's partitions in LOG_DIR, in "
        "Kafka's own on-disk format (creating the topic if needed).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("log_dir", metavar="LOG_DIR", type=Path, help="Kafka log directory")
    parser.add_argument("--topic", required=True, help="topic to append to")
    parser.add_argument("--input", required=True, type=Path, metavar="FILE", help="records file")
    parser.add_argument("--format", choices=FORMATS, help="input format (default: from the name)")
    parser.add_argument(
        "--partitions", type=int, metavar="N", help="partition count of a new topic (default 1)"
    )
    parser.add_argument(
        "--compression",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        help="codec of the written batches (default: the topic's compression.type)",
    )
    parser.add_argument(
        "--max-open-files",
        type=int,
        metavar="N",
        help="log.max.open.files: files the log dir keeps open or mapped at once, the least "
        "recently used closed beyond it (default -1: half of ulimit -n)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic setting with Kafka's name, e.g. segment.bytes=1048576 (repeatable)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kafkatier.cli.produce_file import produce  # see cli/commands.py

    return produce(args)
