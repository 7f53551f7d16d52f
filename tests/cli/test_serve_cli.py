"""``kafkatier serve`` as a user runs it: a bad configuration is one line and exit 2; a running
server answers a real client (kcat, else kafka-python) and stops cleanly on SIGTERM and SIGINT."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkatier.cli.main import main

KAFKATIER = Path(sys.executable).with_name("kafkatier")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["listeners=SSL://127.0.0.1:9093"], "a TLS listener needs its certificate"),
        (["listeners=PLAINTEXT://0.0.0.0:9092"], "required for PLAINTEXT (it binds every"),
        (["listeners=PLAINTEXT://nohost"], "not a listener NAME://host:port"),
        (["socket.request.max.bytes=ten"], "not an integer >= 1024"),
        (["offsets.topic.num.partitions=0"], "not an integer >= 1"),
        (["group.initial.rebalance.delay.ms=-1"], "not an integer >= 0"),
        (["no.such.key=1"], "unknown setting 'no.such.key'"),
        (["listeners=SSL://127.0.0.1:0", "ssl.keystore.location=/no/such.pem"],
         "cannot read /no/such.pem: No such file or directory (setting=ssl.keystore.location"),
        (["listeners=SSL://127.0.0.1:0", "ssl.keystore.type=JKS"],
         "JKS keystores are not supported, only PEM"),
        (["listeners=SASL_PLAINTEXT://127.0.0.1:0"], "required for the SASL listener"),
        (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=GSSAPI"],
         "SASL mechanism 'GSSAPI' is not served"),
        (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN"],
         "no PLAIN user on listener SASL_PLAINTEXT"),
        (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=SCRAM-SHA-256"],
         "or a sasl.scram.users.file"),
        (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN",
          'listener.name.sasl_plaintext.plain.sasl.jaas.config=x required user_a="pw-31337"'],
         "not Kafka's JAAS syntax"),
        (["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN",
          'listener.name.sasl_plaintext.plain.sasl.jaas.config=Foo required user_a="pw-31337";'],
         "the login module of PLAIN is org.apache.kafka.common.security.plain.PlainLoginModule"),
        (['sasl.jaas.config=x required password="pw-31337";'],
         "a broker takes it per listener and mechanism"),
        (["listener.name.other.ssl.client.auth=required"], "no listener 'other' in listeners"),
        (["listeners=FOO://127.0.0.1:0"], "no security protocol for listener FOO"),
        (["listeners=PLAINTEXT://no.such.host.invalid:0"], "the host does not resolve"),
        (["listeners=PLAINTEXT://192.0.2.1:0"], "the host is no address of this machine"),
    ],
)
def test_a_bad_config_is_one_line_and_exit_2(
    tmp_path: Path, lines: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "serve.properties"
    config.write_text("\n".join([f"log.dirs={tmp_path}", *lines]) + "\n")
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert err.startswith("kafkatier serve: error: ") and str(config) in err
    assert "pw-31337" not in err  # a password is never echoed


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_a_client_then_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "logs" / "t-0").mkdir(parents=True)
    port = free_port()
    config = tmp_path / "serve.properties"
    config.write_text(f"log.dirs={tmp_path / 'logs'}\n"
                      f"listeners=PLAINTEXT://127.0.0.1:{port}\n")  # fmt: skip
    proc = subprocess.Popen([str(KAFKATIER), "serve", "--config", str(config)],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_listening(proc, port)
        assert topics(port) == {"t"}
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and err.rstrip().endswith("stopped"), err


def wait_listening(proc: subprocess.Popen[str], port: int) -> None:
    """Until the server ``proc`` accepts connections on ``port``."""
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "never listened"
            time.sleep(0.1)


def topics(port: int) -> set[str]:
    """The topics a real client lists: kcat -L (its 'topic "NAME" with ...' lines), else
    kafka-python's metadata."""
    kcat = shutil.which("kcat")
    if kcat:
        done = subprocess.run([kcat, "-b", f"127.0.0.1:{port}", "-L"], capture_output=True,
                              text=True, timeout=30, check=True)  # fmt: skip
        return set(re.findall(r'^\s*topic "([^"]+)"', done.stdout, re.MULTILINE))
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}")
    try:
        return set(consumer.topics())
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("setting", "says"),
    [("log.dirs", "is not a directory"), ("offsets.log.dir", "is not a directory")],
)
def test_an_unusable_directory_is_refused_before_listening(
    tmp_path: Path, setting: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log dir that cannot be read, an offsets.log.dir that is a file: one line naming the
    setting, exit 2 (the server listened and then closed every client, or failed every
    commit)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    dirs = {"log.dirs": str(tmp_path), "offsets.log.dir": str(tmp_path / "offsets"),
            setting: str(a_file), "listeners": "PLAINTEXT://127.0.0.1:0"}  # fmt: skip
    config = tmp_path / "serve.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in dirs.items()))
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and f"setting={setting}" in err, err
