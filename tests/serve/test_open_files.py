"""The server past the process's open-file limit. A Fetch of more partitions than it may open
files: each partition with records holds its ``.log`` open until the response is written
(``sendfile``), so past half the descriptor budget a response takes no more partitions'
records, as past ``fetch.max.bytes``, and the client fetches the rest next. Before, a Fetch of
2,048 partitions under ``ulimit -n`` 1,024 answered the partitions past the limit with
KAFKA_STORAGE_ERROR (EMFILE), a warning each. Here 300 partitions under 128, in a process of
its own, read whole by kafka-python's consumer with no warning logged. And a flood of
connections past the limit: one warning, and the server serves once they go."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

LIMIT = 128
PARTITIONS = 300
RECORDS = 20  # a partition

READER = """
import logging, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))
from pathlib import Path
from kafka import KafkaConsumer, TopicPartition
from serve_server import serving
from kafkatier.serve.apis.fetch import MOST_OPEN_SPANS
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

warnings = []
handler = logging.Handler(logging.WARNING)
handler.emit = lambda record: warnings.append(record.getMessage())
logging.getLogger("kafkatier.serve").addHandler(handler)
root, count = Path(sys.argv[1]), {count}
with LogDirectory(root) as logs:
    logs.create_partitions("t", count)
    for log in logs:
        records = [Record(i, 1_700_000_000_000 + i, b"k", b"%d" % i) for i in range({records})]
        log.append(bytearray(build_batch(records)))
with serving(root) as port:
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{{port}}", enable_auto_commit=False,
                             consumer_timeout_ms=20000)
    wanted = [TopicPartition("t", p) for p in range(count)]
    consumer.assign(wanted)
    consumer.seek_to_beginning(*wanted)
    seen = 0
    for message in consumer:
        seen += 1
        if seen == count * {records}:
            break
    consumer.close()
print(seen, MOST_OPEN_SPANS, len(warnings))
print("\\n".join(warnings[:3]))
"""


def test_a_fetch_of_more_partitions_than_the_server_may_open_files(tmp_path: Path) -> None:
    script = READER.format(limit=LIMIT, count=PARTITIONS, records=RECORDS)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, cwd=Path(__file__).parent, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen, most, warned = (int(field) for field in done.stdout.split("\n")[0].split())
    assert most < PARTITIONS  # the bound applies: a quarter of the limit
    assert seen == PARTITIONS * RECORDS
    assert warned == 0, done.stdout


SERVER = """
import logging, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))
from pathlib import Path
from serve_server import serving
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
root = Path(sys.argv[1])
with LogDirectory(root) as logs:
    logs.create_partitions("t", 1)
    records = [Record(i, 1_700_000_000_000 + i, b"k", b"%d" % i) for i in range(10)]
    logs.get("t", 0).append(bytearray(build_batch(records)))
with serving(root) as port:
    print(port, flush=True)
    sys.stdin.readline()  # until the test is done
"""


def test_a_flood_of_connections_past_the_limit_is_one_warning(tmp_path: Path) -> None:
    """Connections past what the server may open are refused by the kernel's backlog and one
    warning line a minute names the limit (asyncio logged each attempt with its traceback:
    25,705 lines in seconds for 400 connections under ``ulimit -n 256``); once they go, a
    consumer reads as before."""
    import socket

    from kafka import KafkaConsumer, TopicPartition

    command = [sys.executable, "-c", SERVER.format(limit=64), str(tmp_path)]
    server = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        flood = []
        for _ in range(120):
            try:
                flood.append(socket.create_connection(("127.0.0.1", port), timeout=1))
            except OSError:  # the backlog is full: the kernel refuses or times out
                break
        time.sleep(1.5)
        for sock in flood:
            sock.close()
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", consumer_timeout_ms=20000,
                                 enable_auto_commit=False)  # fmt: skip
        consumer.assign([TopicPartition("t", 0)])
        consumer.seek_to_beginning()
        values = []
        for message in consumer:
            values.append(int(message.value))
            if len(values) == 10:
                break
        consumer.close()
    finally:
        _, errors = server.communicate("done\n", timeout=60)
    assert values == list(range(10))
    assert len(flood) > 64, "the flood did not reach the server's limit"
    refused = [line for line in errors.splitlines() if "cannot accept a connection" in line]
    assert len(refused) == 1, errors[-3000:]
    assert "Traceback" not in errors, errors[-3000:]
