"""A request's lengths checked against the bytes that remain, and its unknown tagged fields
dropped, before kio decodes it.

kio's native reader allocates an array from its declared length before reading an element: a
21-byte Metadata v9 frame whose compact ``topics`` length says 2^32-2 asked for 34 GB, and a
failed allocation in Rust aborts the process (no Python exception to catch), so one request
took the whole server down. Kafka's generated readers refuse "a collection of size N, but
there are only M bytes remaining" before allocating; this walk does the same over the
request's schema (kio's entity classes: their fields, in order, with ``kafka_type`` or a
nested entity, and whether the version is flexible), without building anything. Every
element takes at least one byte, so a count above the bytes left is a lie.

The same walk finds the tagged fields (KIP-482) of the flexible versions: a client may send a
tag added to the version after kio's schemas were generated, which kio's reader refuses
("Unknown tagged field tag: 5", the connection closed) where Kafka's readers skip it. The walk
cuts such fields from the frame it hands to kio.

A field type the walk does not know ends it without a verdict (kio then decodes as before):
the walk only ever refuses what cannot be a request.
"""

from __future__ import annotations

import dataclasses
import struct
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

_FIXED = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
          "int64": 8, "float64": 8, "uuid": 16, "timedelta_i32": 4, "timedelta_i64": 8,
          "datetime_i64": 8, "error_code": 2}  # fmt: skip
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")
Fields = tuple[tuple[str, tuple[bool, Any] | None], ...]
_FIELDS: dict[Any, Fields] = {}  # the schema classes' fields, by class (kio's are a few hundred)
_SIZES: dict[Any, int | None] = {}
_TAGS: dict[Any, frozenset[int]] = {}


class Oversized(Exception):
    """A length no request of this many bytes can have."""


class _Unknown(Exception):
    """A field type the walk does not handle: no verdict."""


Cut = tuple[int, int, bytes]  # bytes [start, end) of the frame become these


def checked_request(frame: bytes, request_class: type[Any]) -> bytes:
    """``frame`` (header and body) without the tagged fields its schema does not know; raise
    :class:`Oversized` when a length in it exceeds what is left (module docstring). Returned
    unchanged when the schema has a type the walk does not know."""
    buf, cuts = memoryview(frame), list[Cut]()
    try:
        pos = _header(buf, request_class.__header_schema__, cuts)
        _entity(buf, pos, request_class, cuts)
    except (_Unknown, IndexError, struct.error):
        return frame  # no verdict (a truncation is kio's to name)
    return _spliced(frame, cuts) if cuts else frame


def _header(buf: memoryview, header_class: type[Any], cuts: list[Cut]) -> int:
    """Past the request header: key, version, correlation id, then a client id that is a
    nullable int16-length string in every header version, then (v2) tagged fields."""
    size: int = _INT16.unpack_from(buf, 8)[0]
    pos = 10 + max(size, 0)
    _fits(buf, 10, size, "the client id")
    if getattr(header_class, "__flexible__", False):
        pos = _tagged(buf, pos, _tags(header_class), cuts)
    return pos


def _spliced(frame: bytes, cuts: list[Cut]) -> bytes:
    parts: list[bytes] = []
    at = 0
    for start, end, replacement in cuts:
        parts += (frame[at:start], replacement)
        at = end
    parts.append(frame[at:])
    return b"".join(parts)


def _entity(buf: memoryview, pos: int, cls: type[Any], cuts: list[Cut]) -> int:
    flexible = bool(getattr(cls, "__flexible__", False))
    for field, kind in _fields(cls):
        if kind is None:
            continue  # a tagged field: in the tagged section below
        array, element = kind
        if array:
            count, pos = _length(buf, pos, flexible, 4)
            if count < 0:
                continue
            _fits(buf, pos, count, field)
            size = _fixed_size(element) if isinstance(element, type) else None
            if size is not None:  # a Fetch's thousands of partitions: no walk of each field
                pos = _fixed_entities(buf, pos, count, size, element, cuts)
                continue
            for _ in range(count):
                pos = _value(buf, pos, element, flexible, field, cuts)
        else:
            pos = _value(buf, pos, element, flexible, field, cuts)
    return _tagged(buf, pos, _tags(cls), cuts) if flexible else pos


def _tagged(buf: memoryview, pos: int, known: frozenset[int], cuts: list[Cut]) -> int:
    """Past a flexible struct's tagged fields, noting a cut that keeps only the ``known``
    tags when there are others."""
    start = pos
    tags, pos = _uvarint(buf, pos)
    _fits(buf, pos, tags, "tagged fields")
    kept: list[bytes] = []
    for _ in range(tags):
        field_start = pos
        tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        _fits(buf, pos, size, "a tagged field")
        pos += size
        if tag in known:
            kept.append(bytes(buf[field_start:pos]))
    if len(kept) < tags:
        cuts.append((start, pos, _uvarint_bytes(len(kept)) + b"".join(kept)))
    return pos


def _fixed_entities(
    buf: memoryview, pos: int, count: int, size: int, cls: Any, cuts: list[Cut]
) -> int:
    """Past ``count`` structs of ``size`` bytes of fixed fields each (and, flexible, their
    tagged fields: usually none, one zero byte)."""
    if not cls.__flexible__:
        return pos + count * size
    known = _tags(cls)
    for _ in range(count):
        pos += size
        pos = pos + 1 if buf[pos] == 0 else _tagged(buf, pos, known, cuts)
    return pos


def _fixed_size(cls: Any) -> int | None:
    if cls not in _SIZES:
        _SIZES[cls] = _size_of(cls)
    return _SIZES[cls]


def _size_of(cls: Any) -> int | None:
    """The bytes of a struct's fields when every one is a fixed-size number (tagged ones
    aside); None otherwise."""
    if not dataclasses.is_dataclass(cls):
        return None
    try:
        kinds = [kind for _name, kind in _fields(cls) if kind is not None]
    except _Unknown:
        return None
    if any(array or el not in _FIXED for array, el in kinds):
        return None
    return sum(_FIXED[el] for _array, el in kinds)


def _value(
    buf: memoryview, pos: int, element: Any, flexible: bool, field: str, cuts: list[Cut]
) -> int:
    if isinstance(element, type) and dataclasses.is_dataclass(element):
        return _entity(buf, pos, element, cuts)
    if element in _FIXED:
        return pos + _FIXED[element]
    if element in ("uvarint", "uvarlong"):
        return _uvarint(buf, pos)[1]
    if element in ("string", "bytes", "records"):
        size, pos = _length(buf, pos, flexible, 2 if element == "string" else 4)
        if size > 0:
            _fits(buf, pos, size, field)
            pos += size
        return pos
    raise _Unknown(element)


def _length(buf: memoryview, pos: int, flexible: bool, width: int) -> tuple[int, int]:
    """A length (-1: null): compact (an unsigned varint, one more than it) or fixed-width."""
    if flexible:
        raw, pos = _uvarint(buf, pos)
        return raw - 1, pos
    fixed = _INT16 if width == 2 else _INT32
    return fixed.unpack_from(buf, pos)[0], pos + width


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise _Unknown("varint")


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fits(buf: memoryview, pos: int, count: int, what: str) -> None:
    left = len(buf) - pos
    if count > left:
        raise Oversized(f"{what} claims {count} elements or bytes, but only {left} bytes remain")


def _fields(cls: Any) -> Fields:
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = _fields_of(cls)  # _Unknown is raised again each time
    return found


def _tags(cls: Any) -> frozenset[int]:
    """The tags of the tagged fields ``cls`` declares."""
    found = _TAGS.get(cls)
    if found is None:
        found = _TAGS[cls] = frozenset(
            int(f.metadata["tag"]) for f in dataclasses.fields(cls) if "tag" in f.metadata)
    return found


def _fields_of(cls: Any) -> Fields:
    """Each field: (name, None for a tagged one, else (is an array, its element: an entity
    class or a ``kafka_type``))."""
    hints = get_type_hints(cls)
    found: list[tuple[str, tuple[bool, Any] | None]] = []
    for field in dataclasses.fields(cls):
        if "tag" in field.metadata:
            found.append((field.name, None))
            continue
        hint = hints[field.name]
        array = get_origin(_strip_none(hint)) is tuple
        inner = get_args(_strip_none(hint))[0] if array else _strip_none(hint)
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            if not array and _strip_none(hint) is not hint:
                raise _Unknown("a nullable struct")
            found.append((field.name, (array, inner)))
        else:
            found.append((field.name, (array, field.metadata.get("kafka_type"))))
    return tuple(found)


def _strip_none(hint: Any) -> Any:
    if get_origin(hint) in (Union, UnionType):
        args = [a for a in get_args(hint) if a is not NoneType]
        if len(args) == 1:
            return args[0]
    return hint
