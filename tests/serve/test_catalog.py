"""The catalog: topics and partitions of several log dirs, topic ids from partition.metadata
(a rewritten file is read again), a stable derived id where a log dir predates topic ids, and
KRaft's metadata log left out."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from kafkatier.serve import catalog as catalog_module
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


def test_a_log_dir_is_listed_again_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup re-listed every log dir: each request cost what the log dir holds. Now a
    listing is kept while the directory's mtime stays, and trusted only once taken more than
    :data:`catalog.RACY_NS` after that mtime (a change in the same clock tick keeps it)."""
    listed: list[Path] = []
    real = catalog_module._partitions_of
    monkeypatch.setattr(catalog_module, "_partitions_of",
                        lambda d: listed.append(d) or real(d))  # fmt: skip
    (tmp_path / "a-0").mkdir()
    tick = time.time_ns()
    os.utime(tmp_path, ns=(tick, tick))
    catalog = Catalog((tmp_path,))
    assert sorted(catalog.topics()) == ["a"]
    (tmp_path / "b-0").mkdir()
    os.utime(tmp_path, ns=(tick, tick))  # made in the same tick of a coarse clock: same mtime
    assert sorted(catalog.topics()) == ["a", "b"]
    old = time.time_ns() - 10 * catalog_module.RACY_NS
    os.utime(tmp_path, ns=(old, old))  # as a log dir whose topics were made long ago
    catalog.topics()
    before = len(listed)
    for _ in range(5):
        assert sorted(catalog.topics()) == ["a", "b"]
    assert len(listed) == before  # a stat each, no listing
    assert catalog.topics()["a"] is catalog.topics()["a"]  # nor a partition's work
    (tmp_path / "a-1").mkdir()
    assert catalog.topics()["a"].partitions == {0: tmp_path, 1: tmp_path}
    (tmp_path / "a-1").rmdir()
    (tmp_path / "c-0").mkdir()  # a new mtime: listed again
    assert sorted(catalog.topics()) == ["a", "b", "c"]
    (tmp_path / "a-0").rename(tmp_path / "a-0.0123456789abcdef0123456789abcdef-delete")
    assert sorted(catalog.topics()) == ["b", "c"]
