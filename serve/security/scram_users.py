"""The SCRAM users file (``sasl.scram.users.file``, kafkatier's key): where Kafka keeps SCRAM
credentials in KRaft/ZooKeeper metadata, this server reads them from a Java properties file,
one user a line, the value in ``kafka-configs --add-config``'s syntax::

    alice=SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]
    bob=SCRAM-SHA-512=[salt=...,stored_key=...,server_key=...,iterations=4096]

``password=`` is salted and hashed at load (a random salt, ``iterations`` [4096]); the second
form is Kafka's stored credential (base64 fields, ScramCredentialUtils' format), which keeps
the password itself out of the file: ``python -m kafkatier.serve.security.scram_users USER
[ITERATIONS]`` prints such a line for both mechanisms from a password read on stdin. Errors name
the file, the line and the user, never a value.
"""

from __future__ import annotations

import base64
import binascii
import getpass
import re
import sys
from collections.abc import Callable
from pathlib import Path

from kafkatier.serve.security.scram import (
    HASHES,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
)
from kafkatier.storage.errors import ConfigError, KafkaTierError
from kafkatier.storage.java_properties import read_properties_located

Users = dict[str, dict[str, ScramCredential]]
"""Mechanism -> user -> credential."""
_ENTRY = re.compile(r"\s*(?P<mech>[A-Z0-9-]+)=\[(?P<attrs>[^\]]*)\]\s*(?:,|$)")
_STORED = ("salt", "stored_key", "server_key", "iterations")


def read_users(path: Path, setting: str) -> Users:
    """Every user's credentials in ``path``; ``setting`` names the key that named the file."""
    try:
        located = read_properties_located(path)
    except OSError as exc:
        raise ConfigError(f"cannot read the SCRAM users file {path}: {exc.strerror}",
                          setting=setting) from None  # fmt: skip
    except KafkaTierError as exc:
        raise ConfigError(f"the SCRAM users file {path} does not parse: {exc.message}",
                          setting=setting) from None  # fmt: skip
    users: Users = {mechanism: {} for mechanism in HASHES}
    for user, entry in located.items():
        where = f"{path}:{entry.line}"
        for mechanism, credential in _entries(entry.value, user, where, setting):
            users[mechanism][user] = credential
    return users


def _entries(text: str, user: str, where: str, setting: str
             ) -> list[tuple[str, ScramCredential]]:  # fmt: skip
    def fail(message: str) -> ConfigError:
        return ConfigError(f"{where}: user {user!r}: {message}", setting=setting)

    found, pos = [], 0
    while pos < len(text.rstrip()):
        match = _ENTRY.match(text, pos)
        if match is None:
            raise fail("expected SCRAM-SHA-256=[...] or SCRAM-SHA-512=[...], comma-separated")
        if match["mech"] not in HASHES:
            raise fail(f"unknown mechanism {match['mech']!r} (SCRAM-SHA-256, SCRAM-SHA-512)")
        found.append((match["mech"], _credential(match["mech"], match["attrs"], fail)))
        pos = match.end()
    if not found:
        raise fail("no credential")
    return found


def _credential(mechanism: str, attrs_text: str, fail: Callable[[str], ConfigError]
                ) -> ScramCredential:  # fmt: skip
    attrs = dict(part.partition("=")[::2] for part in attrs_text.split(",") if part.strip())
    attrs = {k.strip(): v.strip() for k, v in attrs.items()}
    iterations_text = attrs.get("iterations", str(MIN_ITERATIONS))
    low, high = MIN_ITERATIONS, MAX_ITERATIONS
    if not iterations_text.isdigit() or not low <= int(iterations_text) <= high:
        raise fail(f"{mechanism}: iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    iterations = int(iterations_text)
    if set(attrs) <= {"password", "iterations"} and attrs.get("password"):
        return ScramCredential.derive(mechanism, attrs["password"], iterations)
    if set(attrs) == set(_STORED):
        try:
            salt, stored, server = (base64.b64decode(attrs[k], validate=True) for k in _STORED[:3])
        except (binascii.Error, ValueError):
            raise fail(f"{mechanism}: salt, stored_key and server_key must be base64") from None
        return ScramCredential(salt, stored, server, iterations)
    raise fail(f"{mechanism}: expected [iterations=N,]password=P or salt=,stored_key=,"
               "server_key=,iterations= (Kafka's stored form)")


def main(argv: list[str]) -> int:
    """``USER [ITERATIONS]``: a users-file line in Kafka's stored form, from a password read on
    stdin (or the terminal, not echoed)."""
    if not 1 <= len(argv) <= 2 or (len(argv) == 2 and not argv[1].isdigit()):
        print("usage: python -m kafkatier.serve.security.scram_users USER [ITERATIONS]",
              file=sys.stderr)  # fmt: skip
        return 2
    iterations = int(argv[1]) if len(argv) == 2 else MIN_ITERATIONS
    password = getpass.getpass() if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    entries = (f"{m}=[{ScramCredential.derive(m, password, iterations).to_kafka()}]"
               for m in HASHES)  # fmt: skip
    print(f"{argv[0]}={','.join(entries)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
