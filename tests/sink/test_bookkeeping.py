"""The sink's bookkeeping file and lock (no Spark needed)."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.sink.bookkeeping import (
    MAX_EPOCH,
    InFlight,
    SinkState,
    bump_epoch,
    derive_producer_id,
    exclusive_lock,
    load_state,
    lock_path,
    save_state,
    state_path,
)
from kafkatier.storage.errors import CheckpointError, InvalidProducerEpochError
from kafkatier.storage.log_dir import LogDirectory
from kafkatier.storage.verify import verify_paths

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
)


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


def test_a_damaged_file_is_an_error_naming_it(tmp_path: Path) -> None:
    state_path(tmp_path, "s").write_text('{"version": 1, "sink_id": "s"')
    with pytest.raises(CheckpointError, match="unreadable sink bookkeeping") as info:
        load_state(tmp_path, "s")
    assert str(state_path(tmp_path, "s")) in str(info.value)


def test_producer_ids_are_stable_distinct_and_valid() -> None:
    ids = {derive_producer_id(f"sink-{i}") for i in range(1000)}
    assert len(ids) == 1000 and all(0 <= i < 1 << 62 for i in ids)
    assert derive_producer_id("events") == derive_producer_id("events")


def test_epoch_exhaustion_is_an_error() -> None:
    state = SinkState("s", 1, producer_epoch=MAX_EPOCH - 2)
    bump_epoch(state)
    with pytest.raises(InvalidProducerEpochError, match="new sink_id"):
        bump_epoch(state)


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
