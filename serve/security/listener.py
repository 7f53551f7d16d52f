"""Each listener's security: Kafka's ``listener.security.protocol.map`` gives its protocol
(default: the name is the protocol, PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), then SSL and
SASL_SSL get a TLS context (``tls``), SASL_PLAINTEXT and SASL_SSL their mechanisms and users
(``sasl``). Every security key is checked here, ``listener.name.<name>.<key>`` included: the
listener must exist (lower-case name, as Kafka's ``ListenerName.configPrefix``) and the key be
one this server reads.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafkatier.serve.security.props import LISTENER_PREFIX, ListenerProps
from kafkatier.serve.security.sasl import (
    MECHANISMS,
    USERS_FILE,
    SaslSettings,
    jaas_key,
    sasl_settings,
)
from kafkatier.serve.security.tls import tls_context
from kafkatier.storage.errors import ConfigError
from kafkatier.tiering.config import SERVE_SECURITY_PREFIXES

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MAP_KEY = "listener.security.protocol.map"
SSL_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites",
})  # fmt: skip
SASL_KEYS = frozenset({"sasl.enabled.mechanisms", USERS_FILE, "sasl.server.max.receive.size",
                       "connection.failed.authentication.delay.ms"})  # fmt: skip
_JAAS = re.compile(r"(?P<mech>[a-z0-9-]+)\.sasl\.jaas\.config")


@dataclass(frozen=True)
class ListenerSecurity:
    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    sasl: SaslSettings | None = None


def listener_security(props: Mapping[str, str], names: tuple[str, ...],
                      where: Callable[[str], str]) -> dict[str, ListenerSecurity]:  # fmt: skip
    """Listener name -> its security; ConfigError (naming key and file) for any fault."""
    _check_keys(props, names, where)
    protocols = protocol_map(props, where)
    found = {}
    for name in names:
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(f"no security protocol for listener {name}: add {name}:<protocol> "
                              f"to {MAP_KEY}", setting="listeners",
                              source=where("listeners"))  # fmt: skip
        listener = ListenerProps(props, name, where)
        tls = tls_context(listener, protocol == "SASL_SSL") if protocol.endswith("SSL") else None
        sasl = sasl_settings(listener) if protocol.startswith("SASL_") else None
        found[name] = ListenerSecurity(protocol, tls, sasl)
    return found


def protocol_map(props: Mapping[str, str], where: Callable[[str], str]) -> dict[str, str]:
    """``NAME:PROTOCOL,...``, or Kafka's default (every protocol maps to itself)."""
    text = props.get(MAP_KEY)
    if text is None:
        return {p: p for p in PROTOCOLS}
    found = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, colon, protocol = item.partition(":")
        if not colon or protocol.strip().upper() not in PROTOCOLS or not name.strip():
            raise ConfigError(f"not NAME:PROTOCOL with a protocol of {', '.join(PROTOCOLS)}: "
                              f"{item!r}", setting=MAP_KEY, source=where(MAP_KEY))  # fmt: skip
        found[name.strip().upper()] = protocol.strip().upper()
    return found


def _check_keys(props: Mapping[str, str], names: tuple[str, ...],
                where: Callable[[str], str]) -> None:  # fmt: skip
    lower = {name.lower() for name in names}
    for key in props:
        if not key.startswith(SERVE_SECURITY_PREFIXES) or key == MAP_KEY:
            continue
        setting = key
        if key.startswith(LISTENER_PREFIX):
            listener, _dot, setting = key[len(LISTENER_PREFIX) :].partition(".")
            if listener not in lower:
                raise ConfigError(f"no listener {listener!r} in listeners (the name is lower "
                                  "case here, as in Kafka)", setting=key,
                                  source=where(key))  # fmt: skip
            jaas = _JAAS.fullmatch(setting)
            if jaas and jaas["mech"].upper() not in MECHANISMS:
                raise ConfigError(f"SASL mechanism {jaas['mech'].upper()!r} is not served (one "
                                  f"or more of {', '.join(MECHANISMS)})", setting=key,
                                  source=where(key))  # fmt: skip
            if jaas:
                continue
        if setting not in SSL_KEYS | SASL_KEYS:
            raise ConfigError(f"unknown setting {key!r}{hint(setting)}", setting=key,
                              source=where(key))  # fmt: skip


def hint(key: str) -> str:
    """Where a JAAS setting goes on a broker, for a key that misplaces it."""
    if key.endswith("sasl.jaas.config"):
        return (f"; a broker takes it per listener and mechanism: {LISTENER_PREFIX}<listener>."
                f"{jaas_key('<mechanism>')}")  # fmt: skip
    return ""
