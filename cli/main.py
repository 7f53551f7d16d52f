"""Entry point of the ``kafkatier`` command: one parser, a subcommand per module.

Each subcommand module in this package exposes ``register(subparsers)``, which adds its parser and
sets ``func`` (taking the parsed args, returning the exit code). Exit codes follow the usual
convention: 0 success, 1 the command ran and found problems or failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import threading
import traceback
from collections.abc import Sequence
from typing import NoReturn

from kafkatier.cli import __version__
from kafkatier.cli.commands import COMMANDS, summary
from kafkatier.storage.errors import ConfigError, KafkaTierError


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """With ``command``, that subcommand's parser (its module alone is imported: ``status`` must
    not pay for the imports of ``run``, Spark's among them); without, every subcommand by name
    and summary only (``kafkatier --help`` imports none of them)."""
    parser = argparse.ArgumentParser(
        prog="kafkatier",
        description=(
            "Kafka partition logs on disk, without a Kafka cluster: write records into Kafka's own "
            "segment format, tier segments to S3, serve the topics to Kafka clients, inspect and "
            "verify log directories."
        ),
        epilog="Run 'kafkatier COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"kafkatier {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, show the Python traceback after the one-line message")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    if command is None:
        for name in COMMANDS:
            subparsers.add_parser(name, help=summary(name), add_help=False)
    else:
        importlib.import_module(f"kafkatier.cli.{COMMANDS[command][0]}").register(subparsers)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names, when nothing before it asks for the whole parser
    (``--help``, ``--version``) and it is one (a typo needs the whole list)."""
    known = set(COMMANDS)
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in known else None
        if arg in ("-h", "--help", "--version"):
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        result: int = args.func(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        code, message = describe(exc)
        print(f"kafkatier {args.command}: error: {message}", file=sys.stderr)
        if args.debug:
            traceback.print_exc()
        return code
    return result


def entry() -> NoReturn:
    """The ``kafkatier`` console script: :func:`main`, then :func:`exit_without_teardown`."""
    exit_without_teardown(main())


def exit_without_teardown(code: int) -> NoReturn:
    """End the process with ``code`` as Python's own exit would, less the teardown that frees
    every module and object one by one (about 0.2 s after ``produce``, numba's and pyarrow's
    state among them: a tenth of the command), which the kernel does at once: the non-daemon
    threads joined first (or, if any is still running, Python's exit as usual), the ``atexit``
    handlers run (logging's flush among them), stdout and stderr flushed, then ``os._exit``.
    Every file a command writes is closed by the command itself."""
    main_thread = threading.main_thread()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not main_thread):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: Python's exit reports it as 120
            code = code or 120
    os._exit(code)


def describe(exc: Exception) -> tuple[int, str]:
    """The exit code and the one line for an error that ended a command: 2 for a bad setting or
    input (usage), 1 for the rest; a file-system error names its path; an error kafkatier did not
    expect says so and how to see where it came from. Notes added to the error
    (``add_note``) follow on the same line."""
    code, line = _describe(exc)
    notes = getattr(exc, "__notes__", ())  # what the command adds: e.g. what it did before
    return code, "; ".join([line, *notes])


def _describe(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, ConfigError):
        return 2, str(exc)
    if isinstance(exc, KafkaTierError):
        return 1, str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
        return 1, f"{paths}: {exc.strerror}" if paths else exc.strerror
    return 1, f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)"


if __name__ == "__main__":
    entry()
