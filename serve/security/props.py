"""One listener's view of the configuration: Kafka's ``valuesWithPrefixOverride``.

A key ``K`` of listener ``NAME`` is looked up as ``listener.name.<name lower case>.K`` first and
then as ``K`` (Kafka's ``ListenerName.configPrefix``), so errors name the key that was used.
Secret values are :class:`Password`: like Kafka's type of that name, it shows as ``[hidden]``
wherever it is printed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafkatier.storage.errors import ConfigError

LISTENER_PREFIX = "listener.name."


class Password:
    """A secret setting's value; ``repr`` and ``str`` are ``[hidden]`` (Kafka's Password)."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__


@dataclass(frozen=True)
class ListenerProps:
    """The settings of one listener: its prefixed keys override the plain ones."""

    props: Mapping[str, str]
    listener: str
    where: Callable[[str], str]
    """A key -> ``file:line`` of it."""

    @property
    def prefix(self) -> str:
        return f"{LISTENER_PREFIX}{self.listener.lower()}."

    def key(self, name: str) -> str:
        """The key ``name`` is read from: the listener's own if set, else the plain one."""
        return self.prefix + name if self.prefix + name in self.props else name

    def get(self, name: str, default: str | None = None) -> str | None:
        value = self.props.get(self.key(name))
        return default if value is None else value.strip()

    def own(self, name: str) -> str | None:
        """The listener's own (prefixed) value only, as Kafka reads some keys."""
        value = self.props.get(self.prefix + name)
        return None if value is None else value.strip()

    def error(self, name: str, message: str, **context: object) -> ConfigError:
        """A ConfigError naming the key ``name`` was read from and its line; never a value
        (callers pass only what is safe to show)."""
        key = self.key(name)
        return ConfigError(message, setting=key, **context, source=self.where(key))
