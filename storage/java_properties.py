"""Java ``.properties`` text as ``java.util.Properties.load`` reads it and ``store`` writes it.

Kafka keeps ``meta.properties`` and every broker/topic config file in this syntax, so both the
config loader and the metadata-file writer share this one implementation.

Reading (``Properties.load``): natural lines end at ``\\n``, ``\\r`` or ``\\r\\n``; leading spaces,
tabs and form feeds are skipped; a line whose first visible character is ``#`` or ``!`` is a
comment; an odd number of trailing backslashes joins the next line (its leading whitespace
dropped). The key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace and one
``=``/``:`` then separate it from the value. Escapes: ``\\t \\n \\r \\f \\uXXXX``, and a backslash
before any other character stands for that character.

Writing (``Properties.store(Writer, "")``): a ``#`` line, a ``#<Date.toString()>`` line, then
``key=value`` lines; ``\\``, ``=``, ``:``, ``#``, ``!``, tab/newline/CR/FF are escaped, as are
spaces in keys and a value's leading space. Non-ASCII text is written as is (UTF-8), which is what
a ``Writer`` gets from ``store``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from kafkatier.storage.errors import ConfigError

_NEWLINE: Final = re.compile(r"\r\n|\r|\n")
_BLANK: Final = " \t\f"
_SIMPLE_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_STORE_ESCAPES: Final = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}
_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun",
                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class Located:
    """A setting's value and the (first natural) line it was read from, for error messages."""

    value: str
    line: int


def read_properties(path: Path) -> dict[str, str]:
    """Parse a ``.properties`` file; UTF-8 as Kafka writes it, Latin-1 (Java's reader) otherwise."""
    return parse_properties(_decode(path.read_bytes()), source=str(path))


def read_properties_located(path: Path) -> dict[str, Located]:
    """:func:`read_properties` keeping each value's line number (config errors name file:line)."""
    return parse_properties_located(_decode(path.read_bytes()), source=str(path))


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def parse_properties(text: str, *, source: str) -> dict[str, str]:
    """Parse ``.properties`` text; a repeated key keeps its last value, as in Java."""
    return {k: v.value for k, v in parse_properties_located(text, source=source).items()}


def parse_properties_located(text: str, *, source: str) -> dict[str, Located]:
    """:func:`parse_properties` with line numbers; a repeated key keeps its last value and line."""
    result: dict[str, Located] = {}
    for line_no, line in _logical_lines(text):
        key, value = _split_key_value(line)
        result[_unescape(key, source, line_no)] = Located(
            _unescape(value, source, line_no), line_no
        )
    return result


def format_properties(
    props: Mapping[str, str], *, comment: str | None = "", now: datetime | None = None
) -> str:
    """The text ``Properties.store`` writes: comment line, date line, then escaped entries."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC)
    lines = [] if comment is None else ["#" + part for part in comment.split("\n")]
    lines.append("#" + _java_date(stamp))
    lines.extend(f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in props.items())
    return "".join(line + "\n" for line in lines)


def _java_date(t: datetime) -> str:
    """``java.util.Date.toString()`` for a UTC instant: ``Wed Dec 10 19:14:32 UTC 2025``."""
    return (
        f"{_DAYS[t.weekday()]} {_MONTHS[t.month - 1]} {t.day:02d} "
        f"{t.hour:02d}:{t.minute:02d}:{t.second:02d} UTC {t.year}"
    )


def _ends_with_odd_backslash(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first natural line number, joined logical line) for every non-comment, non-blank line."""
    natural = _NEWLINE.split(text)
    i = 0
    while i < len(natural):
        line_no = i + 1
        line = natural[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        while _ends_with_odd_backslash(line):
            parts.append(line[:-1])
            line = natural[i].lstrip(_BLANK) if i < len(natural) else ""
            i += 1
        parts.append(line)
        joined = "".join(parts)
        if joined:
            yield line_no, joined


def _split_key_value(line: str) -> tuple[str, str]:
    """Java's ``load0`` split: the key stops at an unescaped separator or whitespace."""
    key_end, value_start, has_sep, escaped = len(line), len(line), False, False
    for pos, c in enumerate(line):
        if not escaped and c in "=:":
            key_end, value_start, has_sep = pos, pos + 1, True
            break
        if not escaped and c in _BLANK:
            key_end, value_start = pos, pos + 1
            break
        escaped = (c == "\\") and not escaped
    while value_start < len(line):
        c = line[value_start]
        if c not in _BLANK:
            if has_sep or c not in "=:":
                break
            has_sep = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(text: str, source: str, line_no: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\" or i >= len(text):
            out.append(c)
            continue
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(
                    "malformed \\uxxxx escape", source=source, line=line_no, value=text
                )
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(c, c))
    # \uXXXX pairs encode astral characters as UTF-16 surrogates, as Java strings do.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def _escape(text: str, *, is_key: bool) -> str:
    """Java's ``saveConvert`` without unicode escaping (``store`` to a ``Writer``)."""
    out: list[str] = []
    for pos, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == " ":
            out.append("\\ " if pos == 0 or is_key else " ")
        elif c in _STORE_ESCAPES:
            out.append(_STORE_ESCAPES[c])
        elif c in "=:#!":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)
