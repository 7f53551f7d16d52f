"""kafkatier.storage.native: the encoder's kernels built ahead of time in C, with numba's as the
fallback; and, in the same library, the thread that writes queued appends (``writes.c``,
:mod:`kafkatier.storage.log.queued_writes`; without the library appends are written at once)
the check of a buffer of client batches in one call (``checks.c``,
``kafkatier.storage.log.validator.checked_rows``; without it Python checks each batch; and the
CRCs of the batches the cleaner compresses again, without it numba's), the
sink's committed appends of many partitions in one call (``committed.c``), the cleaner's
offset-map build and rewrite over plain batches (``offset_map.c``, ``clean_filter.c``; without
them numba's) and the framing of a ``.log``'s batch headers (``headers.c``,
``kafkatier.storage.log.tail.LogFile.table``; without it Python frames them).

Why: numba compiles and caches kafkatier's kernels, but a process pays about 0.4 s before their
first call (numba's import, then the typing and lowering registries that first call loads):
most of a short ``kafkatier produce``. ``kernels.c`` holds the same algorithms (record batch
encoding, Kafka's murmur2 partitioner); it is built once per machine with the system's C
compiler (``build``), and a process has it imported and bound in 35-43 ms (ad hoc, three fresh
processes, numpy loaded before). Where no compiler is found or the build fails, the numba
kernels serve, with the same results (a test holds the two to the same bytes).

``$KAFKATIER_KERNELS`` chooses: ``auto`` (the default: C when it builds, else numba), ``numba``,
or ``native`` (C or an error saying why not).
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from types import ModuleType
from typing import Final

from kafkatier.storage.errors import ConfigError

log = logging.getLogger(__name__)
KERNELS_ENV: Final = "KAFKATIER_KERNELS"
CHOICES: Final = ("auto", "native", "numba")
_LOCK: Final = threading.Lock()
_OUTCOME: list[ModuleType | Exception] = []  # the one attempt to build and load, once set


def choice() -> str:
    """``$KAFKATIER_KERNELS``, checked."""
    value = os.environ.get(KERNELS_ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ConfigError(
            f"${KERNELS_ENV} must be one of {', '.join(CHOICES)}",
            setting=KERNELS_ENV,
            value=value,
        )
    return value


def native() -> ModuleType | None:
    """``kafkatier.storage.native.kernels`` bound to the built library, or None where the numba
    kernels are to serve (chosen, or the library cannot be built: logged once, saying why; with
    ``native`` chosen that is a ConfigError, whenever it is asked)."""
    wanted = choice()
    if wanted == "numba":
        return None
    with _LOCK:
        if not _OUTCOME:
            _OUTCOME.append(_load())
        outcome = _OUTCOME[0]
    if isinstance(outcome, ModuleType):
        return outcome
    if wanted == "native":
        raise ConfigError(
            f"the C kernels cannot be had: {outcome}", setting=KERNELS_ENV, value="native"
        ) from outcome
    return None


def pick(fallback: str) -> ModuleType:
    """The C kernels when they are to serve, else the numba module ``fallback`` (the same
    functions by the same names)."""
    return native() or importlib.import_module(fallback)


def _load() -> ModuleType | Exception:
    """The bound kernels, or why they cannot be had (logged: numba's serve unless ``native``)."""
    from kafkatier.storage.native import build, kernels

    try:
        kernels.bind(build.library_path())
    except build.BuildError as exc:
        log.info("kafkatier's C kernels are not built (%s): numba's serve", exc)
        return exc
    return kernels
