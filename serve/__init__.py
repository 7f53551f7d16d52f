"""``kafkatier serve``: the Kafka wire protocol over the log dirs, for unmodified Kafka clients.

One broker (node id 0), read-only: ApiVersions, Metadata, DescribeCluster, DescribeConfigs,
ListOffsets and Fetch answer from the partition files (record batches go out as the bytes on
disk, never re-encoded); consumer groups (the classic protocol) are coordinated here, with
their committed offsets in ``__consumer_offsets`` in the server's own log dir (``group/``);
Produce gets Kafka's error code for a refused write. One asyncio event loop; disk and remote
reads run in a thread pool. Messages are encoded and decoded with ``kio`` (typed classes
generated from Kafka's JSON specs).

Layout, bottom up: ``config`` (the properties file), ``protocol`` (kio glue: versioned schemas,
request headers, response frames), ``framing`` (size-prefixed frames off a socket), ``catalog``
(topics, partitions and topic ids of the log dirs), ``partition_view`` (what one partition
serves: bounds, batches, aborted transactions, offsets by time), ``group/`` (the group
coordinator and the committed offsets), ``context`` (what handlers share), ``apis/`` (one
module per API family), ``dispatch`` (API key -> handler), ``connection`` (one client's
request/response loop) and ``server`` (listeners, lifecycle); ``remote_view`` keeps the
remote readers (what the last segments said: ``storage.log.tail_cache``).
"""
