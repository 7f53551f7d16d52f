"""kafkatier.storage.arrow: Kafka record batches v2 to and from Arrow tables in Spark's Kafka
source schema, and the bulk Arrow paths into and out of a partition log.

``codec`` is the entry point (``encode_arrow``, ``decode_arrow``); ``log`` appends and reads a
:class:`~kafkatier.storage.log.log.Log` in Arrow. Below them: input validation (``columns``),
batching and framing around numba kernels (``encode``/``encode_kernels``,
``decode``/``decode_kernels``), output buffers (``buffers``) and the output table (``table``).
"""
