"""The cleaner's kernels compiled ahead of the first compaction (storage/cleaner/warm.py)."""

from __future__ import annotations

from pathlib import Path

from kafkatier.storage.cleaner.warm import warm_up, warming


def test_warm_up_compacts_a_log_of_every_batch_kind() -> None:
    result = warm_up()
    assert result.cleaned
    assert result.records_removed > 0
    assert result.bytes_after < result.bytes_before


def test_warming_starts_a_child_and_always_reaps_it() -> None:
    with warming() as child:
        assert child is not None and child.poll() is None  # compiling, or loading the cache
        scratch = Path(child.args[-1])  # type: ignore[index]
        assert scratch.is_dir() and scratch.name.startswith("kafkatier-warm-")
    assert child.returncode is not None  # killed or finished, and waited for: no zombie
    assert not scratch.exists()  # killed mid-way, it could not remove its log: warming did


def test_a_finished_warm_up_leaves_its_directory_to_the_caller(tmp_path: Path) -> None:
    assert warm_up(tmp_path).cleaned
    assert (tmp_path / "warm-up-0").is_dir()  # the caller's to remove (warming does)
