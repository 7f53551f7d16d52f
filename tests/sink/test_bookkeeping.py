"""The sink's bookkeeping file and lock (no Spark needed)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.sink.append import Checked, to_wal
from kafkatier.sink.bookkeeping import (
    MAX_EPOCH,
    VERSION,
    InFlight,
    SinkState,
    bump_epoch,
    derive_producer_id,
    exclusive_lock,
    load_state,
    lock_path,
    rotate_producer_id,
    save_state,
    state_path,
)
from kafkatier.sink.pieces import PartitionSpans
from kafkatier.sink.wal import Wal
from kafkatier.storage.errors import CheckpointError, InvalidProducerEpochError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.verify.paths import verify_paths

states = st.builds(
    SinkState,
    sink_id=st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1),
    producer_id=st.integers(0, (1 << 62) - 1),
    producer_epoch=st.integers(-1, MAX_EPOCH - 1),
    query_id=st.none() | st.uuids().map(str),
    last_committed_batch=st.integers(-1, 1 << 40),
    inflight=st.none()
    | st.builds(
        InFlight,
        batch_id=st.integers(0, 1 << 40),
        commit_decided=st.booleans(),
        partitions=st.lists(st.tuples(st.text(min_size=1), st.integers(0, 1000))),
    ),
    producer_generation=st.integers(0, 1 << 20),
    previous_producer_id=st.none() | st.integers(0, (1 << 62) - 1),
    wal=st.none()
    | st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.integers(0, 4096),
            st.integers(0, 1 << 31),
            st.lists(
                st.tuples(st.integers(0, 2), st.integers(0, 1 << 40), st.integers(1, 1 << 30)),
                min_size=1,
                max_size=3,
            ),
        ),
        max_size=20,
    ).map(lambda parts: write_ahead(7, parts)),
)


def write_ahead(
    batch_id: int, parts: list[tuple[str, int, int, list[tuple[int, int, int]]]]
) -> Wal:
    """A write-ahead record of ``parts``: (topic, partition, first sequence, spans into three
    files), each span one record."""
    checked = [
        Checked(PartitionSpans(topic, p, len(spans),
                               [(f"/logs/wal.task-{f}", pos, n) for f, pos, n in spans]),
                first, None)
        for topic, p, first, spans in parts
    ]  # fmt: skip
    return to_wal(batch_id, 5, 2, checked)


@settings(max_examples=50, deadline=None)
@given(states)
def test_state_round_trips_through_json(state: SinkState) -> None:
    assert SinkState.from_json(state.to_json(), Path("x")) == state


def test_save_and_load(tmp_path: Path) -> None:
    fresh = load_state(tmp_path, "events")
    assert fresh.producer_epoch == -1 and fresh.last_committed_batch == -1
    assert fresh.producer_id == derive_producer_id("events")
    bump_epoch(fresh)
    fresh.inflight = InFlight(3, True, [("events", 1)])
    save_state(tmp_path, fresh)
    assert load_state(tmp_path, "events") == fresh
    assert not state_path(tmp_path, "events").with_suffix(".json.tmp").exists()


def test_the_write_ahead_record_keeps_every_partitions_spans(tmp_path: Path) -> None:
    parts = [("events", 3, 100, [(0, 0, 40), (1, 8, 50)]), ("audit", 0, 0, [(2, 4096, 10)])]
    wal = write_ahead(9, parts)
    assert wal.files == [f"/logs/wal.task-{f}" for f in range(3)] and wal.topics == [
        "events",
        "audit",
    ]
    assert [(w.topic, w.partition, w.first_sequence, w.records) for w in wal.partitions] == [
        ("events", 3, 100, 2), ("audit", 0, 0, 1)]  # fmt: skip
    assert wal.spans_of(wal.partitions[0]) == [
        ("/logs/wal.task-0", 0, 40),
        ("/logs/wal.task-1", 8, 50),
    ]
    assert wal.only(1).partitions == wal.partitions[:1]
    assert not wal.pending()  # none of its files exists
    save_state(tmp_path, SinkState("events", 5, 2, last_committed_batch=9, wal=wal))
    assert load_state(tmp_path, "events").wal == wal
    body = json.loads(state_path(tmp_path, "events").read_text())
    body["wal"]["spans"] = body["wal"]["spans"][:-1]
    state_path(tmp_path, "events").write_text(json.dumps(body))
    with pytest.raises(CheckpointError, match="partitions and spans do not match") as info:
        load_state(tmp_path, "events")
    assert info.value.context["file"] == str(state_path(tmp_path, "events"))


def test_a_damaged_file_is_an_error_naming_it(tmp_path: Path) -> None:
    state_path(tmp_path, "s").write_text('{"version": 1, "sink_id": "s"')
    with pytest.raises(CheckpointError, match="unreadable sink bookkeeping") as info:
        load_state(tmp_path, "s")
    assert str(state_path(tmp_path, "s")) in str(info.value)


def test_producer_ids_are_stable_distinct_and_valid() -> None:
    ids = {derive_producer_id(f"sink-{i}") for i in range(1000)}
    assert len(ids) == 1000 and all(0 <= i < 1 << 62 for i in ids)
    assert derive_producer_id("events") == derive_producer_id("events")


def v1_producer_id(sink_id: str) -> int:
    """How version 1 derived a sink's producer id (before ids could rotate)."""
    digest = hashlib.blake2b(sink_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << 62) - 1)


def test_generation_0_keeps_the_version_1_producer_ids() -> None:
    for sink_id in ["events", "s", "ünïcode", "x" * 300]:
        assert derive_producer_id(sink_id) == v1_producer_id(sink_id)
        assert derive_producer_id(sink_id, 0) == v1_producer_id(sink_id)


def test_generations_give_distinct_valid_ids() -> None:
    ids = [derive_producer_id("events", g) for g in range(1000)]
    assert len(set(ids)) == 1000 and all(0 <= i < 1 << 62 for i in ids)
    assert derive_producer_id("events", 7) == derive_producer_id("events", 7)
    assert derive_producer_id("events", 1) != derive_producer_id("other", 1)


def test_a_version_1_file_still_loads(tmp_path: Path) -> None:
    """As the previous version wrote it: no generation, no previous producer id."""
    body = {
        "version": 1, "sink_id": "events", "producer_id": v1_producer_id("events"),
        "producer_epoch": 4, "query_id": "q-1", "last_committed_batch": 17,
        "inflight": {"batch_id": 18, "commit_decided": True, "partitions": [["events", 3]]},
    }  # fmt: skip
    state_path(tmp_path, "events").write_text(json.dumps(body, indent=1, sort_keys=True))
    state = load_state(tmp_path, "events")
    assert state == SinkState(
        "events", v1_producer_id("events"), 4, "q-1", 17, InFlight(18, True, [("events", 3)])
    )
    assert (state.producer_generation, state.previous_producer_id) == (0, None)
    save_state(tmp_path, state)  # rewritten in the current version, same content
    assert json.loads(state_path(tmp_path, "events").read_text())["version"] == VERSION
    assert load_state(tmp_path, "events") == state


def test_an_unknown_version_is_an_error(tmp_path: Path) -> None:
    body = json.loads(SinkState("s", 7).to_json())
    body["version"] = VERSION + 1
    state_path(tmp_path, "s").write_text(json.dumps(body))
    with pytest.raises(CheckpointError, match="unknown version"):
        load_state(tmp_path, "s")


def test_exhausted_epoch_rotates_to_the_next_generation_id() -> None:
    """Kafka's rule: a client may hold epoch MAX_EPOCH - 1 at most; the next InitProducerId gets
    a new producer id at epoch 0 (TransactionMetadata.prepareProducerIdRotation)."""
    old_id = derive_producer_id("s")
    state = SinkState("s", old_id, producer_epoch=MAX_EPOCH - 2)
    bump_epoch(state)
    assert (state.producer_id, state.producer_epoch) == (old_id, MAX_EPOCH - 1)
    again = SinkState.from_json(state.to_json(), Path("x"))
    bump_epoch(state)
    assert state.producer_id == derive_producer_id("s", 1) != old_id
    assert (state.producer_epoch, state.producer_generation) == (0, 1)
    assert state.previous_producer_id == old_id
    bump_epoch(again)  # a crash before the save: the next start picks the same id
    assert again == state


def test_rotation_skips_a_generation_whose_id_is_the_old_one() -> None:
    state = SinkState("s", derive_producer_id("s", 1), MAX_EPOCH - 1)
    rotate_producer_id(state)
    assert state.producer_id == derive_producer_id("s", 2)
    assert state.producer_generation == 2


def test_old_id_is_recovered_first_with_the_fencing_epoch() -> None:
    state = SinkState("s", derive_producer_id("s"), MAX_EPOCH - 1)
    assert state.producers_to_recover(MAX_EPOCH - 1) == [(derive_producer_id("s"), MAX_EPOCH - 1)]
    bump_epoch(state)
    new_id = derive_producer_id("s", 1)
    assert state.producers_to_recover(0) == [(derive_producer_id("s"), MAX_EPOCH), (new_id, 0)]
    bump_epoch(state)  # the rotating instance died before its recovery: the next one still has it
    assert state.producers_to_recover(1) == [(derive_producer_id("s"), MAX_EPOCH), (new_id, 1)]


def test_rotation_refuses_to_forget_an_unrecovered_previous_id() -> None:
    state = SinkState("s", 5, MAX_EPOCH - 1, producer_generation=1, previous_producer_id=4)
    with pytest.raises(InvalidProducerEpochError, match="previous producer id"):
        bump_epoch(state)
    assert (state.producer_id, state.previous_producer_id) == (5, 4)


def test_lock_excludes_another_holder(tmp_path: Path) -> None:
    acquired = threading.Event()
    with exclusive_lock(tmp_path, "s"):
        fd = os.open(lock_path(tmp_path, "s"), os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)

        def other() -> None:
            with exclusive_lock(tmp_path, "s"):
                acquired.set()

        thread = threading.Thread(target=other)
        thread.start()
        assert not acquired.wait(0.3)
    thread.join(10)
    assert acquired.is_set()


def test_sink_files_keep_the_log_dir_valid(tmp_path: Path) -> None:
    """Files, not directories: a broker (and ``verify``) still sees a log dir."""
    LogDirectory(tmp_path).close()
    save_state(tmp_path, SinkState("events", 7))
    with exclusive_lock(tmp_path, "events"):
        pass
    assert verify_paths([tmp_path]) == []
    assert all(not p.is_dir() for p in tmp_path.glob("kafkatier-sink.*"))
