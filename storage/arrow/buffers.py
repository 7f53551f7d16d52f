"""Output buffers for the encoder: a ``bytearray`` that is cheap to fill.

``bytearray(n)`` zero-fills and then takes one page fault per 4 KiB on first write; for a
100 MB encode that costs more than encoding. The encoder overwrites every byte anyway, so it
asks CPython for an uninitialised bytearray (``PyByteArray_FromStringAndSize(NULL, n)``, a public
C API) and, on Linux, advises transparent huge pages for it, as numpy does for its own large
arrays. Where either is unavailable it falls back to ``bytearray(n)``.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Final

import numpy as np

_MADV_HUGEPAGE: Final = 14  # linux/mman.h
_HUGE_PAGE: Final = 2 << 20
_MIN_ADVISED: Final = 4 * _HUGE_PAGE


def _uninitialised_factory() -> Callable[[int], bytearray] | None:
    try:
        make = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except AttributeError:  # not CPython
        return None
    make.restype = ctypes.py_object
    make.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]

    def uninitialised(size: int) -> bytearray:
        out = make(None, size)
        assert isinstance(out, bytearray)
        return out

    return uninitialised


def _madvise_function() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    advise: Callable[[int, int, int], int] = madvise
    return advise


_UNINITIALISED: Final = _uninitialised_factory()
_MADVISE: Final = _madvise_function()


def _advise_huge_pages(buf: bytearray) -> None:
    if _MADVISE is None or len(buf) < _MIN_ADVISED:
        return
    address = np.frombuffer(buf, np.uint8).ctypes.data
    start = -(-address // _HUGE_PAGE) * _HUGE_PAGE
    end = (address + len(buf)) // _HUGE_PAGE * _HUGE_PAGE
    _MADVISE(start, end - start, _MADV_HUGEPAGE)  # advice only: failure changes nothing


def output_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes whose content is undefined: the caller writes all of it."""
    if _UNINITIALISED is None or size == 0:
        return bytearray(size)
    buf = _UNINITIALISED(size)
    _advise_huge_pages(buf)
    return buf
