"""A SASL listener's mechanisms and users, from Kafka's keys (per listener as
``listener.name.<name>.<key>``)::

    sasl.enabled.mechanisms            PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (required: Kafka's
                                       default, GSSAPI, is not served)
    listener.name.<name>.plain.sasl.jaas.config
        org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";
    listener.name.<name>.scram-sha-256.sasl.jaas.config   (and scram-sha-512)
        org.apache.kafka.common.security.scram.ScramLoginModule required user_bob="secret";
    sasl.scram.users.file              kafkatier's: SCRAM credentials (security/scram_users.py)
    sasl.server.max.receive.size       the largest frame before authentication [524288, Kafka's]
    connection.failed.authentication.delay.ms   [100, Kafka's]

PLAIN's users are the JAAS ``user_<name>="<password>"`` options, as Kafka's PlainLoginModule
has them. Kafka keeps SCRAM users in its metadata instead; here they come from the users file
and, as a kafkatier extension, from ``user_`` options of the ScramLoginModule entry (salted and
hashed at load). A mechanism that ends up with no user is an error: it would refuse everyone.
The ``username``/``password`` options (Kafka's inter-broker login) are accepted and unused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkatier.serve.security.exchange import SaslExchange
from kafkatier.serve.security.jaas import PLAIN_MODULE, SCRAM_MODULE, JaasError, parse_jaas
from kafkatier.serve.security.plain import PlainExchange
from kafkatier.serve.security.props import ListenerProps, Password
from kafkatier.serve.security.scram import HASHES, ScramCredential, ScramExchange
from kafkatier.serve.security.scram_users import read_users
from kafkatier.storage.errors import ConfigError

MECHANISMS = ("PLAIN", *HASHES)
MODULES = {"PLAIN": PLAIN_MODULE, **{m: SCRAM_MODULE for m in HASHES}}
USERS_FILE = "sasl.scram.users.file"
MAX_RECEIVE = 524288  # Kafka's sasl.server.max.receive.size
FAILED_DELAY_MS = 100  # Kafka's connection.failed.authentication.delay.ms


@dataclass(frozen=True)
class SaslSettings:
    mechanisms: tuple[str, ...]
    plain: Mapping[str, Password] = field(repr=False)
    scram: Mapping[str, Mapping[str, ScramCredential]] = field(repr=False)
    max_receive_bytes: int = MAX_RECEIVE
    failed_delay_ms: int = FAILED_DELAY_MS

    def exchange(self, mechanism: str) -> SaslExchange:
        """A new server side of ``mechanism`` (one of :attr:`mechanisms`)."""
        if mechanism == "PLAIN":
            return PlainExchange(self.plain)
        return ScramExchange(mechanism, self.scram[mechanism])


def sasl_settings(props: ListenerProps) -> SaslSettings:
    mechanisms = _mechanisms(props)
    plain: dict[str, Password] = {}
    scram: dict[str, dict[str, ScramCredential]] = {m: {} for m in HASHES}
    file = props.get(USERS_FILE)
    if file:
        scram = read_users(Path(file), props.key(USERS_FILE))
    for mechanism in mechanisms:
        users = _jaas_users(props, mechanism)
        if mechanism == "PLAIN":
            plain = users
        else:
            for user, password in users.items():
                scram[mechanism].setdefault(user, ScramCredential.derive(mechanism, password.value))
        if not (plain if mechanism == "PLAIN" else scram[mechanism]):
            raise _no_users(props, mechanism)
    return SaslSettings(mechanisms, plain, {m: scram[m] for m in mechanisms if m in HASHES},
                        _int(props, "sasl.server.max.receive.size", MAX_RECEIVE, 1),
                        _int(props, "connection.failed.authentication.delay.ms",
                             FAILED_DELAY_MS, 0))  # fmt: skip


def _mechanisms(props: ListenerProps) -> tuple[str, ...]:
    text = props.get("sasl.enabled.mechanisms")
    names = tuple(dict.fromkeys(m.strip() for m in (text or "").split(",") if m.strip()))
    if not names:
        raise props.error("sasl.enabled.mechanisms", f"required for the SASL listener "
                          f"{props.listener} (Kafka's default GSSAPI is not served): one or "
                          f"more of {', '.join(MECHANISMS)}")  # fmt: skip
    for name in names:
        if name not in MECHANISMS:
            raise props.error("sasl.enabled.mechanisms", f"SASL mechanism {name!r} is not "
                              f"served (one or more of {', '.join(MECHANISMS)})")  # fmt: skip
    return names


def jaas_key(mechanism: str) -> str:
    return f"{mechanism.lower()}.sasl.jaas.config"


def _jaas_users(props: ListenerProps, mechanism: str) -> dict[str, Password]:
    key = props.prefix + jaas_key(mechanism)
    text = props.props.get(key)
    if text is None:
        return {}
    try:
        jaas = parse_jaas(text)
    except JaasError as exc:
        raise props.error(jaas_key(mechanism), f"not Kafka's JAAS syntax: {exc}") from None
    if jaas.module != MODULES[mechanism]:
        raise props.error(jaas_key(mechanism), f"the login module of {mechanism} is "
                          f"{MODULES[mechanism]}, not {jaas.module}")  # fmt: skip
    return jaas.users()


def _no_users(props: ListenerProps, mechanism: str) -> ConfigError:
    jaas = props.prefix + jaas_key(mechanism)
    where = f"user_<name>=\"<password>\" options in {jaas}"
    if mechanism != "PLAIN":
        where += f" or a {USERS_FILE}"
    key = jaas if mechanism == "PLAIN" or props.get(USERS_FILE) is None else props.key(USERS_FILE)
    return ConfigError(f"no {mechanism} user on listener {props.listener}: give {where}",
                       setting=key, source=props.where(key))


def _int(props: ListenerProps, name: str, default: int, low: int) -> int:
    text = props.get(name, str(default)) or ""
    if not text.isdigit() or int(text) < low:
        raise props.error(name, f"not an integer >= {low}", value=text)
    return int(text)
