"""The subcommands of ``kafkatier``: each one's module and one-line summary, in ``--help``
order. They are listed apart from their modules so that ``kafkatier --help`` imports none of
them (each brings what it runs on: pyarrow, numba, boto3, the Kafka wire protocol, Spark), and
a subcommand imports its own module alone (kafkatier.cli.main). A module imports what its
command runs on inside ``run()``, so that ``kafkatier <command> --help`` needs none of it."""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, str]] = {
    "produce": ("produce", "append records from a Parquet, JSON Lines or CSV file to a topic"),
    "dump": ("dump", "print the batches, records, index entries and state in Kafka log files"),
    "verify": ("verify", "check log dirs, partitions or files for corruption and inconsistencies"),
    "clean": ("clean", "apply retention and compaction to a log dir once"),
    "demo": ("demo", "write, reopen, read back and verify a sample topic (what 'make run' does)"),
    "run": ("run.command",
            "the streaming job, sidecar, serve, restore and replay checks (what 'make run' runs)"),
    "sidecar": ("sidecar", "tier closed segments to remote storage (long-running)"),
    "serve": ("serve",
              "serve the log dirs to Kafka clients over the Kafka protocol (long-running)"),
    "restore": ("restore", "rebuild partitions from remote storage"),
    "status": ("status", "local and remote ranges of tiered partitions"),
}
"""Subcommand -> (its module in kafkatier.cli, its summary)."""


def summary(name: str) -> str:
    return COMMANDS[name][1]
