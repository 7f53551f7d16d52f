"""The input formats of ``kafkatier produce``, told from a file's name: apart from the readers
(inputs.py, on pyarrow) so that ``kafkatier produce --help`` lists them without importing one."""

from __future__ import annotations

from pathlib import Path

from kafkatier.storage.errors import ConfigError

FORMATS = ("parquet", "jsonl", "csv")
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".json": "jsonl",
             ".ndjson": "jsonl", ".csv": "csv"}  # fmt: skip


def detect_format(path: Path, given: str | None) -> str:
    if given:
        return given
    found = _SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise ConfigError(
            f"cannot tell the format of {path.name}: name it .parquet, .jsonl or .csv, "
            "or pass --format",
            setting="--format",
            source=str(path),
        )
    return found
