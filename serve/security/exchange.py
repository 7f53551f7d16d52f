"""The server side of one SASL exchange (``javax.security.sasl.SaslServer`` in Kafka): tokens in,
challenges out, until complete or failed."""

from __future__ import annotations

from typing import Protocol


class AuthenticationFailed(Exception):
    """The client is refused. ``reply`` is Kafka's message for the client; ``reason`` is for the
    server's log line; ``user`` is the name the client gave (or None). None of them holds a
    password or any other credential material."""

    def __init__(self, reply: str, reason: str, user: str | None = None) -> None:
        super().__init__(reason)
        self.reply = reply
        self.reason = reason
        self.user = user


class SaslExchange(Protocol):
    mechanism: str

    def step(self, token: bytes) -> bytes:
        """The challenge answering ``token``; raises :class:`AuthenticationFailed`."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def user(self) -> str | None:
        """The authenticated user once complete (before: the name given, if any)."""
        ...


def other_authzid(user: str) -> AuthenticationFailed:
    """An authorization id other than the user name: refused, as Kafka refuses it (PLAIN and
    SCRAM alike)."""
    return AuthenticationFailed("Authentication failed: Client requested an authorization id "
                                "that is different from username",
                                "an authorization id other than the user", user)  # fmt: skip


def invalid_credentials(mechanism: str) -> str:
    """Kafka's reply to a SaslException (a malformed or wrong SCRAM message, a PLAIN message
    without three parts): SaslServerAuthenticator's wording."""
    return ("Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {mechanism}")  # fmt: skip
