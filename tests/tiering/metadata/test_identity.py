"""Where a partition incarnation lives in the store, and which folder names are which."""

from __future__ import annotations

import base64
import uuid

import pytest

from kafkatier.storage.checkpoint.metadata import new_topic_id
from kafkatier.tiering.metadata.identity import (
    RemotePartition,
    parse_partition_folder,
    parse_topic_folder,
)
from kafkatier.tiering.metadata.manifest import MANIFEST_NAME, PartitionManifest, manifest_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.store.object_store import FsspecStore


def topic_id(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


DASHED = topic_id(b"\xfb\xff\xbf" * 5 + b"\x00")  # URL-safe base64 may hold "-" and "_"


@pytest.mark.parametrize(("name", "expected"), [
    (f"orders-{DASHED}", ("orders", DASHED)),
    (f"my-topic-{DASHED}", ("my-topic", DASHED)),
    (f"a-{topic_id(uuid.UUID(int=7).bytes)}", ("a", topic_id(uuid.UUID(int=7).bytes))),
    ("orders-12", None),  # a partition folder of the layout before topic ids
    ("orders-4-delete", None),
    (f"-{DASHED}", None),  # no topic name
    (f"bad name-{DASHED}", None),  # not a legal topic name
    (f"orders{DASHED}", None),  # no dash before the id
    ("orders-" + "9" * 22, None),  # not the text of any 16 bytes (its last 2 bits are set)
])  # fmt: skip
def test_topic_folder_names(name: str, expected: tuple[str, str] | None) -> None:
    assert "-" in DASHED and "_" in DASHED
    assert parse_topic_folder(name) == expected


def test_partition_folder_names() -> None:
    assert [parse_partition_folder(n) for n in ("0", "12", "2147483647")] == [0, 12, 2**31 - 1]
    bad = ("2147483648", "-1", "x", "", "\u0661")  # the last: a digit, not an ASCII one
    assert [parse_partition_folder(n) for n in bad] == [None] * len(bad)


def test_prefixes_of_both_layouts() -> None:
    tid = new_topic_id()
    assert RemotePartition.of("orders", 3, tid).prefix == f"orders-{tid}/3/"
    assert RemotePartition.of("orders", 3, "").prefix == "orders-3/"  # no id: by name
    assert RemotePartition("orders", 3, tid, legacy=True).prefix == "orders-3/"
    assert str(RemotePartition.of("orders", 3, tid)) == f"orders-3 (topic id {tid})"


def test_locate_uses_a_legacy_manifest_of_the_same_id_only(tmp_path) -> None:
    store = FsspecStore(f"file://{tmp_path}")
    manifests = ManifestStore(store)
    mine, other = new_topic_id(), new_topic_id()
    assert manifests.locate("t", 0, mine) == RemotePartition("t", 0, mine)  # nothing yet: own
    assert manifests.locate("t", 0, "") == RemotePartition("t", 0, "", legacy=True)
    store.put_bytes(f"t-0/{MANIFEST_NAME}", PartitionManifest("t", 0, topic_id=mine).to_bytes())
    assert manifests.locate("t", 0, mine) == RemotePartition("t", 0, mine, legacy=True)
    assert manifests.locate("t", 0, other) == RemotePartition("t", 0, other)  # another topic's
    manifests.update(RemotePartition("t", 0, mine), lambda m: True)
    assert manifests.locate("t", 0, mine) == RemotePartition("t", 0, mine)  # its own wins
    assert manifest_key(RemotePartition("t", 0, mine)) == f"t-{mine}/0/{MANIFEST_NAME}"
