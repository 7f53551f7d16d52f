"""Build ``kernels.c``, ``checks.c``, ``headers.c``, ``writes.c``, ``committed.c``,
``offset_map.c`` and ``clean_filter.c`` (with ``kernels.h``, ``bytes.h`` and ``cleaner.h``)
into a shared library once per machine, as the sink's JVM classes are built from their sources
on first use (kafkatier.sink.jvm).

The library lands in ``$KAFKATIER_CACHE_DIR/native`` (default ``~/.cache/kafkatier``) under a
name carrying the digest of the sources and the platform, so a changed source or another machine
sharing the home directory never loads a stale build. The compiler is ``$CC`` (with any flags
in it), else ``cc``; it writes beside the final name and the result is renamed into place, so a
concurrent or killed build never leaves half a library under the final name. Beside it, under
the same name, goes the module of its declarations for cffi (:func:`declarations`), written the
same way.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

SOURCE: Final = Path(__file__).resolve().parent / "kernels.c"
_NAMES: Final = (
    "kernels.c",
    "checks.c",
    "headers.c",
    "writes.c",
    "committed.c",
    "offset_map.c",
    "clean_filter.c",
)
SOURCES: Final = tuple(SOURCE.with_name(name) for name in _NAMES)
HEADER: Final = SOURCE.with_suffix(".h")  # what they export; cffi reads it too
INCLUDES: Final = (SOURCE.with_name("bytes.h"), SOURCE.with_name("cleaner.h"))  # shared, inline
CACHE_ENV: Final = "KAFKATIER_CACHE_DIR"  # the one the JVM classes use too
FLAGS: Final = ("-O2", "-shared", "-fPIC", "-std=c99", "-pthread")
FFI_MODULE: Final = "kafkatier_kernels_ffi"  # the declarations' module, as cffi names it
log = logging.getLogger(__name__)


class BuildError(OSError):
    """No compiler, a failed compile or an unwritable cache: the numba kernels serve instead."""


def library_path() -> Path:
    """Where the build of these sources for this platform is (or will be) cached."""
    cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kafkatier")
    suffix = ".dylib" if sys.platform == "darwin" else ".so"
    return cache / "native" / f"kafkatier-kernels-{_digest()}{suffix}"


@functools.cache
def _digest() -> str:
    """The sources' and the platform's, read once a process (a start-up asks for the library
    and for its declarations: 0.7 ms each)."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in (*SOURCES, HEADER, *INCLUDES)))
    digest.update(f"{sys.platform} {platform.machine()} {' '.join(FLAGS)}".encode())
    return digest.hexdigest()[:16]


def compiler() -> list[str]:
    """``$CC`` (a command, with any flags it carries, as make takes it) or ``cc`` on PATH;
    BuildError when there is none."""
    command = shlex.split(os.environ.get("CC") or "cc")
    found = shutil.which(command[0]) if command else None
    if found is None:
        raise BuildError(f"no C compiler ({' '.join(command)!r} is not on PATH; set $CC)")
    return [found, *command[1:]]


def build(target: Path) -> None:
    """Compile the library to ``target`` (BuildError saying why not)."""
    cc = compiler()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
            partial = Path(scratch) / target.name
            command = [*cc, *FLAGS, "-o", str(partial), *map(str, SOURCES)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise BuildError(
                    f"{' '.join(cc)} exit {done.returncode}: {done.stderr.strip()[-500:]}"
                )
            os.replace(partial, target)
    except BuildError:
        raise
    except OSError as exc:
        raise BuildError(f"cannot build in {target.parent}: {exc}") from exc


def declarations() -> Any:
    """cffi's FFI for ``kernels.h``, in cffi's out-of-line ABI mode: the header is parsed once
    per machine and the result written beside the library as a small Python module
    (``emit_python_code``), which a process imports in about 3 ms. Parsing the header in every
    process (pycparser's import and the parse) took 60 ms of each ``kafkatier`` command's
    start-up. Where the module cannot be written or read, the header is parsed here (logged)."""
    path = library_path().with_suffix(".py")
    try:
        if not path.exists():
            _emit(path)
        spec = importlib.util.spec_from_file_location(FFI_MODULE, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.ffi
    except (OSError, ImportError, SyntaxError, AttributeError) as exc:
        log.info("kafkatier's kernel declarations parsed in this process (%s)", exc)
        return _parsed()


def _parsed() -> Any:
    from cffi import FFI  # pycparser's import with it: only where no module serves

    ffi = FFI()
    ffi.cdef(HEADER.read_text())
    return ffi


def _emit(target: Path) -> None:
    """The declarations' module written to ``target`` (beside, then renamed into place)."""
    ffi = _parsed()
    ffi.set_source(FFI_MODULE, None, compiler_verbose=False)  # no "generating" on stdout
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        partial = Path(scratch) / target.name
        ffi.emit_python_code(str(partial))
        os.replace(partial, target)
