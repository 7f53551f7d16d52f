"""``kafkatier sidecar``: copy closed segments to remote storage and free local disk."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from kafkatier.cli.commands import summary

EPILOG = """\
Per partition of every topic with remote.storage.enable=true in the configured log dirs:
closed segments below the last stable offset and the recovery point are uploaded (.log,
.index, .timeindex, .txnindex, producer snapshot, leader epochs), verified, and recorded as
COPY_SEGMENT_FINISHED in the partition's remote manifest; then local.retention.ms/bytes delete
local segments whose remote copy is finished. A pass runs on file-system events (inotify) and
every remote.log.manager.task.interval.ms. SIGTERM/SIGINT stop after the current pass.

The configuration is conf/kafkatier.properties' format (a file with only the sidecar's keys,
like conf/sidecar.properties, works too); its topic.<name>.<setting> lines are written to the
log dir's topic files first. With remote.storage.embedded=true the local S3 server is started
for as long as the sidecar runs. Credentials come from the usual AWS chain, never from the file.

exit codes: 0 stopped cleanly (--once: every partition tiered), 1 a partition failed (--once),
2 usage or configuration error.

examples:
  kafkatier sidecar --config conf/sidecar.properties
  kafkatier sidecar --config conf/sidecar.properties --once --log-format json
"""


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (structured logs)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def setup_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("kafkatier")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("botocore", "boto3", "s3transfer", "urllib3", "watchdog"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sidecar",
        help=summary("sidecar"),
        description="Upload closed segments of tiered topics and apply local retention.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, type=Path,
                        help="configuration file (conf/kafkatier.properties or a sidecar file)")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("--log-level", default="info")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kafkatier.cli.config.loader import load_config  # see cli/commands.py
    from kafkatier.cli.config.remote import remote_storage
    from kafkatier.tiering.sidecar.loop import Sidecar

    setup_logging(args.log_format, args.log_level)
    config = load_config(args.config)
    config.write_topic_configs()  # the file's topic.* settings are what the passes apply
    with remote_storage(config) as tiering:
        sidecar = Sidecar(tiering)
        sidecar.tierer.store.probe()  # a store it cannot use is a setting to fix: say so now
        for log_dir in tiering.log_dirs:
            if not log_dir.is_dir():  # a pass over it tiers nothing: say why
                logging.getLogger("kafkatier.tiering").warning(
                    "log dir %s (log.dirs) does not exist: nothing of it is tiered until it does",
                    log_dir)  # fmt: skip
        if args.once:
            return 1 if sidecar.run_pass().failures else 0
        sidecar.install_signal_handlers()
        sidecar.run()
    return 0
