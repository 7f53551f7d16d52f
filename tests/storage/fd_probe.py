"""What this process holds open, read from /proc (Linux): for the tests that a writer lets go of
files other processes delete, and that long runs keep their descriptors flat."""

from __future__ import annotations

from pathlib import Path


def held_deleted(root: Path) -> list[str]:
    """Descriptors and mappings of this process on deleted files under ``root``."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
        if target.startswith(str(root)) and target.endswith(" (deleted)"):
            found.append(target)
    maps = Path("/proc/self/maps").read_text().splitlines()
    return found + [m for m in maps if str(root) in m and m.endswith(" (deleted)")]


def open_descriptors() -> int:
    return sum(1 for _ in Path("/proc/self/fd").iterdir())


def resident_bytes() -> int:
    """This process's resident set size (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError("no VmRSS in /proc/self/status")
