"""Kafka's checkpoint text files (kafka-format.md §8.1, §8.2).

Every checkpoint is UTF-8 text::

    <version>\\n
    <entry count>\\n
    <entry>\\n        (one line per entry)

``CheckpointFile`` (``server-common/.../CheckpointFile.java``) reads it leniently where Kafka does
(missing or empty file, or a file holding only the version line: no entries) and strictly
elsewhere (wrong version, a count that differs from the number of lines, a malformed line), and
writes it atomically through ``<file>.tmp``.
"""

from __future__ import annotations

import errno
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Final, Generic, TypeVar

from kafkatier.storage.errors import CheckpointError
from kafkatier.storage.fsutil import FileVersion, atomic_write, file_version

T = TypeVar("T")

RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"
OFFSET_CHECKPOINT_VERSION: Final = 0
MAX_TOPIC_NAME_LENGTH: Final = 249

INT32_RANGE: Final = (-(2**31), 2**31 - 1)
INT64_RANGE: Final = (-(2**63), 2**63 - 1)
_JAVA_INT: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)
_JAVA_WHITESPACE: Final = re.compile(r"[ \t\n\x0b\f\r]+")
_NEWLINE: Final = re.compile(r"\r\n|\r|\n")
_LEGAL_TOPIC: Final = re.compile(r"[a-zA-Z0-9._-]+", re.ASCII)


TOPIC_NAME_RULE: Final = (
    "at most 249 of the letters, digits, '.', '_' and '-', and not '.' or '..' (Kafka's rule)"
)
"""What :func:`is_valid_topic_name` accepts, in the words errors use."""


def is_valid_topic_name(topic: str) -> bool:
    """Kafka's ``Topic.validate``: 1-249 chars of ``[a-zA-Z0-9._-]``, and not ``.`` or ``..``.

    Such names never contain the whitespace that separates checkpoint fields.
    """
    return (
        0 < len(topic) <= MAX_TOPIC_NAME_LENGTH
        and topic not in (".", "..")
        and _LEGAL_TOPIC.fullmatch(topic) is not None
    )


class OutOfJavaRangeError(ValueError):
    """An integer the Java type cannot hold (Kafka: "Not a number of type INT")."""


def parse_java_int(text: str, bounds: tuple[int, int] = INT32_RANGE) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``: optional sign, ASCII digits, in range."""
    if not _JAVA_INT.fullmatch(text):
        raise ValueError(f"not an integer: {text!r}")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise OutOfJavaRangeError(f"out of range: {text}")
    return value


def split_java_whitespace(line: str) -> list[str]:
    """``Pattern.compile("\\\\s+").split(line)``: a leading empty field stays, trailing ones go."""
    parts = _JAVA_WHITESPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def java_lines(text: str) -> list[str]:
    """The lines ``BufferedReader.readLine`` returns (no final empty line after a newline)."""
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


class CheckpointFile(Generic[T]):
    """A versioned list of entries, one text line each (format in the module docstring).

    ``parse_entry`` returns None, or raises ValueError, for a line that is not an entry.
    """

    def __init__(
        self,
        path: Path,
        version: int,
        format_entry: Callable[[T], str],
        parse_entry: Callable[[str], T | None],
    ) -> None:
        self.path = path
        self.version = version
        self._format_entry = format_entry
        self._parse_entry = parse_entry

    def read(self) -> list[T]:
        try:
            text = self.path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return []
        except UnicodeDecodeError as e:
            raise CheckpointError("checkpoint is not UTF-8 text", file=str(self.path)) from e
        lines = java_lines(text)
        if not lines:
            return []
        version = self._header_int(lines[0], 1)
        if version != self.version:
            raise CheckpointError(
                f"unrecognised checkpoint version {version}, expected {self.version}",
                file=str(self.path), line=1,
            )
        if len(lines) == 1:
            return []
        expected = self._header_int(lines[1], 2)
        entries = [self._entry(line, number) for number, line in enumerate(lines[2:], start=3)]
        if len(entries) != expected:
            raise CheckpointError(
                f"expected {expected} entries but found {len(entries)}",
                file=str(self.path), line=2,
            )
        return entries

    def write(self, entries: Iterable[T], *, sync: bool = True) -> None:
        atomic_write(self.path, self.encode(entries), sync=sync)

    def encode(self, entries: Iterable[T]) -> bytes:
        """The file's bytes for ``entries``."""
        body = [self._format_entry(entry) for entry in entries]
        lines = [str(self.version), str(len(body)), *body]
        return "".join(line + "\n" for line in lines).encode("utf-8")

    def _header_int(self, line: str, number: int) -> int:
        try:
            value = parse_java_int(line)
        except ValueError:
            raise self._malformed(line, number) from None
        if number == 2 and value < 0:
            raise self._malformed(line, number)
        return value

    def _entry(self, line: str, number: int) -> T:
        try:
            entry = self._parse_entry(line)
        except ValueError:
            entry = None
        if entry is None:
            raise self._malformed(line, number)
        return entry

    def _malformed(self, line: str, number: int) -> CheckpointError:
        return CheckpointError(
            "malformed line in checkpoint file", file=str(self.path), line=number,
            content=repr(line),
        )


def _format_offset(entry: tuple[tuple[str, int], int]) -> str:
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


def _parse_offset(line: str) -> tuple[tuple[str, int], int] | None:
    parts = split_java_whitespace(line)
    if len(parts) != 3:
        return None
    topic, partition, offset = parts
    return (topic, parse_java_int(partition)), parse_java_int(offset, INT64_RANGE)


class OffsetCheckpointFile:
    """A per-log-dir ``topic partition offset`` checkpoint (version 0), e.g.::

        0
        2
        mytopic 0 1234
        mytopic 1 99

    Used for the recovery points, log start offsets, cleaner offsets and high watermarks.
    Entries are written in the mapping's order; a partition listed twice keeps its last offset.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: CheckpointFile[tuple[tuple[str, int], int]] = CheckpointFile(
            path, OFFSET_CHECKPOINT_VERSION, _format_offset, _parse_offset
        )

    def read(self) -> dict[tuple[str, int], int]:
        return dict(self._file.read())

    def write(self, offsets: Mapping[tuple[str, int], int], *, sync: bool = True) -> None:
        for (topic, partition), offset in offsets.items():
            self._check(topic, partition, offset)
        self._file.write(offsets.items(), sync=sync)

    def _check(self, topic: str, partition: int, offset: int) -> None:
        if not is_valid_topic_name(topic):
            raise CheckpointError("illegal topic name", file=str(self.path), topic=topic)
        if not 0 <= partition <= INT32_RANGE[1]:
            raise CheckpointError(
                "partition out of range", file=str(self.path), topic=topic, partition=partition
            )
        if not INT64_RANGE[0] <= offset <= INT64_RANGE[1]:
            raise CheckpointError(
                "offset out of int64 range", file=str(self.path), topic=topic, offset=offset
            )


_OFFSETS_SEEN: dict[Path, tuple[FileVersion, dict[tuple[str, int], int]]] = {}
_OFFSETS_LOCK = threading.Lock()


def read_offsets_cached(path: Path) -> dict[tuple[str, int], int]:
    """:meth:`OffsetCheckpointFile.read`, parsed again only when the file changed (its inode,
    size or mtime; writers replace it, so a new version is a new inode). A process that asks
    for one partition's entry of every partition of a log dir (the sidecar's pass) would
    otherwise parse the whole file once per partition: quadratic in partitions. The mapping
    returned is shared: read it, do not change it. Raises as ``read`` does."""
    key = file_version(path)
    if key is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    with _OFFSETS_LOCK:
        seen = _OFFSETS_SEEN.get(path)
    if seen is not None and seen[0] == key:
        return seen[1]
    offsets = OffsetCheckpointFile(path).read()
    with _OFFSETS_LOCK:
        _OFFSETS_SEEN[path] = (key, offsets)
    return offsets
