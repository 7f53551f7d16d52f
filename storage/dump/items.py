"""``kafkatier dump``'s items: plain dicts with a ``"type"`` and a ``"file"``, and their JSON form.

Values are Python values (keys and values stay ``bytes``); :func:`to_json` gives the JSON object,
bytes as base64, which for batches and records has exactly the fields of :data:`JSON_FIELDS`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, Final

Item = dict[str, Any]
Progress = Callable[[int], None]

JSON_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "batch": (
        "type", "file", "position", "size", "baseOffset", "lastOffset", "count", "magic", "codec",
        "timestampType", "maxTimestamp", "producerId", "producerEpoch", "baseSequence",
        "isTransactional", "isControl", "crcValid",
    ),
    "record": ("type", "file", "offset", "timestamp", "key", "value", "headers"),
}  # fmt: skip
"""The JSON fields of batches and records; other items keep all their keys."""


def item(kind: str, file: str, **fields: Any) -> Item:
    return {"type": kind, "file": file, **fields}


def problem(file: str, position: int | None, message: str) -> Item:
    return item("problem", file, position=position, message=message)


def to_json(item: Item) -> Item:
    """The JSON object for ``item``: bytes as base64, batches and records limited to their
    documented fields."""
    keys = JSON_FIELDS.get(item["type"], tuple(item))
    return {key: _jsonable(item[key]) for key in keys}


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
