"""Entry point of the ``kafkatier`` command: builds the parser from each subcommand module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kafkatier.cli import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkatier",
        description=(
            "Work with Kafka partition logs on disk, without a Kafka cluster: write records "
            "into Kafka's own segment format, inspect and verify log directories."
        ),
    )
    parser.add_argument("--version", action="version", version=f"kafkatier {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
