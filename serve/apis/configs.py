"""DescribeConfigs (key 32) for topics: Kafka's defaults overlaid with the topic's
``kafkatier-topic.<topic>.properties`` (``storage/config/topic_files.py``), each setting with
its source (DYNAMIC_TOPIC_CONFIG where the file sets it, DEFAULT_CONFIG otherwise) and type,
all read-only (serve changes nothing). A topic the log dirs lack is UNKNOWN_TOPIC_OR_PARTITION;
broker and other resources are INVALID_REQUEST (serve has no broker configuration to show).
"""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.versions import DESCRIBE_CONFIGS
from kafkatier.serve.catalog import TopicInfo
from kafkatier.serve.context import ServeContext
from kafkatier.serve.protocol import build, payload_module
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.spec import spec_of
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import ConfigError

TOPIC = 2
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
_TYPES = {"boolean": 1, "choice": 2, "int": 3, "long": 5, "double": 6, "list": 7}
"""Spec kinds to Kafka's ConfigType ids (DescribeConfigsResponse.json)."""
KINDS = {spec_of(f).name: spec_of(f).kind for f in dataclasses.fields(LogConfig)}


async def handle(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(DESCRIBE_CONFIGS, version, EntityType.response)
    topics = await ctx.blocking(ctx.catalog.topics)
    results = []
    for resource in request.resources:
        found = await ctx.blocking(_describe, resource, topics)
        error, message, entries = found
        configs = tuple(
            build(module.DescribeConfigsResourceResult, name=name, value=value, read_only=True,
                  config_source=source, is_default=source == DEFAULT_CONFIG,
                  is_sensitive=False, synonyms=(), config_type=_TYPES.get(KINDS[name], 0),
                  documentation=None)
            for name, value, source in entries
        )
        results.append(build(module.DescribeConfigsResult, error_code=error,
                             error_message=message, resource_type=resource.resource_type,
                             resource_name=resource.resource_name, configs=configs))  # fmt: skip
    return build(module.DescribeConfigsResponse, throttle_time=datetime.timedelta(0),
                 results=tuple(results))  # fmt: skip


def _describe(
    resource: Any, topics: dict[str, TopicInfo]
) -> tuple[ErrorCode, str | None, list[tuple[str, str, int]]]:
    """(error, message, [(name, value, source)]) of one resource."""
    if resource.resource_type != TOPIC:
        return ErrorCode.invalid_request, "kafkatier serve describes topic configs only", []
    info = topics.get(resource.resource_name)
    if info is None:
        return ErrorCode.unknown_topic_or_partition, None, []
    store = TopicConfigStore(Path(next(iter(info.partitions.values()))))
    try:
        stored, config = store.stored(info.name), store.get(info.name)
    except ConfigError as exc:  # a damaged settings file: this resource's error, said
        return ErrorCode.invalid_config, str(exc), []
    wanted = resource.configuration_keys
    entries = [
        (name, value, DYNAMIC_TOPIC_CONFIG if name in stored else DEFAULT_CONFIG)
        for name, value in sorted(topic_settings(config).items())
        if wanted is None or name in wanted
    ]
    return ErrorCode.none, None, entries


def topic_settings(config: LogConfig) -> dict[str, str]:
    """What a broker lists for a topic: every topic config, an optional one left unset at the
    value a broker shows for it (``Spec.unset``), and none of the broker settings ``LogConfig``
    also holds (``Spec.broker``: the cleaner's buffers, ``producer.id.expiration.ms``)."""
    shown: dict[str, str] = {}
    for f in dataclasses.fields(config):
        spec = spec_of(f)
        value = getattr(config, f.name)
        if not spec.broker and (value is not None or spec.unset):
            shown[spec.name] = spec.unset if value is None else spec.format(value)
    return shown
