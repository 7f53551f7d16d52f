"""The command table (kafkatier.cli.commands): ``kafkatier --help`` lists every subcommand
without importing any of them (the heavy libraries stay unloaded: a whole-process check, as a
user's shell sees it), and each subcommand's own parser is the one the table names."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from kafkatier.cli.commands import COMMANDS, summary

LIBRARIES = ("pyarrow", "numpy", "numba", "boto3", "botocore", "kio", "pyspark", "tqdm")
ENGINE = ("kafkatier.storage.log", "kafkatier.storage.cleaner", "kafkatier.storage.record")
"""The log engine: what a command runs on, not what its parser needs."""
HEAVY = (*LIBRARIES, "kafkatier.cli.produce", "kafkatier.serve.server", "kafkatier.tiering.config")


def _help(*argv: str) -> tuple[str, list[str]]:
    """What ``kafkatier ARGV --help`` prints, and every module the process had then loaded."""
    script = (
        "import contextlib, io, json, sys\n"
        "from kafkatier.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        f"    main({[*argv, '--help']!r})\n"
        "print(json.dumps([out.getvalue(), sorted(sys.modules)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)  # fmt: skip
    text, modules = json.loads(done.stdout)
    return text, modules


def test_help_lists_every_command_and_imports_none_of_them() -> None:
    text, modules = _help()
    for name in COMMANDS:
        assert f"    {name} " in text, text
    loaded = [m for m in modules if m.startswith(HEAVY)]
    assert loaded == [], f"kafkatier --help imported {loaded}"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_s_help_imports_none_of_what_it_runs_on(name: str) -> None:
    text, modules = _help(name)
    assert f"kafkatier {name}" in text, text
    loaded = sorted({m.split(".")[0] for m in modules if m.startswith(LIBRARIES)})
    assert loaded == [], f"kafkatier {name} --help imported {loaded}"
    engine = [m for m in modules if m.startswith(ENGINE)]
    assert engine == [], f"kafkatier {name} --help imported {engine}"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_module_registers_its_command_with_the_table_summary(name: str) -> None:
    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers(dest="command")
    importlib.import_module(f"kafkatier.cli.{COMMANDS[name][0]}").register(subparsers)
    assert list(subparsers.choices) == [name]
    helps = {action.dest: action.help for action in subparsers._choices_actions}
    assert helps[name] == summary(name)
    assert json.dumps(helps)  # plain strings


EXIT_SCRIPT = """
import atexit, sys, threading, time
atexit.register(lambda: print("atexit handler ran"))
sys.stdout.write("buffered, not yet flushed")
def late():
    time.sleep(0.2)
    print("thread finished", flush=True)
if sys.argv[1] == "thread":
    threading.Thread(target=late).start()
from kafkatier.cli.main import exit_without_teardown
exit_without_teardown(int(sys.argv[2]))
"""


@pytest.mark.parametrize(("case", "code"), [("plain", 0), ("plain", 3), ("thread", 1)])
def test_the_console_script_exits_as_python_does_less_the_teardown(case: str, code: int) -> None:
    """``kafkatier`` ends with ``os._exit`` after ``main`` (the interpreter's teardown costs a
    tenth of ``produce``): the exit code, buffered output, atexit handlers and a running
    non-daemon thread's end are what Python's own exit would give."""
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, case, str(code)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == code, done.stderr
    assert done.stdout.startswith("buffered, not yet flushed")
    assert done.stdout.endswith("atexit handler ran\n")
    assert ("thread finished" in done.stdout) == (case == "thread")
