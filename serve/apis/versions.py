"""The API keys and versions ``kafkatier serve`` answers: what ApiVersions tells clients.

Only what is implemented is listed. Produce is answered (with an error per partition: serve is
read-only), so producers get a clear error rather than a broker that "does not support"
producing. The group APIs (classic protocol) are served from the oldest version kio has (Kafka
4's) up to the last one before topic ids (OffsetCommit/OffsetFetch v10 name topics by id, and
belong with KIP-848's consumer protocol, which is not served). Fetch v13+ names topics by id
(``partition.metadata``); Kafka 4.0 dropped Fetch v0-3, and kio (generated from Kafka 4's
specs) has none of them. OffsetForLeaderEpoch v2-4: kio has no older ones either. SaslHandshake
and SaslAuthenticate are listed on every listener, as Kafka lists them; they are exchanged before
authentication (kafkatier.serve.authentication), and answered ILLEGAL_SASL_STATE afterwards or on
a listener without SASL (``apis/sasl``).
"""

from __future__ import annotations

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 13, 14, 15, 16
OFFSET_FOR_LEADER_EPOCH, SASL_HANDSHAKE, SASL_AUTHENTICATE = 23, 17, 36
DESCRIBE_CONFIGS, DESCRIBE_CLUSTER = 32, 60

SUPPORTED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 9),
    FETCH: (4, 16),
    LIST_OFFSETS: (1, 9),
    METADATA: (0, 12),
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (1, 9),
    FIND_COORDINATOR: (0, 6),
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    SASL_HANDSHAKE: (0, 1),
    API_VERSIONS: (0, 4),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    SASL_AUTHENTICATE: (0, 2),
    DESCRIBE_CONFIGS: (1, 4),
    DESCRIBE_CLUSTER: (0, 2),
}
"""API key -> (min, max) version served."""


def supports(api_key: int, version: int) -> bool:
    low, high = SUPPORTED.get(api_key, (0, -1))
    return low <= version <= high
