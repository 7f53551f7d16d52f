"""The Arrow schema of decoded records: Spark's Kafka source's rows.

Its own module, apart from the decoders (``table``), so that code that only names the schema
(the Spark source's planning on the driver, which never decodes) does not load numba's kernels.
"""

from __future__ import annotations

import pyarrow as pa

HEADER_ENTRY = pa.struct([("key", pa.string()), ("value", pa.binary())])
SPARK_KAFKA_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.field("element", HEADER_ENTRY))),
    ]
)
"""Spark's Kafka source schema with includeHeaders (KafkaRecordToRowConverter), as Spark's
ArrowUtils maps it: TimestampType is timestamp[us] with the session time zone (UTC here), list
elements are named "element", and ``headers`` is null for a record without headers."""
