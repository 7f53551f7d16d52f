"""The names a sink writes under, checked as Kafka checks them: its topics (``topic=`` or the
'topic' column's values) and its sink id, which names its producer and its bookkeeping file."""

from __future__ import annotations

from kafkatier.sink.schema import SinkSchemaError
from kafkatier.storage.checkpoint.checkpoint_file import TOPIC_NAME_RULE, is_valid_topic_name
from kafkatier.storage.config.internal_topics import not_producible


def check_topic(topic: str, *, column: bool) -> None:
    """Refuse a topic no producer may write: an illegal name, or an internal topic (brokers
    refuse both). ``column``: the name is a 'topic' column's value, not ``topic=``."""
    if not is_valid_topic_name(topic):
        if column:
            raise SinkSchemaError(
                f"the 'topic' column names an illegal Kafka topic {topic!r}: {TOPIC_NAME_RULE}; "
                "fix: filter or map those rows before the sink", topic=topic)  # fmt: skip
        raise SinkSchemaError(f"illegal Kafka topic name {topic!r}: {TOPIC_NAME_RULE}", topic=topic)
    if (why := not_producible(topic)) is not None:
        raise SinkSchemaError(why, topic=topic)


def sink_id_of(topic: str | None, sink_id: str | None) -> str:
    """The sink id: ``sink_id``, by default the topic; refused where it cannot name a file."""
    chosen = sink_id or topic
    if not chosen or "/" in chosen or chosen.startswith("."):
        why = ("a sink routing by the 'topic' column needs sink_id='name'" if not chosen
               else f"the sink id{'' if sink_id else ' (the topic by default)'} may not "
               "start with '.'; fix: pass sink_id='name'")  # fmt: skip
        raise SinkSchemaError(
            f"bad sink id {chosen!r}: {why} (no '/'); it names the producer and its "
            "bookkeeping file", sink_id=chosen,
        )  # fmt: skip
    return chosen
