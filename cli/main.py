"""Entry point of the ``kafkatier`` command: one parser, a subcommand per module.

Each subcommand module in this package exposes ``register(subparsers)``, which adds its parser and
sets ``func`` (taking the parsed args, returning the exit code). Exit codes follow the usual
convention: 0 success, 1 the command ran and found problems or failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from kafkatier.cli import __version__
from kafkatier.storage.errors import ConfigError, KafkaTierError

COMMANDS: tuple[str, ...] = (
    "produce", "dump", "verify", "clean", "demo", "run.command", "sidecar", "restore", "status"
)
"""Subcommand modules of kafkatier.cli (``run`` is a package), in the order ``--help`` lists
them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkatier",
        description=(
            "Kafka partition logs on disk, without a Kafka cluster: write records into Kafka's own "
            "segment format, inspect and verify log directories."
        ),
        epilog="Run 'kafkatier COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"kafkatier {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"kafkatier.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        result: int = args.func(args)
    except ConfigError as exc:  # a bad setting or input column is a usage error
        print(f"kafkatier {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KafkaTierError as exc:
        print(f"kafkatier {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return result


if __name__ == "__main__":
    sys.exit(main())
