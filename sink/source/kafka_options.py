"""Spark's Kafka source options that configure its Kafka consumer, not what it reads: a query moved
from ``format("kafka")`` to ``format("kafkatier")`` keeps its option map.

Spark's Kafka source passes every ``kafka.*`` option to its consumers (``kafka.bootstrap.servers``,
``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.group.id``, ``kafka.max.poll.records``,
...) and has a few options of its own for talking to brokers (``groupIdPrefix``,
``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``, ``kafkaConsumer.pollTimeoutMs``).
This source reads the log dir and has no consumer: those options are accepted and ignored, with
one warning naming them, so a typo in an option of ours is still an error while a copied broker
setting is not. ``kafka.isolation.level`` is the one consumer setting that changes what is read
(``options._alias`` maps it to ``isolationLevel``). The consumer settings Spark's own source
refuses are refused here too, with Spark's reason: a query that Spark would not run is not
silently read some other way.
"""

from __future__ import annotations

import logging
from typing import Final

from kafkatier.storage.errors import ConfigError

log = logging.getLogger(__name__)

BROKER_OPTIONS: Final = (
    "groupIdPrefix", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "kafkaConsumer.pollTimeoutMs",
)  # fmt: skip
"""Spark's Kafka source's own options for reaching brokers (no meaning without one)."""
_BROKER: Final = {name.lower(): name for name in BROKER_OPTIONS}
REFUSED: Final = {
    "kafka.auto.offset.reset": "set the option 'startingOffsets' to 'earliest' or 'latest' "
    "instead: the query, not a consumer, decides where to start (Spark refuses it too)",
    "kafka.key.deserializer": "keys are read as bytes; deserialize them with DataFrame "
    "operations (Spark refuses it too)",
    "kafka.value.deserializer": "values are read as bytes; deserialize them with DataFrame "
    "operations (Spark refuses it too)",
    "kafka.enable.auto.commit": "progress lives in the query's checkpoint, not in a consumer "
    "group (Spark refuses it too)",
    "kafka.interceptor.classes": "interceptors could change the records read (Spark refuses it "
    "too)",
}
"""Consumer settings Spark's Kafka source refuses, and why."""
_warned: set[tuple[str, ...]] = set()


def take_consumer_options(given: dict[str, str]) -> None:
    """Remove from ``given`` (lower-cased option names) Spark's Kafka consumer and broker
    options, warning once per set of them that they are ignored. Raises :class:`ConfigError`
    for one Spark refuses."""
    for name, why in REFUSED.items():
        if name in given:
            raise ConfigError(f"kafkatier option {name!r} is not supported: {why}", setting=name)
    taken = sorted(k for k in given if k.startswith("kafka.") or k in _BROKER)
    for key in taken:
        del given[key]
    names = tuple(_BROKER.get(k, k) for k in taken)
    if names and names not in _warned:
        _warned.add(names)
        log.warning(
            "kafkatier ignores Spark's Kafka consumer options %s: it reads the log dir, with no "
            "broker or consumer group",
            ", ".join(names),
        )
