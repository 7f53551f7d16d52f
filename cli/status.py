"""``kafkatier status``: per partition, local and remote offset ranges, bytes and upload lag."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatier.cli.commands import summary

if TYPE_CHECKING:
    from kafkatier.tiering.sidecar.status import PartitionStatus

_HEADER = ("partition", "local offsets", "local bytes", "remote offsets", "remote bytes",
           "lag segs", "lag bytes")  # fmt: skip


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status",
        help=summary("status"),
        description="Per partition: local and remote offset ranges ([start, end)), bytes, and "
        "upload lag (closed local segments above the highest remote offset).",
    )
    parser.add_argument("--config", required=True, type=Path,
                        help="configuration file (conf/kafkatier.properties or a sidecar file)")
    parser.add_argument("--json", action="store_true", help="one JSON object per partition")
    parser.add_argument("--refresh", action="store_true",
                        help="read every partition's manifest from the remote store, not the "
                        "copy the sidecar keeps in the partition directory (one request each; "
                        "for changes a writer on another machine or a lifecycle rule made)")
    parser.set_defaults(func=run)


def _range(start: int | None, end: int | None) -> str:
    return "-" if start is None or end is None else f"[{start}, {end})"


def _row(s: PartitionStatus) -> tuple[str, ...]:
    name = f"{s.topic}-{s.partition}" + (f" (stale: topic id {s.topic_id})" if s.stale else "")
    name += " (error: remote side unknown)" if s.error else ""
    return (name, _range(s.local_start, s.local_end), str(s.local_bytes),
            _range(s.remote_start, s.remote_end), str(s.remote_bytes), str(s.lag_segments),
            str(s.lag_bytes))  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from kafkatier.cli.config.loader import load_config  # see cli/commands.py
    from kafkatier.cli.config.remote import remote_storage
    from kafkatier.tiering.sidecar.status import status_report

    with remote_storage(load_config(args.config)) as tiering:
        report = status_report(tiering, refresh=args.refresh)
    statuses = report.partitions
    errors = [f"{s.topic}-{s.partition}: {s.error}" for s in statuses if s.error]
    for error in errors:  # the rows still print: the local sides, the other partitions
        print(f"kafkatier status: error: {error}", file=sys.stderr)
    if args.json:
        for s in statuses:
            print(json.dumps(s.to_json()))
    else:
        rows = [_HEADER, *(_row(s) for s in statuses)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
        for row in rows:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    if report.store_error is not None:  # its line (and with --debug its traceback) from main
        raise report.store_error
    return 1 if errors else 0
