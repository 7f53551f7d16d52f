"""Expected values follow java.util.Properties.load/store semantics (JDK LineReader, load0,
loadConvert, saveConvert)."""

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.errors import ConfigError
from kafkatier.storage.java_properties import (
    format_properties,
    parse_properties,
    read_properties,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key=value", {"key": "value"}),
        ("key = value", {"key": "value"}),
        ("key:value\n", {"key": "value"}),
        ("key value", {"key": "value"}),
        ("key\t\f value", {"key": "value"}),
        ("key", {"key": ""}),
        ("key=", {"key": ""}),
        ("   key=value  ", {"key": "value  "}),  # trailing whitespace belongs to the value
        ("k==v", {"k": "=v"}),
        ("k :=v", {"k": "=v"}),  # whitespace, then one separator, then the value
        ("=v", {"": "v"}),
        (r"a\=b\:c\ d=e", {"a=b:c d": "e"}),
        ("k=v\\\n   continued", {"k": "vcontinued"}),
        ("k=v\\\\\nx=y", {"k": "v\\", "x": "y"}),  # an even run of backslashes does not join
        ("k=v\\\\\\\n  w", {"k": "v\\w"}),
        ("k=a\\\n# not a comment", {"k": "a# not a comment"}),
        ("# comment \\\nk=v", {"k": "v"}),  # comments never continue
        ("! bang comment\n  # indented comment\nk=v", {"k": "v"}),
        ("\n\n   \n\t\nk=v\n\n", {"k": "v"}),
        ("k=v\\\n\nx=y", {"k": "v", "x": "y"}),  # joined with an empty line, then ends
        (r"k=\u0041\u00e9\t\n\r\f\q\\", {"k": "A\u00e9\t\n\r\fq\\"}),
        (r"k=\ud83d\ude00", {"k": "\U0001f600"}),  # UTF-16 surrogate pair escapes
        ("a=1\rb=2\r\nc=3\n", {"a": "1", "b": "2", "c": "3"}),
        ("k=1\nk=2", {"k": "2"}),
        ("k=v\\", {"k": "v"}),  # a dangling backslash at end of input is dropped
        ("\\\n\nk=v", {"k": "v"}),
        ("", {}),
    ],
)
def test_parse(text, expected):
    assert parse_properties(text, source="t") == expected


@pytest.mark.parametrize("text", [r"k=\u12", r"k=\u12G4", "a=1\nb=\\uZZZZ"])
def test_malformed_unicode_escape_names_line(text):
    with pytest.raises(ConfigError, match="uxxxx") as info:
        parse_properties(text, source="server.properties")
    assert info.value.source == "server.properties"
    assert info.value.line == text.count("\n") + 1


def test_read_file_utf8_and_latin1(tmp_path):
    path = tmp_path / "a.properties"
    path.write_bytes("name=caf\u00e9\n".encode())
    assert read_properties(path) == {"name": "caf\u00e9"}
    path.write_bytes("name=caf\u00e9\n".encode("latin-1"))
    assert read_properties(path) == {"name": "caf\u00e9"}


def test_store_format():
    when = datetime(2024, 10, 10, 11, 57, 10, tzinfo=UTC)
    text = format_properties({"node.id": "1", " lead": " x y", "t\tab": "a\nb\r\f"}, now=when)
    assert text == (
        "#\n#Thu Oct 10 11:57:10 UTC 2024\nnode.id=1\n\\ lead=\\ x y\nt\\tab=a\\nb\\r\\f\n"
    )
    assert format_properties({}, comment=None, now=when) == "#Thu Oct 10 11:57:10 UTC 2024\n"


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=12), st.text(max_size=20), max_size=6))
def test_store_then_load_round_trips(props):
    assert parse_properties(format_properties(props), source="t") == props


def test_located_values_keep_their_first_natural_line(tmp_path):
    from kafkatier.storage.java_properties import Located, read_properties_located

    text = "# comment\n\na=1\nb=two\\\n   lines\r\nc=3\n  a = again\n"
    path = tmp_path / "x.properties"
    path.write_text(text)
    found = read_properties_located(path)
    # a repeated key keeps its last value and that value's line, as Java keeps the last value
    assert found == {"a": Located("again", 7), "b": Located("twolines", 4), "c": Located("3", 6)}
    assert {k: v.value for k, v in found.items()} == read_properties(path)
