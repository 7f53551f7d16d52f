"""The catalog: topics and partitions of several log dirs, topic ids from partition.metadata
(a rewritten file is read again), a stable derived id where a log dir predates topic ids, and
KRaft's metadata log left out."""

from __future__ import annotations

import uuid
from pathlib import Path

from kafkatier.serve.catalog import Catalog
from kafkatier.storage.checkpoint.metadata import (
    PartitionMetadataFile,
    new_topic_id,
    uuid_from_str,
)


def test_topics_partitions_and_ids(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    dirs = ((one, "t-0"), (two, "t-1"), (one, "old-0"), (one, "__cluster_metadata-0"))
    for log_dir, name in dirs:
        (log_dir / name).mkdir(parents=True)
    first = new_topic_id()
    for log_dir, name in ((one, "t-0"), (two, "t-1")):
        PartitionMetadataFile(log_dir / name / "partition.metadata").write(first)
    catalog = Catalog((one, two))
    topics = catalog.topics()
    assert sorted(topics) == ["old", "t"]
    assert topics["t"].partitions == {0: one, 1: two}
    assert topics["t"].topic_id == uuid.UUID(bytes=uuid_from_str(first))
    assert topics["old"].topic_id == Catalog((one,)).topics()["old"].topic_id  # stable
    second = new_topic_id()  # the topic deleted and created again
    for log_dir, name in ((one, "t-0"), (two, "t-1")):
        PartitionMetadataFile(log_dir / name / "partition.metadata").write(second)
    assert catalog.topics()["t"].topic_id == uuid.UUID(bytes=uuid_from_str(second))
