"""kafkatier.sink.source: the ``kafkatier`` Spark data source, ``spark.read.format("kafkatier")``
and ``readStream``: Kafka-format partitions read back as Spark's Kafka source reads a broker.

On the driver: ``datasource`` (Spark's DataSource API), ``options`` and ``plan``; each ``task``
is read on an executor by ``read``, from the local files (``local``) or, for a tiered topic,
from the remote store joined with the local files (``joined``, settings in ``remote``).
"""
