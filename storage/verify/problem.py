"""What ``kafkatier verify`` reports: problems found in a log directory, and what was checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kafkatier.storage.errors import CheckpointError

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding, located as precisely as the check allows.

    ``position`` is a byte position in ``file`` (a batch start, an index slot, a snapshot entry);
    ``offset`` a log offset the finding is about. Errors are states Kafka itself would reject,
    repair or misread; warnings are leftovers Kafka tidies up silently at startup.
    """

    file: str
    position: int | None
    message: str
    severity: Severity = "error"
    offset: int | None = None

    def __str__(self) -> str:
        where = self.file if self.position is None else f"{self.file}:{self.position}"
        prefix = "warning: " if self.severity == "warning" else ""
        return f"{where}: {prefix}{self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "problem",
            "file": self.file,
            "position": self.position,
            "offset": self.offset,
            "severity": self.severity,
            "message": self.message,
        }


@dataclass
class VerifyStats:
    """How much was checked; the summary line of ``kafkatier verify``."""

    partitions: int = 0
    segments: int = 0
    batches: int = 0
    records: int = 0
    files: int = 0

    def summary(self, problems: list[Problem]) -> str:
        errors = sum(1 for p in problems if p.severity == "error")
        warnings = len(problems) - errors
        found = "no problems" if not problems else f"{errors} errors, {warnings} warnings"
        return (
            f"checked {self.partitions} partitions, {self.segments} segments, "
            f"{self.batches} batches, {self.records} records ({self.files} files): {found}"
        )

    def to_json(self, problems: list[Problem]) -> dict[str, Any]:
        return {
            "type": "summary",
            "partitions": self.partitions,
            "segments": self.segments,
            "batches": self.batches,
            "records": self.records,
            "files": self.files,
            "errors": sum(1 for p in problems if p.severity == "error"),
            "warnings": sum(1 for p in problems if p.severity == "warning"),
        }


@dataclass
class Findings:
    """A problem list plus counters, passed down through the checks of one run."""

    problems: list[Problem] = field(default_factory=list)
    stats: VerifyStats = field(default_factory=VerifyStats)

    def add(
        self,
        file: object,
        position: int | None,
        message: str,
        *,
        severity: Severity = "error",
        offset: int | None = None,
    ) -> None:
        self.problems.append(Problem(str(file), position, message, severity, offset))


def checkpoint_message(exc: CheckpointError) -> str:
    """A checkpoint parse error as one line: where in the file, what, and the offending text."""
    line = exc.context.get("line")
    content = exc.context.get("content")
    where = f"line {line}: " if line is not None else ""
    shown = f": {content!r}" if content is not None else ""
    return f"{where}{exc.message}{shown}"
