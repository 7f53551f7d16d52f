"""DescribeCluster (key 60): the cluster id of the log dir's ``meta.properties``, and this
server as its one broker and controller. Asked for controller endpoints (v1, endpoint type 2),
it answers MISMATCHED_ENDPOINT_TYPE as a Kafka broker does: it is a broker endpoint.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.authorized import CLUSTER, NOT_ASKED, operations
from kafkatier.serve.apis.versions import DESCRIBE_CLUSTER
from kafkatier.serve.context import CLIENT, NODE_ID, ServeContext
from kafkatier.serve.protocol import build, payload_module

BROKERS = 1


async def handle(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(DESCRIBE_CLUSTER, version, EntityType.response)
    if getattr(request, "endpoint_type", BROKERS) != BROKERS:
        return build(module.DescribeClusterResponse, throttle_time=datetime.timedelta(0),
                     error_code=ErrorCode.mismatched_endpoint_type,
                     error_message="kafkatier serve has broker endpoints only",
                     cluster_id=ctx.cluster_id, controller_id=-1, brokers=(),
                     cluster_authorized_operations=NOT_ASKED)  # fmt: skip
    listener = ctx.advertised_for(CLIENT.get().listener)
    broker = build(module.DescribeClusterBroker, broker_id=NODE_ID, host=listener.host,
                   port=listener.port, rack=None, is_fenced=False)  # fmt: skip
    return build(module.DescribeClusterResponse, throttle_time=datetime.timedelta(0),
                 error_code=ErrorCode.none, error_message=None, endpoint_type=BROKERS,
                 cluster_id=ctx.cluster_id, controller_id=NODE_ID, brokers=(broker,),
                 cluster_authorized_operations=operations(
                     request, "include_cluster_authorized_operations", CLUSTER))  # fmt: skip
