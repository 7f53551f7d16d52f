"""One classic group (Kafka's ``GroupMetadata``): its members, generation, chosen protocol,
leader and state.

States and the moves between them, as Kafka's classic coordinator::

    Empty --first join--> PreparingRebalance
    PreparingRebalance --all joined, or the rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable, CompletingRebalance --a join with new metadata, a leave, a session timeout-->
        PreparingRebalance
    PreparingRebalance --nobody left when the join completes--> Empty
    any --group removed--> Dead

Each completed join starts a new generation; the leader (the first member to have joined, kept
while it stays) gets every member's subscription and answers with the assignments.
"""

from __future__ import annotations

import enum
from collections import Counter

from kafkatier.serve.group.member import Member, Protocols


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_FROM: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}  # fmt: skip
"""Kafka's ``validPreviousStates``."""


class IllegalStateTransition(Exception):
    pass


class Group:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.pending: dict[str, float] = {}
        """Member ids handed out with MEMBER_ID_REQUIRED -> when they expire unless used."""
        self.static: dict[str, str] = {}
        """``group.instance.id`` -> the member id it holds now (static members, KIP-345)."""
        self.rebalance_deadline = 0.0
        self.delay_until = 0.0
        """An initial rebalance waits this long for more members (initial rebalance delay)."""

    def transition(self, to: GroupState) -> None:
        if self.state not in _FROM[to]:
            raise IllegalStateTransition(f"group {self.group_id!r}: {self.state.value} -> "
                                         f"{to.value}")  # fmt: skip
        self.state = to

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def add(self, member: Member) -> None:
        if not self.members:  # an Empty group takes any protocol type
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static[member.group_instance_id] = member.member_id
        if self.leader is None:
            self.leader = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        instance = None if member is None else member.group_instance_id
        if instance is not None and self.static.get(instance) == member_id:
            del self.static[instance]
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member  # the protocol type stays (Kafka's): an Empty group still says "consumer"

    def replace_static(self, old: Member, new: Member) -> None:
        """A static member back under a new member id (Kafka's ``replaceStaticMember``): it
        takes the old one's place, assignment and leadership; the old id is fenced."""
        new.assignment = old.assignment
        self.members = {new.member_id if k == old.member_id else k: new if k == old.member_id
                        else m for k, m in self.members.items()}  # fmt: skip
        assert new.group_instance_id is not None
        self.static[new.group_instance_id] = new.member_id
        if self.leader == old.member_id:
            self.leader = new.member_id

    def fenced(self, instance_id: str | None, member_id: str) -> bool:
        """Whether ``instance_id`` now belongs to another member id (FENCED_INSTANCE_ID)."""
        held = None if instance_id is None else self.static.get(instance_id)
        return held is not None and held != member_id

    def supports(self, protocol_type: str, protocols: Protocols) -> bool:
        """Whether a member with these protocols may join (Kafka's ``supportsProtocols``)."""
        if not protocols:
            return False
        if not self.members:
            return bool(protocol_type)
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidates())

    def candidates(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes win (ties: the
        first member's order)."""
        candidates = self.candidates()
        votes = Counter(
            next(name for name, _ in m.protocols if name in candidates)
            for m in self.members.values()
        )
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    def all_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def next_generation(self) -> None:
        """A completed join: generation + 1, the protocol chosen, CompletingRebalance (or Empty
        when nobody stayed)."""
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY)
