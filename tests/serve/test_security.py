"""TLS and SASL listeners with unmodified clients (confluent-kafka/librdkafka, kafka-python,
aiokafka, kcat, Apache Kafka's Java client) over real sockets: one server, four listeners (SSL;
MTLS, an SSL listener that requires a client certificate; SASL_PLAINTEXT with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512; SASL_SSL), certificates from a throwaway CA (tls_certs.py).
Every client reads what the segment files hold; a client without the certificate, or with a
wrong password, is refused; the server's log names the refused user but never holds a password
(checked after every test)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_clients import (
    JAVA_MISSING,
    KCAT,
    ClientAuth,
    aiokafka_rows,
    confluent_rows,
    java_consume,
    java_rows,
    kafka_python_rows,
    kcat_rows,
    raw_socket,
)
from test_connection import closed, read_frame, recv_exactly, request
from test_datasource import kafka_python_rows as disk_rows
from tls_certs import KEY_PASSWORD, Certs, make_certs

from kafkatier.cli.main import main as kafkatier
from kafkatier.serve.config import ServeConfig
from kafkatier.serve.security.scram import ScramCredential
from kafkatier.serve.thread import ServeThread

TOPICS = {"secure": 2}
PASSWORDS = {"alice": "alice-pw-7731", "bob": "bob-pw-2208", "carol": "carol-pw-9154"}
WRONG = "wrong-pw-5120"
Consume = Callable[..., list[Any]]
CLIENTS: dict[str, Consume] = {"confluent-kafka": confluent_rows,
                               "kafka-python": kafka_python_rows, "aiokafka": aiokafka_rows,
                               "kcat": kcat_rows, "java": java_rows}  # fmt: skip
BOB_512 = ScramCredential.derive("SCRAM-SHA-512", PASSWORDS["bob"], 8192).to_kafka()
SCRAM_USERS = (  # bob: Kafka's stored form (no password in the file); carol: password= form
    f"bob=SCRAM-SHA-512=[{BOB_512}]"
    f",SCRAM-SHA-256=[{ScramCredential.derive('SCRAM-SHA-256', PASSWORDS['bob']).to_kafka()}]\n"
    f"carol=SCRAM-SHA-256=[iterations=4096,password={PASSWORDS['carol']}]\n"
)
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              'username="admin" password="unused" user_alice="{alice}";')  # fmt: skip


def _client(name: str) -> Consume:
    if name == "kcat" and KCAT is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    if name == "java" and JAVA_MISSING:
        pytest.skip(JAVA_MISSING)
    return CLIENTS[name]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("secure")
    source = folder / "records.jsonl"
    source.write_text("".join(json.dumps({"key": f"k{i}", "value": f"v{i}"}) + "\n"
                              for i in range(40)))  # fmt: skip
    assert kafkatier(["produce", str(folder / "logs"), "--topic", "secure", "--input",
                      str(source), "--partitions", "2"]) == 0  # fmt: skip
    return folder / "logs"


def settings(log_dir: Path, certs: Certs, users: Path) -> dict[str, str]:
    return {
        "log.dirs": str(log_dir),
        "listeners": ",".join(f"{n}://127.0.0.1:0" for n in
                              ("SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")),
        "listener.security.protocol.map":
            "SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_encrypted),
        "ssl.key.password": KEY_PASSWORD, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS.format(**PASSWORDS),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.scram.users.file": str(users),
    }  # fmt: skip


@pytest.fixture(scope="module")
def ports(log_dir: Path, certs: Certs) -> Iterator[dict[str, int]]:
    users = certs.ca.parent / "scram-users.properties"
    users.write_text(SCRAM_USERS)
    thread = ServeThread(ServeConfig.from_properties(settings(log_dir, certs, users),
                                                     source="test"))  # fmt: skip
    thread.start(timeout=10)
    try:
        yield thread.server.bound
    finally:
        thread.stop(timeout=10)


@pytest.fixture(autouse=True)
def no_password_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger="kafkatier.serve")
    yield
    text = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records
                     if r.name.startswith("kafkatier"))  # fmt: skip
    for secret in (*PASSWORDS.values(), WRONG, KEY_PASSWORD):
        assert secret not in text


@pytest.mark.parametrize("client", CLIENTS)
def test_ssl(client: str, ports: dict[str, int], certs: Certs, log_dir: Path) -> None:
    consume = _client(client)
    auth = ClientAuth("SSL", ca=certs.ca)
    assert consume(ports["SSL"], TOPICS, False, auth) == disk_rows(log_dir, "secure")


@pytest.mark.parametrize("client", CLIENTS)
def test_ssl_with_a_required_client_certificate(client: str, ports: dict[str, int],
                                                certs: Certs, log_dir: Path) -> None:  # fmt: skip
    consume = _client(client)
    auth = ClientAuth("SSL", ca=certs.ca, cert=certs.client_cert, key=certs.client_key)
    assert consume(ports["MTLS"], TOPICS, False, auth) == disk_rows(log_dir, "secure")


@pytest.mark.parametrize("cert", ["none", "stranger"])
def test_a_client_without_a_trusted_certificate_is_refused(
    cert: str, ports: dict[str, int], certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    context = ssl.create_default_context(cafile=certs.ca)
    if cert == "stranger":
        context.load_cert_chain(certs.stranger_cert, certs.stranger_key)
    with raw_socket(ports["MTLS"]) as sock:
        try:
            with context.wrap_socket(sock, server_hostname="localhost") as tls:
                tls.sendall(request(18, 0, 1))  # TLS 1.3: the refusal comes after the handshake
                assert closed(tls)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            pass  # refused during the handshake
    deadline = time.monotonic() + 5  # the server's thread may log just after the client saw it
    while "on listener MTLS failed" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "TLS with 127.0.0.1:" in caplog.text and "on listener MTLS failed" in caplog.text


def test_librdkafka_without_a_client_certificate_is_refused(
    ports: dict[str, int], certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    from confluent_kafka import Consumer, KafkaException

    errors: list[Any] = []
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{ports['MTLS']}", "group.id": "g",
                         "error_cb": errors.append,
                         **ClientAuth("SSL", ca=certs.ca).librdkafka()})  # fmt: skip
    try:
        with pytest.raises(KafkaException):
            consumer.list_topics(timeout=5)
    finally:
        consumer.close()
    assert errors  # librdkafka says "brokers are down"; the server says why
    assert "on listener MTLS failed: PEER_DID_NOT_RETURN_A_CERTIFICATE" in caplog.text


SASL_CASES = [("SASL_PLAINTEXT", "PLAIN", "alice"),
              ("SASL_PLAINTEXT", "SCRAM-SHA-256", "carol"),
              ("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob"), ("SASL_SSL", "SCRAM-SHA-512", "bob")]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(("listener", "mechanism", "user"), SASL_CASES)
def test_sasl(client: str, listener: str, mechanism: str, user: str, ports: dict[str, int],
              certs: Certs, log_dir: Path) -> None:  # fmt: skip
    consume = _client(client)
    auth = ClientAuth(listener, ca=certs.ca, mechanism=mechanism, user=user,
                      password=PASSWORDS[user])  # fmt: skip
    assert consume(ports[listener], TOPICS, False, auth) == disk_rows(log_dir, "secure")


def _refused_confluent(port: int, auth: ClientAuth) -> str:
    from confluent_kafka import Consumer, KafkaException

    errors: list[Any] = []
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g",
                         "error_cb": errors.append, **auth.librdkafka()})  # fmt: skip
    try:
        with pytest.raises(KafkaException):
            consumer.list_topics(timeout=2)
    finally:
        consumer.close()
    return " ".join(e.str() for e in errors)


@contextlib.contextmanager
def client_log(name: str) -> Iterator[list[logging.LogRecord]]:
    """What the client library logs (kafka-python and aiokafka raise a bootstrap failure and
    log the authentication error they met on the way)."""
    seen: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = seen.append  # type: ignore[method-assign]
    logging.getLogger(name).addHandler(handler)
    try:
        yield seen
    finally:
        logging.getLogger(name).removeHandler(handler)


def _refused_kafka_python(port: int, auth: ClientAuth) -> str:
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    with client_log("kafka") as seen, pytest.raises(KafkaError):
        KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", bootstrap_timeout_ms=2000,
                      reconnect_backoff_max_ms=300, **auth.kafka_python())  # fmt: skip
    return " ".join(r.getMessage() for r in seen)


def _refused_aiokafka(port: int, auth: ClientAuth) -> str:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import KafkaError

    async def attempt() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", **auth.aiokafka())
        try:
            with pytest.raises(KafkaError):
                await consumer.start()
        finally:
            await consumer.stop()

    with client_log("aiokafka") as seen:
        asyncio.run(attempt())
    return " ".join(r.getMessage() for r in seen)


def _refused_java(port: int, auth: ClientAuth) -> str:
    if JAVA_MISSING:
        pytest.skip(JAVA_MISSING)
    out = java_consume(port, TOPICS, False, auth)
    assert out.returncode != 0
    return out.stderr  # the SaslAuthenticationException the consumer raised, with its message


REFUSED = {"confluent-kafka": _refused_confluent, "kafka-python": _refused_kafka_python,
           "aiokafka": _refused_aiokafka, "java": _refused_java}  # fmt: skip


@pytest.mark.parametrize("client", REFUSED)
@pytest.mark.parametrize(("listener", "mechanism", "user"), SASL_CASES[:3])
def test_a_wrong_password_is_refused(client: str, listener: str, mechanism: str, user: str,
                                     ports: dict[str, int], certs: Certs,
                                     caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    auth = ClientAuth(listener, ca=certs.ca, mechanism=mechanism, user=user, password=WRONG)
    said = REFUSED[client](ports[listener], auth)
    assert "uthentication" in said, said  # the client saw an authentication error
    expected = ("Invalid username or password" if mechanism == "PLAIN" else
                f"invalid credentials with SASL mechanism {mechanism}")  # fmt: skip
    assert expected in said, said
    failed = [r.getMessage() for r in caplog.records if "authentication failed" in r.getMessage()]
    assert failed and f"user {user!r}, {mechanism}" in failed[0] and listener in failed[0]


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def _handshake_v0(sock: socket.socket, mechanism: str) -> int:
    """SaslHandshake v0 by hand (independent of kio): its error code."""
    sock.sendall(request(17, 0, 7, _string(mechanism)))
    correlation, error = struct.unpack_from(">ih", read_frame(sock))
    assert correlation == 7
    return int(error)


def test_a_v0_handshake_then_raw_tokens(ports: dict[str, int]) -> None:
    """Clients before KIP-152: SaslHandshake v0, then the PLAIN token as a raw frame; the server
    answers with an empty raw frame and then serves requests."""
    with raw_socket(ports["SASL_PLAINTEXT"]) as sock:
        assert _handshake_v0(sock, "PLAIN") == 0
        token = f"\0alice\0{PASSWORDS['alice']}".encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert recv_exactly(sock, 4) == b"\0\0\0\0"
        sock.sendall(request(3, 0, 8, struct.pack(">i", 0)))  # Metadata v0, every topic
        assert b"secure" in read_frame(sock)
    with raw_socket(ports["SASL_PLAINTEXT"]) as sock:  # a wrong password: closed, no answer
        assert _handshake_v0(sock, "PLAIN") == 0
        token = f"\0alice\0{WRONG}".encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert closed(sock)


def test_requests_before_authentication_close_the_connection(
    ports: dict[str, int], caplog: pytest.LogCaptureFixture
) -> None:
    with raw_socket(ports["SASL_PLAINTEXT"]) as sock:
        sock.sendall(request(3, 0, 1, struct.pack(">i", 0)))  # Metadata first
        assert closed(sock)
    assert "api key 3 version 0 before SASL authentication" in caplog.text
    with raw_socket(ports["SASL_PLAINTEXT"]) as sock:  # a mechanism not enabled: refused
        assert _handshake_v0(sock, "GSSAPI") == 33  # UNSUPPORTED_SASL_MECHANISM
        assert closed(sock)
    with raw_socket(ports["SASL_SSL"]) as sock:  # TLS first: plaintext bytes are refused
        sock.sendall(request(18, 0, 1))
        assert closed(sock)


@pytest.mark.parametrize(("password", "message"), [
    (None, "the private key is encrypted: set ssl.key.password"),
    (WRONG, "the private key is encrypted and ssl.key.password is wrong"),
])  # fmt: skip
def test_an_encrypted_key_without_its_password_is_one_line_exit_2(
    password: str | None, message: str, certs: Certs, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "serve.properties"
    lines = [f"log.dirs={tmp_path}", "listeners=SSL://127.0.0.1:0",
             f"ssl.keystore.location={certs.server_encrypted}"]  # fmt: skip
    config.write_text("\n".join(lines + ([f"ssl.key.password={password}"] if password else [])))
    assert kafkatier(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(certs.server_encrypted) in err, err
    assert WRONG not in err


def test_inline_pem_keystore_and_truststore(certs: Certs, log_dir: Path) -> None:
    """ssl.keystore.key / ssl.keystore.certificate.chain / ssl.truststore.certificates inline,
    folded onto one line as a properties file's backslash continuations leave them."""
    def folded(path: Path) -> str:
        return " ".join(path.read_text().split())

    props = {"log.dirs": str(log_dir), "listeners": "SSL://127.0.0.1:0",
             "ssl.keystore.key": folded(certs.server_key),
             "ssl.keystore.certificate.chain": folded(certs.server_cert),
             "ssl.truststore.certificates": folded(certs.ca), "ssl.client.auth": "required"}
    thread = ServeThread(ServeConfig.from_properties(props, source="test"))
    thread.start(timeout=10)
    try:
        auth = ClientAuth("SSL", ca=certs.ca, cert=certs.client_cert, key=certs.client_key)
        rows = confluent_rows(thread.server.bound["SSL"], TOPICS, False, auth)
        assert rows == disk_rows(log_dir, "secure")
    finally:
        thread.stop(timeout=10)


def test_a_huge_user_name_is_logged_cut(
    ports: dict[str, int], caplog: pytest.LogCaptureFixture
) -> None:
    """An unauthenticated client's 300,000-character PLAIN user name was logged whole on every
    attempt; the line keeps its start and says how long it was."""
    caplog.set_level(logging.WARNING, logger="kafkatier.serve")
    user = "a" * 300_000
    with raw_socket(ports["SASL_PLAINTEXT"]) as sock:
        assert _handshake_v0(sock, "PLAIN") == 0
        token = b"\0" + user.encode() + b"\0x"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert closed(sock)
    failed = [r.getMessage() for r in caplog.records if "authentication failed" in r.getMessage()]
    assert failed and "(300000 characters)" in failed[-1] and len(failed[-1]) < 500, failed
