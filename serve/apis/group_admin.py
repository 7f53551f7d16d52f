"""DescribeGroups (15) and ListGroups (16): the groups this server coordinates, as Kafka's
classic coordinator reports them.

A group is known once a member joined it or an offset was committed for it (groups with
committed offsets are known again after a restart, Empty). DescribeGroups gives a Stable
group's chosen protocol and each member's subscription and assignment; in other states the
protocol and the members' data are empty, as Kafka sends them. An unknown group is reported
Dead (v6: GROUP_ID_NOT_FOUND). Every group is of type ``classic``.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.authorized import GROUP, operations
from kafkatier.serve.apis.versions import DESCRIBE_GROUPS, LIST_GROUPS
from kafkatier.serve.context import ServeContext
from kafkatier.serve.group.group import Group, GroupState
from kafkatier.serve.protocol import build, payload_module

NO_THROTTLE = datetime.timedelta(0)


async def describe_groups(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(DESCRIBE_GROUPS, version, EntityType.response)
    allowed = operations(request, "include_authorized_operations", GROUP)
    groups = tuple(_described(module, version, ctx.coordinator.groups.get(group_id), group_id,
                              allowed) for group_id in request.groups)  # fmt: skip
    return build(module.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=groups)


def _described(
    module: Any, version: int, group: Group | None, group_id: str, allowed: int
) -> Any:
    if group is None:
        missing = version >= 6
        return build(module.DescribedGroup,
                     error_code=ErrorCode.group_id_not_found if missing else ErrorCode.none,
                     error_message=f"group {group_id!r} not found" if missing else None,
                     group_id=group_id, group_state=GroupState.DEAD.value, protocol_type="",
                     protocol_data="", members=(),
                     authorized_operations=allowed)  # fmt: skip
    stable = group.is_(GroupState.STABLE)
    members = tuple(
        build(module.DescribedGroupMember, member_id=m.member_id,
              group_instance_id=m.group_instance_id, client_id=m.client_id,
              client_host=m.client_host,
              member_metadata=m.metadata(group.protocol_name or "") if stable else b"",
              member_assignment=m.assignment if stable else b"")
        for m in group.members.values()
    )  # fmt: skip
    return build(module.DescribedGroup, error_code=ErrorCode.none, error_message=None,
                 group_id=group.group_id, group_state=group.state.value,
                 protocol_type=group.protocol_type or "",
                 protocol_data=(group.protocol_name or "") if stable else "", members=members,
                 authorized_operations=allowed)  # fmt: skip


async def list_groups(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(LIST_GROUPS, version, EntityType.response)
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    listed = tuple(
        build(module.ListedGroup, group_id=group.group_id,
              protocol_type=group.protocol_type or "", group_state=group.state.value,
              group_type="classic")
        for group in ctx.coordinator.groups.values()
        if not group.is_(GroupState.DEAD)
        and (not states or group.state.value.lower() in states)
        and (not types or "classic" in types)
    )  # fmt: skip
    return build(module.ListGroupsResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, groups=listed)  # fmt: skip
