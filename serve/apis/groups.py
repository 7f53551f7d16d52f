"""The classic group protocol: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup
(13), SyncGroup (14). The logic is ``serve/group/coordinator.py``; these handlers translate each
version's request and response.

FindCoordinator names this server (node 0) for every group; transaction coordinators (key type
1) are not served (COORDINATOR_NOT_AVAILABLE: this server is read-only). JoinGroup v0 has no
rebalance timeout: the session timeout is used, as Kafka does; from v4 a member without an id
gets MEMBER_ID_REQUIRED and an id to rejoin with (KIP-394). A ``group.instance.id`` (static
membership, KIP-345) makes a static member: it joins without the MEMBER_ID_REQUIRED round, and
back after a restart (no LeaveGroup: static members do not send one) it takes its old member's
place and assignment without a rebalance if its subscription is unchanged; the old member id is
fenced (FENCED_INSTANCE_ID in JoinGroup, SyncGroup, Heartbeat, OffsetCommit, LeaveGroup). It
leaves when its session times out, or by LeaveGroup v3+ naming its instance id. LeaveGroup up to
v2 names one member, from v3 a list.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.versions import (
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
)
from kafkatier.serve.context import CLIENT, NODE_ID, ServeContext
from kafkatier.serve.group.coordinator import JoinRequest
from kafkatier.serve.protocol import build, payload_module

GROUP_KEY = 0
NO_THROTTLE = datetime.timedelta(0)


def _ms(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


async def find_coordinator(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(FIND_COORDINATOR, version, EntityType.response)
    listener = ctx.advertised_for(CLIENT.get().listener)
    key_type = getattr(request, "key_type", GROUP_KEY)
    error, message = ErrorCode.none, None
    if key_type != GROUP_KEY:
        error = ErrorCode.coordinator_not_available
        message = "kafkatier serve coordinates consumer groups only"
    found = {"node_id": NODE_ID if error is ErrorCode.none else -1,
             "host": listener.host if error is ErrorCode.none else "",
             "port": listener.port if error is ErrorCode.none else -1,
             "error_code": error, "error_message": message}  # fmt: skip
    if version < 4:
        return build(module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **found)
    coordinators = tuple(build(module.Coordinator, key=key, **found)
                         for key in request.coordinator_keys)  # fmt: skip
    return build(module.FindCoordinatorResponse, throttle_time=NO_THROTTLE,
                 coordinators=coordinators)  # fmt: skip


async def join_group(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(JOIN_GROUP, version, EntityType.response)
    client = CLIENT.get()
    session_ms = _ms(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    result = await ctx.coordinator.join(JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms if rebalance is None else _ms(rebalance),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        require_known_member_id=version >= 4,
        client_id=client.client_id, client_host=client.host,
    ))  # fmt: skip
    members = tuple(
        build(module.JoinGroupResponseMember, member_id=member_id,
              group_instance_id=instance_id, metadata=metadata)
        for member_id, instance_id, metadata in result.members
    )  # fmt: skip
    name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return build(module.JoinGroupResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode(result.error), generation_id=result.generation,
                 protocol_type=result.protocol_type, protocol_name=name,
                 leader=result.leader, skip_assignment=result.skip_assignment,
                 member_id=result.member_id,
                 members=members)  # fmt: skip


async def sync_group(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(SYNC_GROUP, version, EntityType.response)
    result = await ctx.coordinator.sync(
        request.group_id, request.generation_id, request.member_id,
        getattr(request, "protocol_type", None), getattr(request, "protocol_name", None),
        {a.member_id: a.assignment for a in request.assignments},
        getattr(request, "group_instance_id", None),
    )  # fmt: skip
    return build(module.SyncGroupResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode(result.error), protocol_type=result.protocol_type,
                 protocol_name=result.protocol_name, assignment=result.assignment)  # fmt: skip


async def heartbeat(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(HEARTBEAT, version, EntityType.response)
    error = ctx.coordinator.heartbeat(request.group_id, request.member_id,
                                      request.generation_id,
                                      getattr(request, "group_instance_id", None))  # fmt: skip
    return build(module.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error)


async def leave_group(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(LEAVE_GROUP, version, EntityType.response)
    if version < 3:
        [error] = ctx.coordinator.leave(request.group_id, [(request.member_id, None)])
        return build(module.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error)
    errors = ctx.coordinator.leave(request.group_id,
                                   [(m.member_id, m.group_instance_id) for m in request.members])
    members = tuple(
        build(module.MemberResponse, member_id=m.member_id, group_instance_id=m.group_instance_id,
              error_code=error)
        for m, error in zip(request.members, errors, strict=True)
    )  # fmt: skip
    return build(module.LeaveGroupResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, members=members)  # fmt: skip
