"""Authorized operations (KIP-430): where a request asks for them, Kafka answers a bitfield of
the ``AclOperation`` codes the client may use on the resource (with no authorizer, every one
the resource supports), and ``Int.MIN_VALUE`` where it does not ask. serve answers what it
lets any client do: it is read-only (no Produce, no topic or group changes)."""

from __future__ import annotations

from typing import Any, Final

NOT_ASKED: Final = -(2**31)
READ, DESCRIBE, DESCRIBE_CONFIGS = 3, 8, 10  # Kafka's AclOperation codes


def _bits(*operations: int) -> int:
    return sum(1 << op for op in operations)


TOPIC: Final = _bits(READ, DESCRIBE, DESCRIBE_CONFIGS)
GROUP: Final = _bits(READ, DESCRIBE)
CLUSTER: Final = _bits(DESCRIBE)


def operations(request: Any, asks: str, allowed: int) -> int:
    """``allowed`` where ``request`` sets its flag ``asks``, else :data:`NOT_ASKED`."""
    return allowed if getattr(request, asks, False) else NOT_ASKED
