"""The C kernels (kafkatier.storage.native) against numba's: the same bytes for the same input,
and the fallback to numba wherever the C build cannot be had.

The record batches both write are checked against kafka-python's parser too (an outside
reader), and the murmur2 partitions against the pure-Python port of Kafka's ``Utils.murmur2``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kafka.record.default_records import DefaultRecordBatch as KpBatch

from kafkatier.storage import native
from kafkatier.storage.arrow.codec import encode_arrow
from kafkatier.storage.arrow.encode import EncodedBatches
from kafkatier.storage.errors import ConfigError, RecordTooLargeError
from kafkatier.storage.native import build
from kafkatier.storage.partitioner import murmur2, murmur2_keys, partition_keys

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _has_compiler() -> bool:
    try:
        return bool(build.compiler())
    except build.BuildError:
        return False


needs_cc = pytest.mark.skipif(
    not _has_compiler(), reason="no C compiler ($CC or cc) here: only numba's kernels can run"
)


def _blob(rng: random.Random, most: int) -> bytes | None:
    if rng.random() < 0.1:
        return None
    return rng.randbytes(rng.choice([0, 1, 3, rng.randrange(most + 1)]))


def _table(seed: int, rows: int, *, headers: bool, large: bool = False) -> pa.Table:
    """Keys and values with nulls and empties, spread timestamps, headers with null values."""
    rng = random.Random(seed)
    kind = pa.large_binary() if large else pa.binary()
    cols: dict[str, pa.Array] = {
        "key": pa.array([_blob(rng, 40) for _ in range(rows)], kind),
        "value": pa.array([_blob(rng, 300) for _ in range(rows)], kind),
        "timestamp": pa.array(
            [None if rng.random() < 0.05 else rng.randrange(-1, 1 << 42) for _ in range(rows)],
            pa.int64(),
        ),
    }
    if headers:
        cols["headers"] = pa.array(
            [
                None if rng.random() < 0.2 else [
                    {"key": rng.choice(["a", "trace-id", ""]), "value": _blob(rng, 20)}
                    for _ in range(rng.randrange(4))
                ]
                for _ in range(rows)
            ],
            HEADERS,
        )  # fmt: skip
    return pa.table(cols)


CASES: list[tuple[str, dict[str, Any]]] = [
    ("plain", {}),
    ("small batches", {"max_batch_bytes": 700}),
    ("few records a batch", {"max_batch_records": 7}),
    ("idempotent", {"producer_id": 42, "producer_epoch": 3, "base_sequence": 2**31 - 20}),
    ("transactional lz4", {"producer_id": 9, "producer_epoch": 0, "base_sequence": 0,
                           "transactional": True, "codec": "lz4"}),
    ("zstd, rebased", {"codec": "zstd", "base_offset": 1000, "partition_leader_epoch": 5}),
]  # fmt: skip


def _encode(monkeypatch: pytest.MonkeyPatch, kernels: str, table: Any, **kw: Any) -> EncodedBatches:
    monkeypatch.setenv(native.KERNELS_ENV, kernels)
    return encode_arrow(table, timestamp=1_700_000_000_000, **kw)


def _same(a: EncodedBatches, b: EncodedBatches) -> None:
    assert bytes(a.data) == bytes(b.data)
    for name in ("positions", "sizes", "base_offsets", "last_offset_deltas", "max_timestamps",
                 "base_sequences"):  # fmt: skip
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name


@needs_cc
@pytest.mark.parametrize(("name", "kw"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("headers", [False, True], ids=["no headers", "headers"])
def test_the_c_kernels_write_numbas_bytes(
    monkeypatch: pytest.MonkeyPatch, name: str, kw: dict[str, Any], headers: bool
) -> None:
    table = _table(len(name), 500, headers=headers, large=name == "plain")
    c = _encode(monkeypatch, "native", table, **kw)
    _same(c, _encode(monkeypatch, "numba", table, **kw))
    assert len(c) > (10 if "max_batch" in str(kw) else 0)
    if "codec" not in kw:  # kafka-python, an outside reader, reads what both wrote
        got = []
        for p, s in zip(c.positions.tolist(), c.sizes.tolist(), strict=True):
            batch = KpBatch(bytes(c.data[p : p + s]))
            assert batch.validate_crc()
            got += [(r.key, r.value) for r in batch]
        assert got == list(zip(table["key"].to_pylist(), table["value"].to_pylist(), strict=True))


@needs_cc
def test_slices_empty_tables_and_rebase(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slice (Arrow offsets not at 0), an empty table, a rebase of encoded batches."""
    table = _table(7, 300, headers=True).slice(37, 200)
    for t in (table, table.slice(0, 0)):
        _same(_encode(monkeypatch, "native", t), _encode(monkeypatch, "numba", t))
    c = _encode(monkeypatch, "native", table, max_batch_records=9).rebase(77, 4)
    n = _encode(monkeypatch, "numba", table, max_batch_records=9)
    monkeypatch.setenv(native.KERNELS_ENV, "numba")
    _same(c, n.rebase(77, 4))


@needs_cc
def test_a_record_too_large_is_the_same_row(monkeypatch: pytest.MonkeyPatch) -> None:
    table = pa.table({"value": pa.array([b"x" * 10, b"y" * 5000, b"z"], pa.binary())})
    rows = []
    for kernels in ("native", "numba"):
        with pytest.raises(RecordTooLargeError) as err:
            _encode(monkeypatch, kernels, table, max_batch_bytes=1000)
        rows.append(str(err.value))
    assert rows[0] == rows[1] and "row" in rows[0]


@needs_cc
@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary(), pa.string(), pa.large_string()])
def test_the_c_murmur2_partitions_as_kafka(monkeypatch: pytest.MonkeyPatch, kind: Any) -> None:
    rng = random.Random(5)
    raw = [None if rng.random() < 0.1 else rng.randbytes(rng.randrange(13)) for _ in range(400)]
    if kind in (pa.string(), pa.large_string()):
        raw = [None if k is None else k.hex() for k in raw]
    keys = pa.array(raw, kind).slice(3)
    results = {}
    for kernels in ("native", "numba"):
        monkeypatch.setenv(native.KERNELS_ENV, kernels)
        results[kernels] = (partition_keys(keys, 37).tolist(), murmur2_keys(keys).tolist())
    assert results["native"] == results["numba"]
    expected = [
        -1 if k is None else murmur2(k.encode() if isinstance(k, str) else k)
        for k in keys.to_pylist()
    ]
    assert results["native"][1] == expected


def test_a_wrong_choice_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.KERNELS_ENV, "fortran")
    with pytest.raises(ConfigError, match="KAFKATIER_KERNELS must be one of auto, native, numba"):
        native.native()


def _fresh_process(tmp_path: Path, env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "KAFKATIER_CACHE_DIR": str(tmp_path / "cache"), **env}
    if native.KERNELS_ENV not in env:
        environ.pop(native.KERNELS_ENV, None)
    return subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120
    )


ENCODE = """
import logging, sys
import pyarrow as pa
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from kafkatier.storage import native
from kafkatier.storage.arrow.codec import encode_arrow
batches = encode_arrow(pa.table({"value": [b"v1", None, b"v3"]}), timestamp=5)
print(native.native() is not None, len(batches), batches.record_count)
"""


def test_without_a_compiler_numba_serves(tmp_path: Path) -> None:
    done = _fresh_process(tmp_path, {"CC": str(tmp_path / "no-such-cc")}, ENCODE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "1", "3"]
    assert "no C compiler" in done.stderr and "numba's serve" in done.stderr
    required = _fresh_process(
        tmp_path, {"CC": str(tmp_path / "no-such-cc"), native.KERNELS_ENV: "native"}, ENCODE
    )
    assert required.returncode == 1
    assert "the C kernels cannot be had: no C compiler" in required.stderr


@needs_cc
def test_a_broken_cached_library_is_rebuilt(tmp_path: Path) -> None:
    """A build cut short (a full disk, a killed compiler before the rename existed) may leave a
    file that does not load: it is built again, not trusted and not fatal."""
    done = _fresh_process(tmp_path, {}, ENCODE)
    assert done.stdout.split() == ["True", "1", "3"], done.stderr
    built = list((tmp_path / "cache" / "native").glob("*.so"))
    assert len(built) == 1
    built[0].write_bytes(built[0].read_bytes()[:100])
    again = _fresh_process(tmp_path, {}, ENCODE)
    assert again.stdout.split() == ["True", "1", "3"], again.stderr
    assert built[0].stat().st_size > 1000


SLOW_IMPORTS = ("numba", "llvmlite", "pycparser", "crc32c", "pyarrow.compute")
"""What ``kafkatier produce`` of a keyed file into one partition does without: numba (the C
kernels serve), pycparser (the kernels' declarations come from the module the build wrote),
the crc32c package's ``__init__`` (its extension is loaded alone) and pyarrow.compute (where
rows of several partitions are reordered, ``Table.take`` needs it): together about 0.6 s of a
process's start-up."""


def _produce(tmp_path: Path, topic: str, partitions: int) -> subprocess.CompletedProcess:
    code = (
        "import sys\n"
        "from kafkatier.cli.main import main\n"
        f"rc = main(['produce', {str(tmp_path / 'logs')!r}, '--topic', {topic!r}, '--input', "
        f"{str(tmp_path / 'in.parquet')!r}, '--partitions', '{partitions}'])\n"
        f"slow = {SLOW_IMPORTS!r}\n"
        "print(rc, sorted(m for m in sys.modules if m in slow or m.split('.')[0] in slow[:3]))\n"
    )
    return _fresh_process(tmp_path, {}, code)


@needs_cc
def test_produce_imports_no_numba(tmp_path: Path) -> None:
    """What the C kernels are for: ``kafkatier produce`` pays none of numba's start-up, nor
    (from its second process on a machine) of the others in :data:`SLOW_IMPORTS`."""
    # written here: pyarrow's writer imports pyarrow.compute
    pq.write_table(pa.table({"key": [b"a", b"b", None], "value": [b"1", b"2", b"3"]}),
                   tmp_path / "in.parquet")  # fmt: skip
    first = _produce(tmp_path, "t", 3)  # builds the library, writes the declarations
    assert first.returncode == 0, first.stderr
    assert "numba" not in first.stdout and "llvmlite" not in first.stdout
    assert "produced 3 records to t" in first.stdout
    done = _produce(tmp_path, "u", 1)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []"
    assert "produced 3 records to u" in done.stdout


@needs_cc
def test_cc_with_flags_and_an_unwritable_cache(tmp_path: Path) -> None:
    """``$CC`` may carry flags, as make's does; a cache path that cannot be a directory (here a
    file) leaves numba's kernels serving, saying where it could not build."""
    done = _fresh_process(tmp_path, {"CC": "cc -O1"}, ENCODE)
    assert done.stdout.split() == ["True", "1", "3"], done.stderr
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    done = _fresh_process(tmp_path, {"KAFKATIER_CACHE_DIR": str(blocked)}, ENCODE)
    assert done.stdout.split() == ["False", "1", "3"], done.stderr
    assert f"cannot build in {blocked / 'native'}" in done.stderr


@needs_cc
def test_processes_building_at_once_each_load_a_whole_library(tmp_path: Path) -> None:
    """Four processes start with an empty cache at once: each builds (or finds a finished
    build), none loads a partial file, one library is left under its name."""
    environ = {**os.environ, "KAFKATIER_CACHE_DIR": str(tmp_path / "cache")}
    environ.pop(native.KERNELS_ENV, None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ENCODE],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert out.split() == ["True", "1", "3"], err
    left = sorted((tmp_path / "cache" / "native").glob("kafkatier-kernels-*"))  # not __pycache__
    assert [p.suffix for p in left] == [".py", ".so"], left
    assert left[0].stem == left[1].stem and left[0].name.startswith("kafkatier-kernels-"), left


@needs_cc
def test_the_declarations_are_parsed_once_a_machine(tmp_path: Path) -> None:
    """The first process writes the declarations' module beside the library (and prints
    nothing of it: cffi's emitter says "generating" unless told not to); later ones import it
    without pycparser; one cut short (a full disk) is not trusted: the header is parsed
    instead, logged, and the kernels serve the same."""
    code = ENCODE + "print('pycparser' in sys.modules)\n"
    first = _fresh_process(tmp_path, {}, code)
    assert first.stdout.split() == ["True", "1", "3", "True"], first.stderr
    module = next((tmp_path / "cache" / "native").glob("*.py"))
    again = _fresh_process(tmp_path, {}, code)
    assert again.stdout.split() == ["True", "1", "3", "False"], again.stderr
    module.write_text(module.read_text()[:200])
    cut = _fresh_process(tmp_path, {}, code)
    assert cut.stdout.split() == ["True", "1", "3", "True"], cut.stderr
    assert "declarations parsed in this process" in cut.stderr


def test_native_asked_after_a_failed_build_still_says_why(tmp_path: Path) -> None:
    """One process, no compiler: ``auto`` falls back; a later ``native`` is an error, not the
    fallback remembered from the first attempt."""
    code = (
        "import os\n"
        "from kafkatier.storage import native\n"
        "print(native.native())\n"
        f"os.environ[{native.KERNELS_ENV!r}] = 'native'\n"
        "try:\n    native.native()\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    done = _fresh_process(tmp_path, {"CC": str(tmp_path / "no-such-cc")}, code)
    lines = done.stdout.splitlines()
    assert lines[0] == "None", done.stderr
    assert lines[1].startswith("ConfigError the C kernels cannot be had: no C compiler"), lines
