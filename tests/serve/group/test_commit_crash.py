"""An acknowledged commit survives a SIGKILL of the server: ``kafkatier serve`` runs as a
process, a confluent-kafka member commits (synchronously: the answer comes after the fsync),
the server is killed at once (no clean shutdown: the offsets log dir is recovered on the next
start), and a second server on the same dirs answers OffsetFetch with the last commit. (A
process kill leaves the page cache: this proves the recovery, not the fsync, which only a
machine crash would test.)"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from group_clients import PARTITIONS, TOPIC, ConfluentMember, poll_until, write_topic
from test_serve_cli import KAFKATIER, free_port, wait_listening


def start(config: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([str(KAFKATIER), "serve", "--config", str(config)],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    wait_listening(proc, port)
    return proc


def test_an_acknowledged_commit_survives_sigkill(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    logs = tmp_path / "logs"
    write_topic(logs)
    port = free_port()
    config = tmp_path / "serve.properties"
    config.write_text(f"log.dirs={logs}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                      "group.initial.rebalance.delay.ms=0\n")  # fmt: skip
    proc = start(config, port)
    try:
        member = ConfluentMember(port, "crash", [TOPIC])
        try:
            poll_until([member], lambda rows: len(rows[0]) >= 50, "records", most=10)
            for n in range(3):  # explicit offsets, each commit answered after its fsync
                member.consumer.commit(offsets=[
                    TopicPartition(TOPIC, p, 10 * n + p + 1) for p in range(PARTITIONS)
                ], asynchronous=False)  # fmt: skip
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            proc = start(config, port)  # the same dirs, recovered after the kill
        finally:
            member.close()  # its LeaveGroup goes to the new server (an unknown member there)
        check = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "crash"})
        try:
            found = check.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                    timeout=10)  # fmt: skip
        finally:
            check.close()
        assert [(tp.partition, tp.offset) for tp in found] == [
            (p, 20 + p + 1) for p in range(PARTITIONS)
        ]
    finally:
        proc.kill()
        proc.wait(10)
