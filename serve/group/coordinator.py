"""The group coordinator: JoinGroup, SyncGroup, Heartbeat and LeaveGroup over every group, and
the timers (session and rebalance timeouts), as Kafka's classic ``GroupCoordinator``.

Everything runs on the event loop; a JoinGroup or SyncGroup that must wait for the rest of the
group awaits a future its member holds (Kafka's delayed operations in purgatory). Time comes
from ``clock`` (seconds, monotonic; injectable), and :meth:`tick`, called every
:data:`TICK_SECONDS` by :meth:`run` (or by hand in tests), expires sessions, drops member ids
never used after MEMBER_ID_REQUIRED, and completes joins whose rebalance timeout passed (members
that did not rejoin in time are removed), and every :data:`CLEANUP_SECONDS` forgets the Empty
groups that have no committed offsets (they become Dead, as Kafka's cleanup makes them), so a
long-running server does not keep every group id it ever saw. Static members
(``group.instance.id``, KIP-345) keep their place across restarts (:meth:`_join_static`).
Errors are Kafka's, in Kafka's order of checks.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from kafkatier.serve.group.group import Group, GroupState
from kafkatier.serve.group.member import JoinResult, Member, Protocols, SyncResult
from kafkatier.serve.group.settings import GroupSettings

TICK_SECONDS = 0.05
CLEANUP_SECONDS = 600.0
"""How often Empty groups without committed offsets are forgotten (Kafka's
``offsets.retention.check.interval.ms``)."""
E = ErrorCode
S = GroupState


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool  # JoinGroup v4+
    client_id: str
    client_host: str


class GroupCoordinator:
    def __init__(self, settings: GroupSettings, known_groups: Iterable[str] = (),
                 clock: Callable[[], float] = time.monotonic,
                 has_offsets: Callable[[str], bool] = lambda group: False) -> None:  # fmt: skip
        """``known_groups``: groups with committed offsets (Empty until someone joins);
        ``has_offsets``: whether a group has any (the cleanup keeps those)."""
        self.settings = settings
        self.clock = clock
        self.has_offsets = has_offsets
        self.groups: dict[str, Group] = {g: Group(g) for g in known_groups}
        self._next_cleanup = clock() + CLEANUP_SECONDS

    async def run(self) -> None:
        """Tick until cancelled."""
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self.tick()

    def tick(self) -> None:
        now = self.clock()
        for group in list(self.groups.values()):
            for member_id, expiry in list(group.pending.items()):
                if now >= expiry:
                    del group.pending[member_id]
            for member in [m for m in group.members.values() if m.expired(now)]:
                self._remove_member(group, member, E.unknown_member_id)
            self._maybe_complete_join(group)
        if now >= self._next_cleanup:
            self._next_cleanup = now + CLEANUP_SECONDS
            self._cleanup()

    def _cleanup(self) -> None:
        for group_id, group in list(self.groups.items()):
            if group.is_(S.EMPTY) and not group.members and not group.pending and (
                    not self.has_offsets(group_id)):
                group.transition(S.DEAD)
                del self.groups[group_id]

    # JoinGroup

    async def join(self, req: JoinRequest) -> JoinResult:
        s = self.settings
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            return JoinResult(E.invalid_session_timeout, member_id=req.member_id)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinResult(E.unknown_member_id, member_id=req.member_id)
            group = self.groups[req.group_id] = Group(req.group_id)
        if group.is_(S.DEAD):
            return JoinResult(E.coordinator_not_available, member_id=req.member_id)
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(E.inconsistent_group_protocol, member_id=req.member_id)
        if req.group_instance_id is not None:
            if not req.member_id:
                return await self._join_static(group, req)
            if group.fenced(req.group_instance_id, req.member_id):
                return JoinResult(E.fenced_instance_id, member_id=req.member_id)
        if not req.member_id:
            member_id = f"{req.client_id}-{uuid.uuid4()}"
            if req.require_known_member_id:
                group.pending[member_id] = self.clock() + req.session_timeout_ms / 1000
                return JoinResult(E.member_id_required, member_id=member_id)
            return await self._add_and_wait(group, member_id, req)
        if req.member_id in group.pending:
            del group.pending[req.member_id]
            return await self._add_and_wait(group, req.member_id, req)
        member = group.members.get(req.member_id)
        if member is None:
            return JoinResult(E.unknown_member_id, member_id=req.member_id)
        return await self._rejoin(group, member, req)

    def _member(self, member_id: str, req: JoinRequest) -> Member:
        return Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                      req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type,
                      req.protocols, self.clock())  # fmt: skip

    async def _add_and_wait(self, group: Group, member_id: str, req: JoinRequest) -> JoinResult:
        member = self._member(member_id, req)
        group.add(member)
        return await self._wait_for_join(group, member)

    async def _join_static(self, group: Group, req: JoinRequest) -> JoinResult:
        """A ``group.instance.id`` joining without a member id (KIP-345; no MEMBER_ID_REQUIRED
        round): a new member, or one back after a restart, which takes its old member's place
        and assignment (the old id is fenced) and, in a Stable group whose protocol its
        protocols keep, gets the current generation at once: no rebalance."""
        assert req.group_instance_id is not None
        member_id = f"{req.group_instance_id}-{uuid.uuid4()}"
        held = group.static.get(req.group_instance_id)
        old = None if held is None else group.members.get(held)
        if old is None:
            return await self._add_and_wait(group, member_id, req)
        new = self._member(member_id, req)
        group.replace_static(old, new)
        old.answer_join(JoinResult(E.fenced_instance_id, member_id=old.member_id))
        old.answer_sync(SyncResult(E.fenced_instance_id))
        # As Kafka's updateStaticMemberAndRebalance: no rebalance unless the group's protocol
        # would change. Its metadata bytes differ after any restart (a cooperative client's
        # owned partitions and generation): comparing them rebalanced the whole group.
        if group.is_(S.STABLE) and group.select_protocol() == group.protocol_name:
            # KIP-814: a leader gets the members and skips the assignment; it may ask for a
            # rebalance itself where a subscription changed
            return replace(self._join_result(group, new),
                           skip_assignment=new.member_id == group.leader)
        return await self._wait_for_join(group, new)

    async def _rejoin(self, group: Group, member: Member, req: JoinRequest) -> JoinResult:
        member.last_heard = self.clock()
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        unchanged = member.matches(req.protocols)
        if group.is_(S.COMPLETING_REBALANCE) and unchanged:
            return self._join_result(group, member)  # a retry of the join that completed
        if group.is_(S.STABLE) and unchanged and member.member_id != group.leader:
            return self._join_result(group, member)
        member.protocols = req.protocols
        return await self._wait_for_join(group, member)

    async def _wait_for_join(self, group: Group, member: Member) -> JoinResult:
        if member.join is not None:
            member.answer_join(JoinResult(E.rebalance_in_progress, member_id=member.member_id))
        member.join = asyncio.get_running_loop().create_future()
        future = member.join
        if not group.is_(S.PREPARING_REBALANCE):
            self._prepare_rebalance(group)
        self._maybe_complete_join(group)
        return await future

    def _prepare_rebalance(self, group: Group) -> None:
        for member in group.members.values():  # Kafka: waiting syncs learn of the rebalance
            member.answer_sync(SyncResult(E.rebalance_in_progress))
        now = self.clock()
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        if group.is_(S.EMPTY):
            delay = min(self.settings.initial_rebalance_delay_ms, timeout)
            group.delay_until = now + delay / 1000
        group.rebalance_deadline = now + timeout / 1000
        group.transition(S.PREPARING_REBALANCE)

    def _maybe_complete_join(self, group: Group) -> None:
        if not group.is_(S.PREPARING_REBALANCE):
            return
        now = self.clock()
        if now < group.delay_until:
            return
        if group.all_joined() or now >= group.rebalance_deadline:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            group.remove(member.member_id)  # it did not rejoin within the rebalance timeout
        group.next_generation()
        now = self.clock()
        for member in group.members.values():
            member.last_heard = now
            member.answer_join(self._join_result(group, member))

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        leader = member.member_id == group.leader
        assert group.protocol_name is not None
        members = tuple(
            (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        ) if leader else ()  # fmt: skip
        return JoinResult(E.none, group.generation, group.protocol_type, group.protocol_name,
                          group.leader or "", member.member_id, members)  # fmt: skip

    # SyncGroup, Heartbeat, LeaveGroup

    def _current(
        self, group_id: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> tuple[ErrorCode, Group | None]:
        """Kafka's checks of a request from a member of the current generation."""
        group = self.groups.get(group_id)
        if group is None or (group.is_(S.EMPTY) and not group.members):
            return E.unknown_member_id, None
        if group.is_(S.DEAD):
            return E.coordinator_not_available, None
        if group.fenced(instance_id, member_id):
            return E.fenced_instance_id, None
        if member_id not in group.members:
            return E.unknown_member_id, None
        if generation != group.generation:
            return E.illegal_generation, None
        group.members[member_id].last_heard = self.clock()
        return E.none, group

    async def sync(self, group_id: str, generation: int, member_id: str,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes], instance_id: str | None = None,
                   ) -> SyncResult:  # fmt: skip
        error, group = self._current(group_id, member_id, generation, instance_id)
        if group is None:
            return SyncResult(error)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(E.inconsistent_group_protocol)
        if group.is_(S.PREPARING_REBALANCE):
            return SyncResult(E.rebalance_in_progress)
        member = group.members[member_id]
        if group.is_(S.STABLE):
            return self._sync_result(group, member)
        member.sync = asyncio.get_running_loop().create_future()
        future = member.sync
        if member_id == group.leader:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.transition(S.STABLE)
            for m in group.members.values():
                m.answer_sync(self._sync_result(group, m))
        return await future

    def _sync_result(self, group: Group, member: Member) -> SyncResult:
        return SyncResult(E.none, member.assignment, group.protocol_type, group.protocol_name)

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> ErrorCode:
        error, group = self._current(group_id, member_id, generation, instance_id)
        if group is not None and group.is_(S.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        return error

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """One error per leaving (member id, group.instance.id); the group rebalances without
        them. A static member may be named by its instance id alone (v3+: an admin removing
        it); one whose instance id another member id holds now is fenced."""
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return [E.unknown_member_id] * len(leaving)
        errors: list[ErrorCode] = []
        for member_id, instance_id in leaving:
            if instance_id is not None:
                if member_id and group.fenced(instance_id, member_id):
                    errors.append(E.fenced_instance_id)
                    continue
                member_id = group.static.get(instance_id, member_id)
            member = group.members.get(member_id)
            if member_id in group.pending:
                del group.pending[member_id]
                errors.append(E.none)
            elif member is None:
                errors.append(E.unknown_member_id)
            else:
                self._remove_member(group, member, E.unknown_member_id)
                errors.append(E.none)
        return errors

    def _remove_member(self, group: Group, member: Member, error: ErrorCode) -> None:
        """Kafka's ``removeMemberAndUpdateGroup``."""
        group.remove(member.member_id)
        member.answer_join(JoinResult(error, member_id=member.member_id))
        member.answer_sync(SyncResult(error))
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        self._maybe_complete_join(group)

    # OffsetCommit

    def validate_commit(
        self, group_id: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> ErrorCode:
        """Whether a commit may be written (Kafka's ``validateOffsetCommit``); a commit outside
        group management (generation -1, no member id) goes to an Empty or new group."""
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return E.illegal_generation
            self.groups[group_id] = Group(group_id)
            return E.none
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        if generation >= 0 or member_id:
            error, _ = self._current(group_id, member_id, generation, instance_id)
            if error is not E.none:
                return error
        elif not group.is_(S.EMPTY):
            return E.unknown_member_id
        if group.is_(S.COMPLETING_REBALANCE):
            return E.rebalance_in_progress
        return E.none
