"""Benchmark: kafkatier's Arrow fast path against aiokafka's C record batch builder/reader.

    python bench/arrow_codec.py [--records N] [--repeat K] [--json] [--no-cold-compile]

Builds N records (16-byte keys, 100-byte values, increasing millisecond timestamps) in Arrow and
reports, best of K runs (the machine is shared and noisy):

(a) encode: ``encode_arrow`` vs aiokafka's ``DefaultRecordBatchBuilder`` fed from the same Arrow
    data, batching the same way (one ``max_batch_bytes``), with and without the Arrow -> Python
    conversion that feeding aiokafka needs; the two outputs are checked to be the same batches.
(b) decode: ``decode_arrow`` vs aiokafka's ``DefaultRecordBatch`` reader iterating the same bytes
    and building the same Arrow table (and its bare iteration).
(c) gzip/snappy/lz4/zstd: our encode/decode vs the codec library alone on the same record bytes.

numba's first-call time (cache load or compile) is excluded from the figures and reported, as is
a cold compile in a subprocess with an empty numba cache.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from _arrow_baselines import (
    BARE,
    MAX_BATCH,
    aiokafka_encode,
    aiokafka_iterate,
    aiokafka_to_arrow,
    record_regions,
    same_batches,
    to_python,
)

from kafkatier.storage.arrow.codec import decode_arrow, encode_arrow
from kafkatier.storage.wire import Codec

KEY_BYTES, VALUE_BYTES = 16, 100


def make_table(n: int) -> pa.Table:
    """Keys ``key-%012d``; values of 100 bytes from a 32-letter alphabet (compressible ~1.6x)."""
    rng = np.random.default_rng(42)
    keys = np.frombuffer(b"".join(b"key-%012d" % i for i in range(n)), np.uint8) if n else b""
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz012345", np.uint8)
    values = letters[rng.integers(0, len(letters), n * VALUE_BYTES)]

    def column(data: Any, width: int) -> pa.Array:
        offsets = np.arange(n + 1, dtype=np.int32) * width
        return pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )

    ts = 1_700_000_000_000 + np.arange(n, dtype=np.int64) // 10
    return pa.table(
        {
            "key": column(keys, KEY_BYTES),
            "value": column(values, VALUE_BYTES),
            "timestamp": pa.array(ts, pa.timestamp("ms", tz="UTC")),
        }
    )


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def bench_codec(codec: Codec, table: pa.Table, plain: Any, repeat: int, n: int) -> dict[str, Any]:
    regions = record_regions(plain)
    compress, decompress = BARE[codec]
    t_enc, enc = best_of(repeat, lambda: encode_arrow(table, codec=codec))
    data = bytes(enc.data)
    t_dec, out = best_of(repeat, lambda: decode_arrow(data))
    assert out.num_rows == n
    t_bare_c, blocks = best_of(repeat, lambda: [compress(r) for r in regions])
    t_bare_d, _ = best_of(repeat, lambda: [decompress(b) for b in blocks])
    return {
        "codec": codec.kafka_name,
        "bytes": len(data),
        "encode_s": t_enc,
        "codec_compress_s": t_bare_c,
        "encode_over_codec": t_enc / t_bare_c,
        "decode_s": t_dec,
        "codec_decompress_s": t_bare_d,
        "decode_over_codec": t_dec / t_bare_d,
        "encode_rec_per_s": n / t_enc,
        "decode_rec_per_s": n / t_dec,
    }


# --- numba warm-up --------------------------------------------------------------------------------

_COLD = """
import time, pyarrow as pa
t = time.perf_counter()
from kafkatier.storage.arrow.codec import encode_arrow, decode_arrow
t1 = time.perf_counter()
enc = encode_arrow(pa.table({"key": [b"k"], "value": [b"v"]}), timestamp=1)
t2 = time.perf_counter()
decode_arrow(bytes(enc.data))
t3 = time.perf_counter()
print(t1 - t, t2 - t1, t3 - t2)
"""


def first_call_s() -> float:
    """This process's first encode+decode: numba loads its cache (or compiles when empty)."""
    start = time.perf_counter()
    enc = encode_arrow(make_table(10))
    decode_arrow(bytes(enc.data))
    return time.perf_counter() - start


def cold_compile_s() -> dict[str, float]:
    """Import, first encode and first decode in a fresh process with an empty numba cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        out = subprocess.run(
            [sys.executable, "-c", _COLD], env=env, check=True, capture_output=True, text=True
        ).stdout.split()
    return dict(
        zip(("import_s", "encode_compile_s", "decode_compile_s"), map(float, out), strict=True)
    )


# --- the comparison -------------------------------------------------------------------------------


def bench_encode(table: pa.Table, repeat: int) -> dict[str, Any]:
    t_ours, enc = best_of(repeat, lambda: encode_arrow(table, max_batch_bytes=MAX_BATCH))
    t_conv, py = best_of(repeat, lambda: to_python(table))
    t_aio, data = best_of(repeat, lambda: aiokafka_encode(*py))
    return {
        "ours_s": t_ours,
        "aiokafka_s": t_aio,
        "arrow_to_python_s": t_conv,
        "aiokafka_with_conversion_s": t_aio + t_conv,
        "batches": len(enc),
        "bytes": len(enc.data),
        "same_batches": same_batches(enc.data, data),
    }


def bench_decode(data: bytes, repeat: int, n: int) -> dict[str, Any]:
    t_ours, ours = best_of(repeat, lambda: decode_arrow(data))
    t_iter, count = best_of(repeat, lambda: aiokafka_iterate(data))
    t_aio, theirs = best_of(repeat, lambda: aiokafka_to_arrow(data))
    assert ours.num_rows == count == n
    return {
        "ours_s": t_ours,
        "aiokafka_to_arrow_s": t_aio,
        "aiokafka_iterate_s": t_iter,
        "same_table": ours.equals(theirs),
    }


def run(n: int, repeat: int, cold: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "machine": {
            "nproc": os.cpu_count(),
            "usable_cpus": len(os.sched_getaffinity(0)),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "records": n,
        "repeat": repeat,
    }
    result["numba_first_call_s"] = first_call_s()
    result["numba_cold_compile"] = cold_compile_s() if cold else None
    table = make_table(n)
    result["encode"] = enc = bench_encode(table, repeat)
    plain = encode_arrow(table)
    result["decode"] = bench_decode(bytes(plain.data), repeat, n)
    result["codecs"] = [bench_codec(c, table, plain, repeat, n) for c in BARE]
    enc["ratio_vs_aiokafka"] = enc["aiokafka_s"] / enc["ours_s"]
    enc["ratio_vs_aiokafka_with_conversion"] = enc["aiokafka_with_conversion_s"] / enc["ours_s"]
    dec = result["decode"]
    dec["ratio_vs_aiokafka_to_arrow"] = dec["aiokafka_to_arrow_s"] / dec["ours_s"]
    dec["ratio_vs_aiokafka_iterate"] = dec["aiokafka_iterate_s"] / dec["ours_s"]
    result["target_met"] = min(enc["ratio_vs_aiokafka"], dec["ratio_vs_aiokafka_to_arrow"]) >= 2
    return result


def _line(name: str, seconds: float, n: int, ratio: float | None = None) -> str:
    ratio_text = f"   ours {ratio:5.2f}x faster" if ratio is not None else ""
    return f"  {name:<44} {seconds * 1000:9.1f} ms {n / seconds / 1e6:8.2f} M rec/s{ratio_text}"


def _header(r: dict[str, Any]) -> list[str]:
    m = r["machine"]
    lines = [
        f"command: {r['command']}",
        f"machine: nproc={m['nproc']} usable={m['usable_cpus']} python {m['python']} "
        f"{m['platform']}",
        f"records: {r['records']:,} ({KEY_BYTES}-byte keys, {VALUE_BYTES}-byte values), best of "
        f"{r['repeat']}; numba first call {r['numba_first_call_s']:.2f} s (excluded)",
    ]
    if c := r["numba_cold_compile"]:
        lines.append(
            f"numba cold compile (empty cache): import {c['import_s']:.2f} s, first encode "
            f"{c['encode_compile_s']:.2f} s, first decode {c['decode_compile_s']:.2f} s"
        )
    return lines


def _comparisons(r: dict[str, Any]) -> list[str]:
    n, e, d = r["records"], r["encode"], r["decode"]
    return [
        f"\nencode, uncompressed ({e['batches']} batches, {e['bytes']:,} bytes, "
        f"same batches as aiokafka: {e['same_batches']})",
        _line("encode_arrow", e["ours_s"], n),
        _line("aiokafka builder (excl. Arrow->Python)", e["aiokafka_s"], n, e["ratio_vs_aiokafka"]),
        _line("aiokafka builder (incl. Arrow->Python)", e["aiokafka_with_conversion_s"], n,
              e["ratio_vs_aiokafka_with_conversion"]),
        f"\ndecode, uncompressed (same table as aiokafka: {d['same_table']})",
        _line("decode_arrow", d["ours_s"], n),
        _line("aiokafka reader -> Arrow table", d["aiokafka_to_arrow_s"], n,
              d["ratio_vs_aiokafka_to_arrow"]),
        _line("aiokafka reader, bare iteration", d["aiokafka_iterate_s"], n,
              d["ratio_vs_aiokafka_iterate"]),
    ]  # fmt: skip


def _codec_lines(r: dict[str, Any]) -> list[str]:
    lines = ["\ncompressed (ours vs the codec library alone on the same record bytes)"]
    for c in r["codecs"]:
        lines.append(
            f"  {c['codec']:<6} {c['bytes']:>12,} B  encode {c['encode_s'] * 1000:7.1f} ms "
            f"(codec {c['codec_compress_s'] * 1000:7.1f} ms, x{c['encode_over_codec']:.2f})  "
            f"decode {c['decode_s'] * 1000:7.1f} ms (codec {c['codec_decompress_s'] * 1000:7.1f}"
            f" ms, x{c['decode_over_codec']:.2f})"
        )
    return lines


def report(r: dict[str, Any]) -> None:
    verdict = "MET" if r["target_met"] else "NOT MET"
    lines = [*_header(r), *_comparisons(r), *_codec_lines(r)]
    print("\n".join([*lines, f"\ntarget (>= 2x aiokafka on encode and decode): {verdict}"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--no-cold-compile",
        action="store_true",
        help="skip the cold numba compile in a subprocess (about 30 s)",
    )
    args = parser.parse_args(argv)
    result = run(args.records, args.repeat, not args.no_cold_compile)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)
    return 0 if result["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
