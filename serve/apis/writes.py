"""Produce (key 0), refused: ``kafkatier serve`` is read-only, the Spark sink and
``kafkatier produce`` are the writers. Every partition gets POLICY_VIOLATION (not retriable, so
a producer fails at once rather than retrying) with a message saying so; a request with acks=0
gets no response at all, as Kafka sends none.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.versions import PRODUCE
from kafkatier.serve.context import ServeContext
from kafkatier.serve.protocol import build, payload_module

READ_ONLY = ("kafkatier serve is read-only: topics are written by the kafkatier Spark sink or "
             "'kafkatier produce', not over the Kafka protocol")  # fmt: skip


async def handle(ctx: ServeContext, version: int, request: Any) -> Any:
    if request.acks == 0:
        return None
    module = payload_module(PRODUCE, version, EntityType.response)
    topics = tuple(
        build(module.TopicProduceResponse, name=topic.name, partition_responses=tuple(
            build(module.PartitionProduceResponse, index=p.index,
                  error_code=ErrorCode.policy_violation, base_offset=-1, log_append_time=None,
                  log_start_offset=-1, record_errors=(), error_message=READ_ONLY)
            for p in topic.partition_data))
        for topic in request.topic_data
    )
    return build(module.ProduceResponse, responses=topics, throttle_time=datetime.timedelta(0))
