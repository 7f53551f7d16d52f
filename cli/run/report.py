"""The at-a-glance report ``kafkatier run`` prints at the end."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafkatier.cli.run.job import JobStats
from kafkatier.cli.run.verify import Check
from kafkatier.storage.cleaner.clean_pass import PartitionSummary
from kafkatier.tiering.sidecar.status import PartitionStatus
from kafkatier.tiering.sidecar.tierer import PartitionPass, PassResult

_COUNTERS = [f.name for f in dataclasses.fields(PartitionPass)
             if f.name not in ("topic", "partition", "error")]  # fmt: skip
"""What a sidecar pass counts (any counter added later is shown too, by its name)."""
_COMPACTION = ("remote_compactions", "remote_records_removed", "remote_bytes_before_compaction",
               "remote_bytes_after_compaction")  # fmt: skip


@dataclass
class Outcome:
    """Everything the report shows."""

    job: JobStats
    passes: list[PassResult] = field(default_factory=list)
    statuses: list[PartitionStatus] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    cleaner: list[PartitionSummary] = field(default_factory=list)
    bytes_written: int = 0
    wall_seconds: float = 0.0
    serve_lines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def pass_totals(passes: Sequence[PassResult], topic: str | None = None) -> dict[str, int]:
    totals = dict.fromkeys(_COUNTERS, 0)
    for result in passes:
        for p in result.partitions:
            if topic is None or p.topic == topic:
                for name in _COUNTERS:
                    totals[name] += int(getattr(p, name))
    return totals


def _topic_lines(outcome: Outcome, topic: str) -> list[str]:
    mine = [s for s in outcome.statuses if s.topic == topic]
    local = sum(s.local_bytes for s in mine)
    remote = sum(s.remote_bytes for s in mine)
    t = pass_totals(outcome.passes, topic)
    shown = ("uploaded_segments", "uploaded_bytes", "local_segments_deleted",
             "local_bytes_deleted", "remote_segments_expired", "skipped", *_COMPACTION)  # fmt: skip
    extra = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in t.items()
                      if value and name not in shown)  # fmt: skip
    lines = [
        f"  {topic}: {len(mine)} partitions; local {human(local)} in "
        f"{sum(s.local_segments for s in mine)} segments, remote {human(remote)} in "
        f"{sum(s.remote_segments for s in mine)} segments",
        f"    sidecar: {t['uploaded_segments']} segments uploaded ({human(t['uploaded_bytes'])}), "
        f"{t['local_segments_deleted']} local segments deleted "
        f"({human(t['local_bytes_deleted'])} freed), {t.get('skipped', 0)} partition passes "
        "skipped as quiet",
    ]  # fmt: skip
    lines.append(f"    remote retention: {t['remote_segments_expired']} segments expired")
    if t.get(_COMPACTION[0]):
        lines.append(f"    remote compaction: {t[_COMPACTION[0]]} cleanings removed "
                     f"{t[_COMPACTION[1]]} older records")  # fmt: skip
    if extra:
        lines.append(f"    also: {extra}")
    cleaned = [c for c in outcome.cleaner if c.topic == topic]
    if cleaned:
        lines.append(
            f"    log cleaner: {sum(c.records_removed for c in cleaned)} older records removed, "
            f"{human(sum(c.bytes_before for c in cleaned))} -> "
            f"{human(sum(c.bytes_after for c in cleaned))}"
        )
    lines += [f"    log cleaner: {c.topic}-{c.partition} not cleaned: {c.error}"
              for c in cleaned if c.error]  # fmt: skip
    return lines


def render(outcome: Outcome, topics: tuple[str, str], stopped_by: str) -> str:
    job = outcome.job
    rate = job.events / job.seconds if job.seconds else 0.0
    byte_rate = outcome.bytes_written / job.seconds if job.seconds else 0.0
    rest = job.seconds - job.first_seconds
    steady = (job.events - job.first_events) / rest if rest > 0 else 0.0
    out = [
        "",
        "kafkatier run: report",
        f"  stream: {job.batches} micro-batches ({stopped_by}), {job.events} events -> "
        f"{topics[0]}, {job.states} user states -> {topics[1]}",
        f"  throughput: {rate:,.0f} events/s, {human(byte_rate)}/s "
        f"written ({job.seconds:.1f} s in micro-batches; {steady:,.0f} events/s after the "
        f"first); {outcome.wall_seconds:.1f} s in all",
        f"  sidecar passes: {len(outcome.passes)}",
    ]  # fmt: skip
    for topic in topics:
        out.extend(_topic_lines(outcome, topic))
    out.extend(outcome.serve_lines)
    out.append("  checks:")
    for check in outcome.checks:
        out.append(f"    [{'ok' if check.ok else 'FAIL'}] {check.name}: {check.detail}")
    if not outcome.checks:
        out.append("    (run.verify=false: nothing checked)")
    out.append("RESULT: " + ("PASS" if outcome.ok else "FAIL"))
    return "\n".join(out)
