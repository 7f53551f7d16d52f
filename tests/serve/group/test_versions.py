"""Every served version of the group APIs over a socket, encoded and decoded by kafka-python's
protocol classes (generated from Kafka's JSON specs, independent of kio): FindCoordinator names
this server, JoinGroup (MEMBER_ID_REQUIRED from v4) and SyncGroup complete a one-member group,
Heartbeat, OffsetCommit, OffsetFetch, DescribeGroups and ListGroups answer in each version, and
LeaveGroup empties the group."""

from __future__ import annotations

import socket
import struct
from typing import Any

from group_clients import GROUPS, TOPIC, write_topic
from kafka.protocol.admin.groups import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from serve_clients import raw_socket

from kafkatier.serve.apis import versions as v

MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND = 79, 25, 69


def served(api_key: int) -> range:
    low, high = v.SUPPORTED[api_key]
    return range(low, high + 1)


class Caller:
    """Request/response on one connection with kafka-python's classes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.correlation = sock, 0

    def __call__(self, request_class: Any, version: int, **fields: Any) -> Any:
        self.correlation += 1
        request = request_class(version=version, **fields)
        request.with_header(correlation_id=self.correlation, client_id="sweep")
        self.sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        (size,) = struct.unpack(">i", self._exactly(4))
        response_class = type(request).__name__.replace("Request", "Response")
        module = __import__(type(request).__module__, fromlist=[response_class])
        response = getattr(module, response_class).decode(self._exactly(size), version=version,
                                                          header=True)  # fmt: skip
        assert response.header.correlation_id == self.correlation
        return response

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data


def join(call: Caller, version: int, group: str) -> tuple[str, int]:
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"sub")
    fields = dict(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
                  protocol_type="consumer", protocols=[protocol])  # fmt: skip
    answer = call(JoinGroupRequest, version, member_id="", **fields)
    if version >= 4:
        assert answer.error_code == MEMBER_ID_REQUIRED and answer.member_id
        answer = call(JoinGroupRequest, version, member_id=answer.member_id, **fields)
    assert answer.error_code == 0 and answer.leader == answer.member_id
    assert [(m.member_id, bytes(m.metadata)) for m in answer.members] == [
        (answer.member_id, b"sub")
    ]
    return answer.member_id, answer.generation_id


def test_every_served_version(tmp_path: Any, serve: Any) -> None:
    write_topic(tmp_path, count=3)
    with serve(tmp_path, **GROUPS) as port, raw_socket(port) as sock:
        call = Caller(sock)
        for version in served(v.FIND_COORDINATOR):
            keys = {"key": "g"} if version < 4 else {"coordinator_keys": ["g", "h"]}
            found = call(FindCoordinatorRequest, version, key_type=0, **keys)
            nodes = ([(c.node_id, c.port, c.error_code) for c in found.coordinators]
                     if version >= 4 else [(found.node_id, found.port, found.error_code)])
            assert nodes == [(0, port, 0)] * (2 if version >= 4 else 1)  # fmt: skip
        for version in served(v.JOIN_GROUP):
            group = f"join-{version}"
            member, generation = join(call, version, group)
            for sync_version in served(v.SYNC_GROUP):
                assignment = SyncGroupRequest.SyncGroupRequestAssignment
                synced = call(SyncGroupRequest, sync_version, group_id=group,
                              generation_id=generation, member_id=member,
                              protocol_type="consumer", protocol_name="range",
                              assignments=[assignment(member_id=member, assignment=b"A")])
                assert (synced.error_code, bytes(synced.assignment)) == (0, b"A")  # fmt: skip
            leave_version = version % (v.SUPPORTED[v.LEAVE_GROUP][1] + 1)
            for attempt, error in ((1, 0), (2, UNKNOWN_MEMBER_ID)):
                if leave_version < 3:
                    left = call(LeaveGroupRequest, leave_version, group_id=group,
                                member_id=member)  # fmt: skip
                    assert left.error_code == error, (version, attempt)
                else:
                    identity = LeaveGroupRequest.MemberIdentity(member_id=member)
                    left = call(LeaveGroupRequest, leave_version, group_id=group,
                                members=[identity])  # fmt: skip
                    assert [m.error_code for m in left.members] == [error], (version, attempt)
        member, generation = join(call, 5, "swept")
        sync = SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"A")
        call(SyncGroupRequest, 3, group_id="swept", generation_id=generation, member_id=member,
             assignments=[sync])  # fmt: skip
        for version in served(v.HEARTBEAT):
            beat = call(HeartbeatRequest, version, group_id="swept", generation_id=generation,
                        member_id=member)  # fmt: skip
            assert beat.error_code == 0
        sweep_offsets(call, member, generation)
        sweep_admin(call, member)


def sweep_offsets(call: Caller, member: str, generation: int) -> None:
    part_class = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    for version in served(v.OFFSET_COMMIT):
        topic = OffsetCommitRequest.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            part_class(partition_index=0, committed_offset=version, committed_metadata="m")])
        done = call(OffsetCommitRequest, version, group_id="swept", member_id=member,
                    generation_id_or_member_epoch=generation, topics=[topic])  # fmt: skip
        assert [p.error_code for t in done.topics for p in t.partitions] == [0]
    last = v.SUPPORTED[v.OFFSET_COMMIT][1]
    for version in served(v.OFFSET_FETCH):
        if version < 8:
            topic_class = OffsetFetchRequest.OffsetFetchRequestTopic
            wanted = topic_class(name=TOPIC, partition_indexes=[0, 1])
            got = call(OffsetFetchRequest, version, group_id="swept", topics=[wanted]).topics
        else:
            group_class = OffsetFetchRequest.OffsetFetchRequestGroup
            wanted = group_class.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1])
            got = call(OffsetFetchRequest, version, groups=[group_class(
                group_id="swept", member_id=None, member_epoch=-1, topics=[wanted])]
            ).groups[0].topics  # fmt: skip
        found = [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                 for t in got for p in t.partitions]  # fmt: skip
        assert found == [(0, last, "m", 0), (1, -1, "", 0)], version


def sweep_admin(call: Caller, member: str) -> None:
    for version in served(v.DESCRIBE_GROUPS):
        groups = call(DescribeGroupsRequest, version, groups=["swept", "nobody"]).groups
        assert (groups[0].error_code, groups[0].group_state, groups[0].protocol_data) == (
            0, "Stable", "range")  # fmt: skip
        assert [(m.member_id, m.client_id) for m in groups[0].members] == [(member, "sweep")]
        assert (groups[1].error_code, groups[1].group_state) == (
            GROUP_ID_NOT_FOUND if version >= 6 else 0, "Dead")  # fmt: skip
    for version in served(v.LIST_GROUPS):
        listed = call(ListGroupsRequest, version).groups
        assert "swept" in {g.group_id for g in listed}, version
