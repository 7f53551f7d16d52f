"""The group coordinator's state machine with a hand-driven clock (no sockets): Kafka's classic
rules for MEMBER_ID_REQUIRED, rebalances on join and leave, the leader's assignments relayed to
every member, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS, session and
rebalance timeouts, and which commits are accepted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode as E

from kafkatier.serve.group.coordinator import (
    CLEANUP_SECONDS,
    GroupCoordinator,
    GroupSettings,
    JoinRequest,
)
from kafkatier.serve.group.group import GroupState as S
from kafkatier.serve.group.member import JoinResult

SESSION_MS, REBALANCE_MS = 1000, 3000


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def coordinator(clock: Clock) -> GroupCoordinator:
    return GroupCoordinator(GroupSettings(min_session_timeout_ms=100,
                                          initial_rebalance_delay_ms=0), clock=clock,
                            has_offsets=lambda group: group == "kept")  # fmt: skip


def request(member_id: str = "", protocols: tuple[tuple[str, bytes], ...] = (("range", b"r"),),
            *, known: bool = True, session: int = SESSION_MS,
            instance: str | None = None) -> JoinRequest:  # fmt: skip
    return JoinRequest("g", member_id, instance, session, REBALANCE_MS, "consumer", protocols,
                       known, "client", "127.0.0.1")  # fmt: skip


def run(test: Callable[[GroupCoordinator, Clock], Awaitable[None]]) -> None:
    clock = Clock()
    asyncio.run(test(coordinator(clock), clock))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def join_new(c: GroupCoordinator) -> asyncio.Task[JoinResult]:
    """A v4+ join: MEMBER_ID_REQUIRED with an id, then the join with it (left pending)."""
    first = await c.join(request())
    assert first.error == E.member_id_required and first.member_id.startswith("client-")
    task = asyncio.create_task(c.join(request(first.member_id)))
    await settle()
    return task


def test_two_members_a_rebalance_and_the_leaders_assignment() -> None:
    async def scenario(c: GroupCoordinator, clock: Clock) -> None:
        one = await (await join_new(c))
        assert (one.error, one.generation, one.leader) == (E.none, 1, one.member_id)
        assert [m[0] for m in one.members] == [one.member_id]  # the leader sees the members
        sync = await c.sync("g", 1, one.member_id, "consumer", "range", {one.member_id: b"A"})
        assert (sync.error, sync.assignment) == (E.none, b"A")
        assert c.groups["g"].state is S.STABLE
        second = await join_new(c)  # a second member: the group rebalances
        assert c.groups["g"].state is S.PREPARING_REBALANCE and not second.done()
        assert c.heartbeat("g", one.member_id, 1) == E.rebalance_in_progress
        rejoin = asyncio.create_task(c.join(request(one.member_id)))
        await settle()
        leader, follower = await rejoin, await second
        assert leader.generation == follower.generation == 2
        assert len(leader.members) == 2 and follower.members == ()
        waiting = asyncio.create_task(c.sync("g", 2, follower.member_id, None, None, {}))
        await settle()
        assert not waiting.done()  # a follower waits for the leader's assignments
        got = await c.sync("g", 2, leader.member_id, None, None,
                           {leader.member_id: b"L", follower.member_id: b"F"})  # fmt: skip
        assert got.assignment == b"L" and (await waiting).assignment == b"F"
        assert c.heartbeat("g", follower.member_id, 1) == E.illegal_generation
        assert c.heartbeat("g", "stranger", 2) == E.unknown_member_id
        assert c.heartbeat("g", follower.member_id, 2) == E.none
        left = c.leave("g", [(leader.member_id, None), ("stranger", None)])
        assert left == [E.none, E.unknown_member_id]
        assert c.groups["g"].state is S.PREPARING_REBALANCE
        assert c.groups["g"].leader == follower.member_id

    run(scenario)


def test_join_errors() -> None:
    async def scenario(c: GroupCoordinator, clock: Clock) -> None:
        assert (await c.join(request("ghost"))).error == E.unknown_member_id  # no such group
        assert (await c.join(request(session=50))).error == E.invalid_session_timeout
        old = await c.join(request(known=False))  # JoinGroup v0-3: no MEMBER_ID_REQUIRED
        assert old.error == E.none and old.member_id
        other = await c.join(request(protocols=(("sticky", b""),)))
        assert other.error == E.inconsistent_group_protocol  # nothing in common with range
        assert (await c.join(request("not-handed-out"))).error == E.unknown_member_id

    run(scenario)


def test_a_silent_member_is_expelled_after_its_session() -> None:
    async def scenario(c: GroupCoordinator, clock: Clock) -> None:
        one = await (await join_new(c))
        await c.sync("g", 1, one.member_id, None, None, {})
        two_task = await join_new(c)
        rejoin = asyncio.create_task(c.join(request(one.member_id)))
        await settle()
        two = await two_task
        await rejoin
        leader = await asyncio.gather(
            c.sync("g", 2, one.member_id, None, None, {}),
            c.sync("g", 2, two.member_id, None, None, {}),
        )
        assert [r.error for r in leader] == [E.none, E.none]
        clock.now += 0.9
        assert c.heartbeat("g", one.member_id, 2) == E.none  # one keeps its session alive
        c.tick()
        assert len(c.groups["g"].members) == 2
        clock.now += 0.2  # two's session (1 s since the join) is over; one's is not
        c.tick()
        group = c.groups["g"]
        assert list(group.members) == [one.member_id]
        assert group.state is S.PREPARING_REBALANCE
        assert c.heartbeat("g", two.member_id, 2) == E.unknown_member_id

    run(scenario)


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    async def scenario(c: GroupCoordinator, clock: Clock) -> None:
        one = await (await join_new(c))
        await c.sync("g", 1, one.member_id, None, None, {})
        second = await join_new(c)  # one never rejoins (nor heartbeats)
        clock.now += REBALANCE_MS / 1000 - 0.1
        c.tick()
        assert not second.done()  # members waiting on a rebalance are not expired
        clock.now += 0.2
        c.tick()
        await settle()
        result = await second
        assert (result.error, result.generation, result.leader) == (
            E.none, 2, result.member_id)  # fmt: skip
        assert list(c.groups["g"].members) == [result.member_id]

    run(scenario)


def test_which_commits_are_accepted() -> None:
    async def scenario(c: GroupCoordinator, clock: Clock) -> None:
        assert c.validate_commit("simple", "", -1) == E.none  # assign() + commit: a new group
        assert c.groups["simple"].state is S.EMPTY
        assert c.validate_commit("nobody", "m", 3) == E.illegal_generation
        one = await (await join_new(c))
        assert c.validate_commit("g", one.member_id, 1) == E.rebalance_in_progress  # completing
        await c.sync("g", 1, one.member_id, None, None, {})
        assert c.validate_commit("g", one.member_id, 1) == E.none
        assert c.validate_commit("g", one.member_id, 0) == E.illegal_generation
        assert c.validate_commit("g", "stranger", 1) == E.unknown_member_id
        assert c.validate_commit("g", "", -1) == E.unknown_member_id  # the group is in use
        assert c.leave("g", [(one.member_id, None)]) == [E.none]
        group: Any = c.groups["g"]
        assert group.state is S.EMPTY and group.generation == 2
        assert c.validate_commit("g", "", -1) == E.none

    run(scenario)


def test_empty_groups_without_offsets_are_forgotten() -> None:
    async def scenario(c: GroupCoordinator, clock: Clock) -> None:
        for group in ("kept", "gone"):
            assert c.validate_commit(group, "", -1) == E.none  # each now a known, Empty group
        one = await (await join_new(c))
        assert c.leave("g", [(one.member_id, None)]) == [E.none]  # "g" is Empty again, no offsets
        live = await (await join_new(c))  # joined again: a member, kept by its heartbeats
        for step in (CLEANUP_SECONDS - 1, 1):
            clock.now += step
            assert c.heartbeat("g", live.member_id, live.generation) == E.none
            c.tick()
            if step > 1:
                assert set(c.groups) == {"kept", "gone", "g"}  # not time for the cleanup yet
        assert set(c.groups) == {"kept", "g"}  # "g" has a member; "kept" has offsets

    run(scenario)


def test_a_static_member_back_after_a_restart_takes_its_place_without_a_rebalance() -> None:
    """KIP-345: a ``group.instance.id`` joins with no MEMBER_ID_REQUIRED round; back under a new
    member id (a restart, no LeaveGroup) it gets the current generation and its old assignment
    at once, the other member sees nothing, and the old member id is fenced everywhere."""

    async def scenario(c: GroupCoordinator, clock: Clock) -> None:
        first = await c.join(request(instance="a"))  # no MEMBER_ID_REQUIRED round
        assert first.error == E.none and first.member_id.startswith("a-")
        await c.sync("g", 1, first.member_id, None, None, {}, "a")
        b_task = asyncio.create_task(c.join(request(instance="b")))
        await settle()
        a = await c.join(request(first.member_id, instance="a"))
        b = await b_task
        assert a.generation == b.generation == 2 and a.leader == a.member_id
        waiting = asyncio.create_task(c.sync("g", 2, b.member_id, None, None, {}, "b"))
        await settle()
        got = await c.sync("g", 2, a.member_id, None, None,
                           {a.member_id: b"A", b.member_id: b"B"}, "a")  # fmt: skip
        assert (await waiting).assignment == b"B"
        assert got.error == E.none and c.groups["g"].state is S.STABLE
        back = await c.join(request(instance="a"))  # a restarted: a new member id, same place
        assert back.error == E.none and back.generation == 2 and back.member_id != a.member_id
        assert back.leader == back.member_id and c.groups["g"].state is S.STABLE  # no rebalance
        again = await c.sync("g", 2, back.member_id, None, None, {}, "a")
        assert (again.error, again.assignment) == (E.none, b"A")
        assert c.heartbeat("g", b.member_id, 2, "b") == E.none
        assert c.heartbeat("g", a.member_id, 2, "a") == E.fenced_instance_id
        assert (await c.join(request(a.member_id, instance="a"))).error == E.fenced_instance_id
        assert c.validate_commit("g", a.member_id, 2, "a") == E.fenced_instance_id
        assert c.leave("g", [(a.member_id, "a")]) == [E.fenced_instance_id]
        assert c.leave("g", [("", "a")]) == [E.none]  # named by its instance id alone
        assert c.groups["g"].state is S.PREPARING_REBALANCE and "a" not in c.groups["g"].static

    run(scenario)


def test_a_static_member_back_rebalances_only_where_the_groups_protocol_changes() -> None:
    """Kafka's updateStaticMemberAndRebalance: a restarted static member's metadata differs
    (a cooperative client's owned partitions and generation), which rebalanced the whole
    group; only a change of the group's selected protocol does. A leader back gets the members
    with skip_assignment (KIP-814), so it may ask for a rebalance itself."""

    async def scenario(c: GroupCoordinator, clock: Clock) -> None:
        first = await c.join(request(instance="a"))
        await c.sync("g", 1, first.member_id, None, None, {first.member_id: b"A"}, "a")
        back = await c.join(request(instance="a", protocols=(("range", b"owned 0-3, gen 1"),)))
        assert (back.error, back.generation, back.skip_assignment) == (E.none, 1, True)
        assert [m[2] for m in back.members] == [b"owned 0-3, gen 1"]
        assert c.groups["g"].state is S.STABLE
        prefers = (("roundrobin", b"x"), ("range", b"r"))  # the group's protocol changes
        changed = await c.join(request(instance="a", protocols=prefers))
        assert changed.error == E.none and changed.generation == 2  # a new generation
        assert c.groups["g"].protocol_name == "roundrobin" and not changed.skip_assignment

    run(scenario)
