"""``kafkatier dump``: print Kafka log files, as Kafka's ``kafka-dump-log.sh`` does."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from kafkatier.cli.commands import summary
from kafkatier.cli.progress import BYTES, progress_bar
from kafkatier.storage.dump.items import Item, to_json
from kafkatier.storage.verify.files import Kind, parse_file_name

EPILOG = """\
what is printed, per file:
  .log            one line per batch (baseOffset, lastOffset, count, producer, position,
                  max timestamp, size, magic, codec, crc, isvalid); --records adds a
                  '| offset: ...' line per record, --print-data-log its key and value
  .index          'offset: O position: P' (the batch at byte P ends at offset O)
  .timeindex      'timestamp: T offset: O'
  .txnindex       aborted transactions: producer, first/last offset, last stable offset
  .snapshot       producer state: epoch, last sequence/offset, timestamp, open transaction
  checkpoints     leader-epoch-checkpoint, the four offset checkpoints, partition.metadata,
                  meta.properties
A partition dir dumps its files in offset order, a log dir its root files and then every
partition. Nothing is ever modified.

exit codes: 0 everything read, 1 a torn or corrupt batch or an unreadable file was reported
(that file stops there), 2 usage error (e.g. a path that does not exist).

examples:
  kafkatier dump /data/kafka-logs/events-0/00000000000000000000.log --records
  kafkatier dump /data/kafka-logs/events-0 --json --records | jq 'select(.type=="record")'
  kafkatier dump /data/kafka-logs/events-0/00000000000000000000.index
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "dump",
        help=summary("dump"),
        description="Print the contents of Kafka log files (like kafka-dump-log.sh): a segment "
        "file, index, snapshot or checkpoint, a partition dir or a whole log dir.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="a Kafka file, partition dir or log dir")  # fmt: skip
    parser.add_argument("--records", action="store_true",
                        help="also print every record of each batch")  # fmt: skip
    parser.add_argument("-d", "--print-data-log", action="store_true",
                        help="print record keys and values too (implies --records)")  # fmt: skip
    parser.add_argument("--json", action="store_true",
                        help="JSON Lines, one object per item, keys/values in base64")  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # the readers' modules imported here, not at the top: ``dump --help`` needs none of them
    from kafkatier.storage.dump.paths import NotDumpableError, dump_paths
    from kafkatier.storage.verify.paths import log_bytes

    missing = [p for p in args.paths if not p.exists()]
    if missing:
        print(f"kafkatier dump: error: no such file or directory: {missing[0]}", file=sys.stderr)
        return 2
    records = args.records or args.print_data_log
    out: TextIO = sys.stdout
    problems = 0
    try:
        # a bar only for a terminal not also receiving the dump
        show = sys.stderr.isatty() and not sys.stdout.isatty()
        total = functools.partial(log_bytes, args.paths)
        with progress_bar(show, total, desc="dump", **BYTES) as progress:
            for item in dump_paths(args.paths, records=records, progress=progress):
                problems += item["type"] == "problem"
                if args.json:
                    out.write(json.dumps(to_json(item)) + "\n")
                else:
                    out.write(format_item(item, args.print_data_log) + "\n")
    except NotDumpableError as exc:
        print(f"kafkatier dump: error: {exc}", file=sys.stderr)
        return 2
    return 1 if problems else 0


def format_item(item: Item, data: bool = False) -> str:
    """One item as DumpLogSegments prints it."""
    kind = item["type"]
    if kind == "batch":
        return _batch_line(item)
    if kind == "record":
        return _record_line(item, data)
    if kind == "file":
        return _file_header(item)
    if kind == "problem":
        where = "" if item["position"] is None else f" at position {item['position']}"
        return f"problem{where}: {item['message']}"
    if kind == "note":
        return f"({item['message']})"
    return _fields(item, FIELD_ORDER.get(kind, ()))


FIELD_ORDER: dict[str, tuple[str, ...]] = {
    "indexEntry": ("offset", "position"),
    "timeIndexEntry": ("timestamp", "offset"),
    "abortedTxn": ("producerId", "firstOffset", "lastOffset", "lastStableOffset"),
    "producerState": (
        "producerId",
        "producerEpoch",
        "coordinatorEpoch",
        "currentTxnFirstOffset",
        "lastSequence",
        "lastOffset",
        "offsetDelta",
        "timestamp",
    ),
    "checkpointEntry": ("topic", "partition", "offset"),
    "leaderEpoch": ("epoch", "startOffset"),
    "partitionMetadata": ("topicId",),
    "metaProperties": ("version", "clusterId", "nodeId", "directoryId"),
    "cleanShutdown": ("brokerEpoch",),
}


def _fields(item: Item, names: tuple[str, ...]) -> str:
    return " ".join(f"{name}: {_text(item[name])}" for name in names)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "None" if value is None else str(value)


def _file_header(item: Item) -> str:
    line = f"Dumping {item['file']}"
    name = parse_file_name(Path(item["file"]).name)
    if name.kind is Kind.LOG:
        line += f"\nLog starting offset: {name.offset}"
    return line


def _batch_line(b: Item) -> str:
    timestamp_type = b["timestampType"] if b["magic"] > 0 else "NoTimestampType"
    horizon = b["deleteHorizonMs"]
    tail = (
        f" position: {b['position']} {timestamp_type}: {b['maxTimestamp']} size: {b['size']}"
        f" magic: {b['magic']} compresscodec: {b['codec']} crc: {b['crc']}"
        f" isvalid: {_text(b['crcValid'])}"
    )
    if b["magic"] < 2:
        return f"offset: {b['lastOffset']}{tail}"
    head = _fields(b, ("baseOffset", "lastOffset", "count", "baseSequence", "lastSequence",
                       "producerId", "producerEpoch", "partitionLeaderEpoch",
                       "isTransactional", "isControl"))  # fmt: skip
    horizon_text = "OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"
    return f"{head} deleteHorizonMs: {horizon_text}{tail}"


def _record_line(r: Item, data: bool) -> str:
    key, value = r["key"], r["value"]
    line = (
        f"| offset: {r['offset']} {r['timestampType']}: {r['timestamp']}"
        f" keySize: {-1 if key is None else len(key)} valueSize: "
        f"{-1 if value is None else len(value)} sequence: {r['sequence']}"
        f" headerKeys: [{','.join(name for name, _ in r['headers'])}]"
    )
    if r.get("controlType") in ("ABORT", "COMMIT"):
        return f"{line} endTxnMarker: {r['controlType']} coordinatorEpoch: {r['coordinatorEpoch']}"
    if "controlType" in r:
        return f"{line} controlType: {r['controlType']}"
    if data:
        line += f" key: {_payload(key)} payload: {_payload(value)}"
    return line


def _payload(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", "replace")
