"""Kafka's ``sasl.jaas.config``: one JAAS login module, its control flag and its options::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

Values are double-quoted (a backslash escapes the next character) or bare words. Kafka allows
exactly one module per setting. A parse error names the character position, never the text
around it: the text holds passwords.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kafkatier.serve.security.props import Password

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")
USER_PREFIX = "user_"
_TOKEN = re.compile(r'\s*(?:(?P<word>[^\s="\\;]+)|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<punct>[=;]))')


class JaasError(Exception):
    """A ``sasl.jaas.config`` value that does not parse; the message holds no part of it."""


@dataclass(frozen=True)
class JaasConfig:
    module: str
    flag: str
    options: dict[str, Password] = field(repr=False)

    def users(self) -> dict[str, Password]:
        """Kafka's ``user_<name>="<password>"`` options: the users the server accepts."""
        return {key[len(USER_PREFIX) :]: value for key, value in self.options.items()
                if key.startswith(USER_PREFIX) and len(key) > len(USER_PREFIX)}  # fmt: skip


def parse_jaas(text: str) -> JaasConfig:
    """The one login module of ``text``; :class:`JaasError` when it is not Kafka's syntax."""
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasError("expected '<LoginModule class> <flag> [option=\"value\" ...];'")
    module, flag = tokens[0][1], tokens[1][1]
    if flag not in FLAGS:
        raise JaasError(f"the control flag must be one of {', '.join(FLAGS)}")
    options: dict[str, Password] = {}
    i = 2
    while i + 2 < len(tokens) and tokens[i][0] == "word" and tokens[i + 1] == ("punct", "="):
        if tokens[i + 2][0] not in ("word", "quoted"):
            raise JaasError(f"option {tokens[i][1]!r} has no value")
        options[tokens[i][1]] = Password(tokens[i + 2][1])
        i += 3
    if tokens[i:] != [("punct", ";")]:
        raise JaasError("expected option=\"value\" pairs ending with ';' and exactly one "
                        "login module (as Kafka requires)")  # fmt: skip
    return JaasConfig(module, flag, options)


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while text[pos:].strip():
        match = _TOKEN.match(text, pos)
        if match is None:
            raise JaasError(f"unexpected character at position {pos + 1}")
        kind = match.lastgroup or ""
        value = match.group(kind)
        tokens.append((kind, re.sub(r"\\(.)", r"\1", value) if kind == "quoted" else value))
        pos = match.end()
    return tokens
