"""One member of a classic group (Kafka's ``MemberMetadata``): who it is, what it supports, and
the request it is waiting on.

A member waiting for a rebalance holds an unanswered JoinGroup (``join``), then an unanswered
SyncGroup (``sync``): futures the coordinator resolves when the group moves on. Its session
ends at ``last_heard + session_timeout_ms`` unless it is waiting on one of them (Kafka keeps
such members alive: the rebalance timeout governs them instead).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

Protocols = tuple[tuple[str, bytes], ...]
"""(name, subscription metadata) in the member's order of preference."""


@dataclass
class JoinResult:
    """What a JoinGroup answers (the members only for the leader)."""

    error: int
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False  # KIP-814: a static leader back in a Stable group


@dataclass
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    last_heard: float
    assignment: bytes = b""
    join: asyncio.Future[JoinResult] | None = None
    sync: asyncio.Future[SyncResult] | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join is not None and not self.join.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync is not None and not self.sync.done()

    def metadata(self, protocol: str) -> bytes:
        return next(data for name, data in self.protocols if name == protocol)

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def expired(self, now: float) -> bool:
        if self.awaiting_join or self.awaiting_sync:
            return False
        return now >= self.last_heard + self.session_timeout_ms / 1000

    def answer_join(self, result: JoinResult) -> None:
        if self.join is not None and not self.join.done():
            self.join.set_result(result)
        self.join = None

    def answer_sync(self, result: SyncResult) -> None:
        if self.sync is not None and not self.sync.done():
            self.sync.set_result(result)
        self.sync = None
