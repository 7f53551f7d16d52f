"""The commands' progress bars (cli/progress.py): on a terminal's stderr ``kafkatier produce``
shows its bar of records; piped, nothing is printed there and tqdm is never imported."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCRIPT = (
    "import sys\n"
    "from kafkatier.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print('tqdm imported:', 'tqdm' in sys.modules)\n"
    "sys.exit(code)\n"
)


def _produce(tmp_path: Path, topic: str, stderr: int) -> subprocess.CompletedProcess:
    source = tmp_path / "in.parquet"
    if not source.exists():
        pq.write_table(pa.table({"value": [b"v%d" % i for i in range(5000)]}), source)
    argv = ["produce", str(tmp_path / "logs"), "--topic", topic, "--input", str(source)]
    return subprocess.run([sys.executable, "-c", SCRIPT, *argv], stdout=subprocess.PIPE,
                          stderr=stderr, text=True, timeout=120)  # fmt: skip


def test_a_terminal_gets_the_bar(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    try:
        done = _produce(tmp_path, "t", slave)
        os.close(slave)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end is closed: all is read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    assert done.returncode == 0
    assert "tqdm imported: True" in done.stdout
    assert b"records: " in shown and b"5000" in shown, shown[-500:]


def test_a_pipe_gets_nothing(tmp_path: Path) -> None:
    done = _produce(tmp_path, "u", subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "tqdm imported: False" in done.stdout
    assert "produced 5000 records to u" in done.stdout
