"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512's server side (RFC 5802, RFC 7677), as Kafka's
``ScramSaslServer``, and SCRAM credentials as Kafka stores them.

A credential is ``salt``, ``stored_key = H(ClientKey)``, ``server_key`` and ``iterations``
(Kafka's ``ScramCredential``; ``ClientKey = HMAC(SaltedPassword, "Client Key")``,
``ServerKey = HMAC(SaltedPassword, "Server Key")``, ``SaltedPassword = PBKDF2(password, salt,
iterations)``): enough to check a client's proof, not to recover the password.

The exchange: client-first ``n,[a=authzid],n=user,r=cnonce[,ext=value...]`` -> server-first
``r=cnonce+snonce,s=salt,i=iterations`` -> client-final ``c=base64(gs2 header),r=nonce,p=proof``
-> server-final ``v=ServerSignature``. Kafka's extension check: extensions other than
``tokenauth`` are ignored; ``tokenauth=true`` asks for a delegation token, which is not served
(refused). The client-final nonce must be the server-first one; librdkafka before 2.6.1 sends
the client nonce once more in front of it (librdkafka#4895), which Kafka 3.8.1-3.9 accepts and
so does this server (the proof still covers the message as sent). Channel binding (``p=``,
``y,``) is refused, as Kafka refuses it. An unknown user is refused at the first message, as
Kafka does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkatier.serve.security.exchange import (
    AuthenticationFailed,
    invalid_credentials,
    other_authzid,
)

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations, both mechanisms
MAX_ITERATIONS = 16384  # kafka-configs' upper bound
_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>(?:m=[^,]*,)?n=(?P<name>[^,]+),r=(?P<nonce>[!-+\--~]+)"
    r"(?P<ext>(?:,[A-Za-z0-9]+=[^,]*)*))"
)
_CLIENT_FINAL = re.compile(r"(?P<bare>c=(?P<cb>[^,]*),r=(?P<nonce>[^,]+)(?:,[a-z]=[^,]*)*),"
                           r"p=(?P<proof>[^,]+)")  # fmt: skip


@dataclass(frozen=True)
class ScramCredential:
    """Kafka's ScramCredential; repr shows only the iterations (the rest is credential
    material)."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    @classmethod
    def derive(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
               salt: bytes | None = None) -> ScramCredential:  # fmt: skip
        """What ``kafka-configs --add-config 'SCRAM-SHA-256=[iterations=N,password=P]'``
        stores: a random salt unless one is given."""
        name = HASHES[mechanism]
        salt = secrets.token_bytes(32) if salt is None else salt
        salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", name)
        return cls(salt, hashlib.new(name, client_key).digest(),
                   hmac.digest(salted, b"Server Key", name), iterations)  # fmt: skip

    def to_kafka(self) -> str:
        """Kafka's stored form (ScramCredentialUtils.credentialToString)."""
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")  # fmt: skip


class ScramExchange:
    """One client's SCRAM exchange against ``users`` (user -> credential)."""

    def __init__(self, mechanism: str, users: Mapping[str, ScramCredential]) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._users = users
        self._credential: ScramCredential | None = None
        self._first_bare = self._server_first = self._nonce = self._gs2 = ""
        self._nonces: tuple[str, ...] = ()
        self.user: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        if self._credential is None:
            return self._first(token.decode("utf-8", "replace"))
        return self._final(token.decode("utf-8", "replace"))

    def _fail(self, reason: str) -> AuthenticationFailed:
        return AuthenticationFailed(invalid_credentials(self.mechanism), reason, self.user)

    def _first(self, message: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise self._fail("not a SCRAM client-first message (or channel binding asked)")
        self.user = match["name"].replace("=2C", ",").replace("=3D", "=")
        extensions = dict(e.split("=", 1) for e in match["ext"].split(",")[1:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise self._fail("a delegation token (tokenauth), which is not served")
        credential = self._users.get(self.user)
        if credential is None:
            raise self._fail("unknown user")
        if match["authzid"] and match["authzid"] != self.user:
            raise other_authzid(self.user)
        self._credential, self._first_bare = credential, match["bare"]
        self._gs2 = base64.b64encode(message[: match.start("bare")].encode()).decode()
        self._nonce = match["nonce"] + secrets.token_urlsafe(24)
        self._nonces = (self._nonce, match["nonce"] + self._nonce)  # librdkafka < 2.6.1's too
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None or match["nonce"] not in self._nonces or match["cb"] != self._gs2:
            raise self._fail("not the client-final message of this exchange")
        auth = f"{self._first_bare},{self._server_first},{match['bare']}".encode()
        try:
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            proof = b""
        signature = hmac.digest(credential.stored_key, auth, self._hash)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=False))
        stored = hashlib.new(self._hash, client_key).digest()
        if len(proof) != len(signature) or not hmac.compare_digest(stored,
                                                                   credential.stored_key):
            raise self._fail("wrong password")
        self.complete = True
        server_signature = hmac.digest(credential.server_key, auth, self._hash)
        return b"v=" + base64.b64encode(server_signature)
