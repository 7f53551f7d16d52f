"""SIGKILL a cleaning process at every step of the swap protocol (kafka-format.md §11.4) and at
random moments; reopening must give, for every group of segments, either all the old segments or
the cleaned one, a log that verifies clean, and the same latest committed value per key."""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest
from cleaner_fixtures import (
    TOPIC,
    ManualClock,
    append,
    committed_records,
    compact_config,
    latest_by_key,
    open_log,
    verify_compacted,
)

from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.cleaner.kernels.offset_map import OffsetMap
from kafkatier.storage.cleaner.segment_store import CRASH_ENV

Layout = list[tuple[int, bytes]]
_DURATION: list[float] = []  # how long an uninterrupted cleaning process takes here
CONFIG = compact_config(segment_bytes=4000, delete_retention_ms=1000)


def _layout(path: Path) -> Layout:
    part = path / f"{TOPIC}-0"
    logs = sorted(part.glob("*.log"))
    return [(int(p.name.split(".")[0]), p.read_bytes()) for p in logs]


def _build(path: Path) -> None:
    """Four 1.9 KB segments (so two groups of two), keys updated across them, a tombstone,
    transactions committed and aborted; the first record of every segment is a key that never
    recurs, so each group's cleaned segment ends where the group did."""
    clock = ManualClock()
    log_dir, log = open_log(path, CONFIG, clock)
    for segment in range(4):
        append(log, [(b"anchor%d" % segment, b"x")], timestamp=clock.now)
        for i in range(20):
            append(log, [(b"k%d" % (i % 9), b"s%d-%d" % (segment, i))], timestamp=clock.now)
        append(log, [(b"k3", None)], timestamp=clock.now)
        append(log, [(b"k4", b"t%d" % segment)], timestamp=clock.now, producer=(9, 0, segment),
               transactional=True)  # fmt: skip
        log.write_txn_marker(9, 0, commit=segment % 2 == 0)
        append(log, [(b"tail%d" % segment, b"y")], timestamp=clock.now)
        log.roll()
    log_dir.close()


def _clean(path: Path, crash_after: int | None, delay: float | None) -> None:
    """Child process body: open, compact, close; killed by the hook or by the parent."""
    if crash_after is not None:
        os.environ[CRASH_ENV] = str(crash_after)
    clock = ManualClock()
    log_dir, log = open_log(path, CONFIG, clock)
    result = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    log_dir.close()
    os._exit(0 if result.cleaned else 3)


def _run(path: Path, crash_after: int | None = None, delay: float | None = None) -> int | None:
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_clean, args=(path, crash_after, delay))
    child.start()
    if delay is not None:
        child.join(delay)
        if child.is_alive():
            os.kill(child.pid or 0, signal.SIGKILL)
    child.join(60)
    return child.exitcode


def _groups(old: Layout, new: Layout) -> list[tuple[Layout, Layout]]:
    """Pair each cleaned segment with the old segments it replaced (by base offset range)."""
    bounds = [b for b, _ in new] + [2**63]
    pairs = []
    for i, (base, data) in enumerate(new):
        olds = [(b, d) for b, d in old if base <= b < bounds[i + 1]]
        pairs.append((olds, [(base, data)]))
    return pairs


def _is_old_or_new_per_group(found: Layout, old: Layout, new: Layout) -> bool:
    rest = list(found)
    for old_group, new_group in _groups(old, new):
        for candidate in (old_group, new_group):
            if rest[: len(candidate)] == candidate:
                rest = rest[len(candidate) :]
                break
        else:
            return False
    return not rest


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Layout, Layout, dict]:
    warm = OffsetMap(24 * 16)  # compile the map's kernels once here, not in every child
    warm.put(b"a", 1)
    assert warm.get(b"a") == 1
    base = tmp_path_factory.mktemp("crash-base")
    _build(base)
    clock = ManualClock()
    log_dir, log = open_log(base, CONFIG, clock)
    latest = latest_by_key(committed_records(log))
    log_dir.close()
    old = _layout(base)
    done = tmp_path_factory.mktemp("crash-done")
    shutil.copytree(base, done, dirs_exist_ok=True)
    started = time.monotonic()
    assert _run(done) == 0
    _DURATION.append(time.monotonic() - started)
    new = _layout(done)
    assert verify_compacted(done) == []
    return base, old, new, latest


def _check_reopened(path: Path, old: Layout, new: Layout, latest: dict, what: str) -> str:
    clock = ManualClock()
    log_dir, log = open_log(path, CONFIG, clock)
    assert latest_by_key(committed_records(log)) == latest, what
    log_dir.close()
    assert verify_compacted(path) == [], what
    found = _layout(path)
    assert _is_old_or_new_per_group(found, old, new), what
    return "old" if found == old else "new" if found == new else "mixed-groups"


def test_reference_cleaning_has_two_groups(reference: tuple[Path, Layout, Layout, dict]) -> None:
    _, old, new, _ = reference
    assert len(old) == 5 and len(new) == 3  # two cleaned groups + the empty active segment
    assert all(len(olds) == 2 for olds, _ in _groups(old, new)[:2])


def test_kill_after_every_step(
    reference: tuple[Path, Layout, Layout, dict], tmp_path: Path
) -> None:
    base, old, new, latest = reference
    outcomes = []
    step = 1
    while True:
        work = tmp_path / f"step{step}"
        shutil.copytree(base, work)
        code = _run(work, crash_after=step)
        if code == 0:
            break  # the hook never fired: every step has been tried
        assert code == -signal.SIGKILL
        outcomes.append(_check_reopened(work, old, new, latest, f"killed after step {step}"))
        shutil.rmtree(work)
        step += 1
    assert step > 36  # two groups, each: data, finish, 4 + 8 + 4 renames, fsync
    assert outcomes[0] == "old" and outcomes[-1] == "new" and "mixed-groups" in outcomes


def test_kill_at_random_moments(
    reference: tuple[Path, Layout, Layout, dict], tmp_path: Path
) -> None:
    base, old, new, latest = reference
    rng = random.Random(20261121)
    for attempt in range(6):
        work = tmp_path / f"random{attempt}"
        shutil.copytree(base, work)
        _run(work, delay=rng.uniform(0.0, _DURATION[0]))
        _check_reopened(work, old, new, latest, f"random kill {attempt}")


def test_crash_hook_env_is_read_per_cleaning(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkatier.storage.cleaner.segment_store import _CrashHook

    monkeypatch.setenv(CRASH_ENV, "3")
    assert _CrashHook().target == 3
    monkeypatch.delenv(CRASH_ENV)
    assert _CrashHook().target == 0


def _build_superseded_tail(path: Path) -> None:
    """Segments A (keys a0..a18, a0 twice), B (keys k0..k19) and C (k0..k19 again, twice):
    A and B form one group, C another; every record of B is superseded by C, so A+B's cleaned
    segment ends before B's base offset."""
    clock = ManualClock()
    log_dir, log = open_log(path, CONFIG, clock)
    for i in range(20):
        append(log, [(b"a%d" % (i % 19), b"x" * 20)], timestamp=clock.now)  # A changes too
    log.roll()
    for i in range(20):
        append(log, [(b"k%d" % i, b"old" * 7)], timestamp=clock.now)
    log.roll()
    for i in range(40):
        append(log, [(b"k%d" % (i % 20), b"new%d" % i + b"-" * 10)], timestamp=clock.now)
    log.roll()
    log_dir.close()


def test_kafkas_swap_window_leaves_only_superseded_records(tmp_path: Path) -> None:
    """Kafka's loader completes a ``.swap`` over [its base, its next offset) only (§9.3), so a
    kill after the ``.swap`` rename but before the old segments' ``.deleted`` renames keeps an
    old segment lying past the cleaned one's end: only records superseded later in the log,
    which a reader sees as before and the next cleaning removes. Every other step gives the old
    or the new segments."""
    base = tmp_path / "base"
    _build_superseded_tail(base)
    warm = OffsetMap(24 * 16)
    warm.put(b"a", 1)
    old = _layout(base)
    clock = ManualClock()
    log_dir, log = open_log(base, CONFIG, clock)
    latest = latest_by_key(committed_records(log))
    log_dir.close()
    done = tmp_path / "done"
    shutil.copytree(base, done)
    assert _run(done) == 0
    new = _layout(done)
    assert len(old) == 4 and len(new) == 3 and new[0][0] == 0 and new[1][0] == old[2][0]
    stale_window = 0
    step = 1
    while True:
        work = tmp_path / f"step{step}"
        shutil.copytree(base, work)
        if _run(work, crash_after=step) == 0:
            break
        log_dir, log = open_log(work, CONFIG, clock)
        assert latest_by_key(committed_records(log)) == latest, step
        log_dir.close()
        assert verify_compacted(work) == [], step
        found = _layout(work)
        if found not in (old, new) and not _is_old_or_new_per_group(found, old, new):
            assert found == [new[0], old[1], *old[2:]], step  # cleaned A+B, stale B, old C
            stale_window += 1
            log_dir, log = open_log(work, CONFIG, clock)
            compact_log(log, now_ms=clock.now, first_dirty_offset=None)
            assert latest_by_key(committed_records(log)) == latest
            assert old[1][0] not in [s.base_offset for s in log.segments]
            log_dir.close()
        shutil.rmtree(work)
        step += 1
    assert stale_window > 0
