"""How one Kafka setting is parsed, checked and printed (Kafka's ``ConfigDef`` types and ranges).

Used by config.LogConfig: each dataclass field carries a :class:`Spec` in its metadata, so a
setting's Kafka name, type, default and valid range are written exactly once.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from kafkatier.storage.checkpoint.checkpoint_file import (
    INT32_RANGE,
    INT64_RANGE,
    OutOfJavaRangeError,
    parse_java_int,
)

LONG_MAX: Final = INT64_RANGE[1]
Kind = Literal["int", "long", "double", "boolean", "choice", "list"]
_JAVA_DOUBLE: Final = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


@dataclass(frozen=True)
class Spec:
    """A setting: Kafka ``name``, ``kind`` (ConfigDef type), inclusive range ``low``..``high``
    (``low_open`` makes the lower bound exclusive), ``extra`` values allowed outside it, the
    ``choices`` of a string or list, value ``aliases``, and whether None (unset) is allowed."""

    name: str
    kind: Kind
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    extra: tuple[int, ...] = ()
    choices: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    optional: bool = False
    items: str = ""
    """A list's items must match this pattern, unless the list is the single "*" (Kafka's
    ``ThrottledReplicaListValidator``); ``items_text`` says so."""
    items_text: str = ""
    broker: bool = False
    """A broker's setting (``server.properties``) that applies per log dir, not a topic config:
    a broker's DescribeConfigs of a topic does not list it."""
    unset: str = ""
    """What a broker's DescribeConfigs shows for an optional setting left unset (None here)."""

    def parse(self, text: str) -> Any:
        """Kafka's ``ConfigDef.parseType`` on trimmed text; ValueError says what was expected."""
        value = text.strip()
        if self.kind in ("int", "long"):
            bounds = INT32_RANGE if self.kind == "int" else INT64_RANGE
            try:
                return parse_java_int(value, bounds)
            except OutOfJavaRangeError:
                raise ValueError(f"not a number of type {self.kind.upper()} (a Java "
                                 f"{self.kind}: {bounds[0]} to {bounds[1]})") from None
        if self.kind == "double":
            if not _JAVA_DOUBLE.fullmatch(value):
                raise ValueError("not a number")
            return float(value)
        if self.kind == "boolean":
            if value.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return value.lower() == "true"
        if self.kind == "list":
            return tuple(item.strip() for item in value.split(",")) if value else ()
        return dict(self.aliases).get(value, value)

    def normalize(self, value: Any) -> Any:
        """Coerce a Python value given to the dataclass (aliases, a comma string for a list)."""
        if self.kind == "list" and isinstance(value, str):
            return self.parse(value)
        if self.kind == "list" and isinstance(value, list):
            return tuple(value)
        if self.kind == "choice" and isinstance(value, str):
            return dict(self.aliases).get(value, value)
        return value

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not acceptable, or None."""
        if value is None:
            return None if self.optional else "a value is required"
        if self.kind == "boolean":
            return None if isinstance(value, bool) else "expected a boolean"
        if self.kind in ("choice", "list"):
            items = value if self.kind == "list" else (value,)
            bad = [item for item in items if self.choices and item not in self.choices]
            if bad:
                return f"{', '.join(map(repr, bad))} is not one of {', '.join(self.choices)}"
            matched = all(re.fullmatch(self.items, item, re.ASCII) for item in items)
            if self.items and items != ("*",) and not matched:
                return "an entry is not as the valid values say"
            return "duplicate entries" if len(set(items)) != len(items) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "expected a number"
        if self.kind != "double" and not isinstance(value, int):
            return "expected an integer"
        return None if self._in_range(value) else "out of range"

    def _in_range(self, value: float) -> bool:
        if value in self.extra:
            return True
        bounds = INT32_RANGE if self.kind == "int" else INT64_RANGE
        if self.kind != "double" and not bounds[0] <= value <= bounds[1]:
            return False
        low_ok = self.low is None or (value > self.low if self.low_open else value >= self.low)
        return low_ok and (self.high is None or value <= self.high)

    def describe(self) -> str:
        """The valid values, in the style of Kafka's documentation (``[1,...,9] or -1``)."""
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "list" and self.items_text:
            return self.items_text
        if self.kind == "list" and not self.choices:
            return "a comma-separated list"
        if self.kind in ("choice", "list"):
            prefix = "comma-separated subset of " if self.kind == "list" else ""
            return prefix + "[" + ", ".join(self.choices) + "]"
        if self.low is None and self.high is None:
            text = "any " + ("integer" if self.kind in ("int", "long") else "number")
        elif self.high is None:
            text = f"[{_num(self.low)},...]"
        else:
            low = "..." if self.low is None else _num(self.low)
            text = f"{'(' if self.low_open else '['}{low},...,{_num(self.high)}]"
        return text + "".join(f" or {v}" for v in self.extra)

    def format(self, value: Any) -> str:
        if self.kind == "boolean":
            return "true" if value else "false"
        if self.kind == "list":
            return ",".join(value)
        return str(value)


def _num(value: float | None) -> str:
    assert value is not None
    return str(int(value)) if float(value).is_integer() else str(value)


def setting(name: str, default: Any, kind: Kind, **spec: Any) -> Any:
    """A dataclass field that carries its :class:`Spec`."""
    return field(default=default, metadata={"spec": Spec(name, kind, **spec)})


def spec_of(f: dataclasses.Field[Any]) -> Spec:
    spec: Spec = f.metadata["spec"]
    return spec


def did_you_mean(key: str, known: Iterable[str], prefix: str = "") -> str:
    """``"; did you mean 'x'?"`` for the known key closest to ``key`` (``prefix`` before it:
    "..." where only a key's tail was compared), "" when none is close."""
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f"; did you mean {prefix}{close[0]!r}?" if close else ""
