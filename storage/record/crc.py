"""CRC-32C (Castagnoli), the checksum of Kafka's v2 batches and producer-state snapshots
(kafka-format.md section 1.2): the ``crc32c`` package's C extension, which uses the CPU's
instruction where there is one.

The extension is loaded without the package's ``__init__``, which imports importlib.metadata,
email and argparse for its version string and its command line: 35-65 ms of the start-up of
every process that checks or builds a batch (``python -X importtime``), against 1 ms for the
extension alone. Where the package is laid out otherwise, it is imported as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Callable
from typing import Any, Final


def _extension() -> Any:
    package = importlib.util.find_spec("crc32c")  # found, not run
    places = None if package is None else package.submodule_search_locations
    spec = (
        None
        if places is None
        else importlib.machinery.PathFinder.find_spec("crc32c._crc32c", list(places))
    )
    if spec is None or spec.loader is None:
        import crc32c as whole

        return whole
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


crc32c: Final[Callable[..., int]] = _extension().crc32c
"""``crc32c(data, value=0)``: the CRC of ``data`` (any buffer), continuing from ``value``."""
