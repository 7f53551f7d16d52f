"""SASL/PLAIN's server side (RFC 4616), as Kafka's ``PlainSaslServer``: one message,
``[authzid] NUL authcid NUL passwd`` in UTF-8, checked against the JAAS ``user_<name>``
passwords; an authorization id other than the user name is refused. Replies are Kafka's."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from kafkatier.serve.security.exchange import (
    AuthenticationFailed,
    invalid_credentials,
    other_authzid,
)
from kafkatier.serve.security.props import Password

MECHANISM = "PLAIN"
INVALID = "Authentication failed: Invalid username or password"


class PlainExchange:
    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, Password]) -> None:
        self._users = users
        self.complete = False
        self.user: str | None = None

    def step(self, token: bytes) -> bytes:
        try:
            parts = token.decode("utf-8").split("\0")
        except UnicodeDecodeError:
            parts = []
        if len(parts) != 3:
            raise AuthenticationFailed(invalid_credentials(MECHANISM),
                                       f"a PLAIN message of {len(parts)} parts, not 3")  # fmt: skip
        authzid, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified",
                                       "no user name")  # fmt: skip
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified",
                                       "no password", user)  # fmt: skip
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.value.encode(), password.encode()):
            reason = "unknown user" if expected is None else "wrong password"
            raise AuthenticationFailed(INVALID, reason, user)
        if authzid and authzid != user:
            raise other_authzid(user)
        self.user, self.complete = user, True
        return b""
