"""Input partitions planned by bytes (sink/source/split.py), as Spark's file sources plan them."""

from __future__ import annotations

import random

from kafkatier.sink.source.split import Sized, SplitSettings, cut, estimate, plan, split_size
from kafkatier.sink.source.task import ReadTask

MiB = 1 << 20


def rng(topic: str, partition: int, start: int, end: int, size: int) -> Sized:
    return Sized(ReadTask(log_dir="/logs", topic=topic, partition=partition, start=start,
                          end=end), size)  # fmt: skip


def covered(tasks: list[tuple[ReadTask, ...]]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Every partition's ranges across all tasks, merged where they touch."""
    found: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for task in tasks:
        for r in task:
            found.setdefault((r.topic, r.partition), []).append((r.start, r.end))
    merged = {}
    for tp, ranges in found.items():
        out: list[tuple[int, int]] = []
        for a, b in sorted(ranges):
            assert not out or a >= out[-1][1], f"{tp}: ranges overlap"
            if out and a == out[-1][1]:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
        merged[tp] = out
    return merged


def test_many_small_partitions_share_a_few_tasks() -> None:
    ranges = [rng("t", p, 0, 200, 25_000) for p in range(1024)]
    tasks = plan(ranges, SplitSettings(), cores=2)
    # 1,024 x (25 kB + 256 KiB open cost) / 2 cores is above 128 MiB: 128 MiB splits
    assert split_size(ranges, SplitSettings(), cores=2) == 128 * MiB
    assert len(tasks) == 3
    assert covered(tasks) == {("t", p): [(0, 200)] for p in range(1024)}
    spark_files = plan(ranges, SplitSettings(open_cost_bytes=4 * MiB), cores=2)
    assert 30 <= len(spark_files) <= 34  # Spark's 4 MiB a file
    cheap = plan(ranges, SplitSettings(open_cost_bytes=0), cores=2)
    assert len(cheap) == 2  # with free opens, one task per core


def test_a_large_partition_is_cut_into_ranges_of_about_the_split_size() -> None:
    big = rng("t", 0, 1000, 9_001_000, 1024 * MiB)
    tasks = plan([big], SplitSettings(), cores=2)
    assert len(tasks) == 8  # 1 GiB at 128 MiB a split
    assert covered(tasks) == {("t", 0): [(1000, 9_001_000)]}
    assert len(plan([big], SplitSettings(max_partition_bytes=256 * MiB), cores=2)) == 4


def test_min_partitions_raises_the_task_count() -> None:
    """Spark's Kafka source: at least ``minPartitions`` tasks, large ranges cut by offsets,
    whatever the open cost (it made 8 tasks of 16 asked with Spark's 4 MiB)."""
    ranges = [rng("t", p, 0, 1000, 2 * MiB) for p in range(8)]
    assert len(plan(ranges, SplitSettings(), cores=2)) == 2
    assert len(plan(ranges, SplitSettings(min_partitions=16, open_cost_bytes=4 * MiB),
                    cores=2)) == 16  # fmt: skip
    assert len(plan(ranges, SplitSettings(min_partitions=16, open_cost_bytes=0), cores=2)) == 16
    tiny = [rng("t", 0, 0, 100, 5_000)]  # one small partition: cut as asked (Spark's too)
    tasks = plan(tiny, SplitSettings(min_partitions=10), cores=2)
    assert len(tasks) == 10 and covered(tasks) == {("t", 0): [(0, 100)]}
    few = [rng("t", 0, 0, 3, 5_000)]  # never below one offset a task
    assert len(plan(few, SplitSettings(min_partitions=10), cores=2)) == 3
    many = [rng("t", p, 0, 200, 25_000) for p in range(1024)]  # small partitions still share
    assert 16 <= len(plan(many, SplitSettings(min_partitions=16), cores=2)) <= 18


def test_random_plans_have_at_least_min_partitions_tasks() -> None:
    random.seed(7)
    for _ in range(200):
        wanted = random.randint(1, 64)
        ranges = [rng("t", p, 0, 10_000, random.randint(1, 300 * MiB))
                  for p in range(random.randint(1, 40))]  # fmt: skip
        settings = SplitSettings(min_partitions=wanted,
                                 open_cost_bytes=random.choice([0, 256 << 10, 4 * MiB]))
        assert len(plan(ranges, settings, cores=random.randint(1, 8))) >= wanted


def test_a_range_is_never_cut_below_one_offset() -> None:
    assert len(cut(rng("t", 0, 5, 8, 100 * MiB), MiB)) == 3
    assert [(p.task.start, p.task.end) for p in cut(rng("t", 0, 5, 8, 100 * MiB), MiB)] == [
        (5, 6), (6, 7), (7, 8)]  # fmt: skip


def test_each_task_reads_its_ranges_in_partition_and_offset_order() -> None:
    ranges = [rng("b", 1, 0, 10, 10), rng("a", 2, 0, 10, 30), rng("a", 0, 5, 9, 20)]
    [task] = plan(ranges, SplitSettings(), cores=1)
    assert [(r.topic, r.partition) for r in task] == [("a", 0), ("a", 2), ("b", 1)]


def test_random_plans_cover_every_range_exactly_once() -> None:
    random.seed(5)
    for _ in range(200):
        ranges = []
        for p in range(random.randint(1, 40)):
            start = random.randint(0, 1000)
            end = start + random.randint(1, 5000)
            ranges.append(rng("t", p, start, end, random.randint(0, 300 * MiB)))
        settings = SplitSettings(min_partitions=random.choice([None, 1, 7, 100]),
                                 max_partition_bytes=random.choice([MiB, 64 * MiB, 128 * MiB]),
                                 open_cost_bytes=random.choice([0, 4 * MiB]))  # fmt: skip
        tasks = plan(ranges, settings, cores=random.randint(1, 8))
        assert covered(tasks) == {("t", r.task.partition): [(r.task.start, r.task.end)]
                                  for r in ranges}  # fmt: skip


def test_estimate_is_in_proportion_to_the_offsets_covered() -> None:
    task = rng("t", 0, 250, 750, 0).task
    assert estimate(task, 1000, 0, 1000) == 500
    assert estimate(task, 1000, 250, 750) == 1000
    assert estimate(task, 1000, 0, 0) == 1000  # an empty span never divides by zero


def test_max_records_caps_the_offsets_of_every_task() -> None:
    """Spark's Kafka source's ``maxRecordsPerPartition``: a range cut into pieces of at most
    that many offsets, small ranges sharing a task only up to it, every offset still read once;
    with ``minPartitions`` the larger of the two asks."""
    ranges = [rng("t", 0, 100, 1100, 4 * MiB)] + [rng("t", p, 0, 40, 1_000) for p in range(1, 9)]
    tasks = plan(ranges, SplitSettings(max_records=300), cores=2)
    assert all(sum(r.end - r.start for r in task) <= 300 for task in tasks)
    assert len(tasks) >= -(-(1000 + 8 * 40) // 300)
    assert covered(tasks) == {("t", 0): [(100, 1100)], **{("t", p): [(0, 40)] for p in range(1, 9)}}
    assert any(len(task) > 1 for task in tasks)  # the small ranges still share tasks
    both = plan(ranges, SplitSettings(max_records=10_000, min_partitions=12), cores=2)
    assert len(both) >= 12
    assert plan(ranges, SplitSettings(max_records=10_000), cores=2) == plan(
        ranges, SplitSettings(), cores=2
    )
