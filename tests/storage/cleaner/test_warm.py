"""The cleaner's kernels compiled ahead of the first compaction (storage/cleaner/warm.py)."""

from __future__ import annotations

from kafkatier.storage.cleaner.warm import warm_up, warming


def test_warm_up_compacts_a_log_of_every_batch_kind() -> None:
    result = warm_up()
    assert result.cleaned
    assert result.records_removed > 0
    assert result.bytes_after < result.bytes_before


def test_warming_starts_a_child_and_always_reaps_it() -> None:
    with warming() as child:
        assert child is not None and child.poll() is None  # compiling, or loading the cache
    assert child.returncode is not None  # killed or finished, and waited for: no zombie
