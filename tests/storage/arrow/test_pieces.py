"""``decode_runs``: many partitions' runs of batches in one pass give exactly what ``decode_arrow``
gives run after run (rows, filter calls, errors naming the run's file and position)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_codec import RECORD, make_table, marker

from kafkatier.storage.arrow.codec import decode_arrow, encode_arrow
from kafkatier.storage.arrow.decode import BatchHeader
from kafkatier.storage.arrow.pieces import Run, decode_runs
from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.wire import Codec, ControlType


def one_by_one(runs: list[Run]) -> pa.Table:
    tables = [
        decode_arrow(r.data, topic=r.topic, partition=r.partition, file=r.file,
                     start_offset=r.start, end_offset=r.end, batch_filter=r.batch_filter,
                     base_position=r.position)
        for r in runs
    ]  # fmt: skip
    return pa.concat_tables(tables)


RUN = st.tuples(
    st.lists(RECORD, max_size=12),
    st.sampled_from([Codec.NONE, Codec.LZ4, Codec.GZIP]),
    st.integers(0, 14),  # start
    st.integers(0, 16),  # end
    st.integers(0, 9),  # bytes cut off the end: a partial tail
    st.sampled_from(["a", "b"]),
)


@settings(max_examples=60, deadline=None)
@given(runs=st.lists(RUN, max_size=6), base=st.integers(0, 2**40))
def test_runs_decode_as_one_by_one(runs: list[tuple[Any, ...]], base: int) -> None:
    built = []
    for p, (records, codec, start, end, cut, topic) in enumerate(runs):
        data = bytes(encode_arrow(make_table(records), codec=codec, base_offset=base,
                                  max_batch_records=3).data)  # fmt: skip
        built.append(Run(data[: len(data) - cut], topic, p, base + start, base + end,
                         file=f"{topic}-{p}.log", position=17 * p))  # fmt: skip
    got = decode_runs(built)
    assert got.equals(one_by_one(built) if built else got.schema.empty_table())


def test_filters_see_their_own_batches_in_order_at_file_positions() -> None:
    txn = {"producer_id": 4, "producer_epoch": 0, "base_sequence": 0, "transactional": True}
    aborted = bytes(encode_arrow(make_table([{"value": b"x", "timestamp": 1}] * 3), **txn).data)
    data = aborted + marker(ControlType.ABORT, 3, 4)
    plain = bytes(encode_arrow(make_table([{"value": b"y", "timestamp": 1}] * 2)).data)
    seen: dict[str, list[tuple[int, bool]]] = {"t0": [], "t2": []}

    def dropping(name: str) -> Any:
        def keep(header: BatchHeader) -> bool:
            seen[name].append((header.position, header.is_control))
            return not header.is_transactional

        return keep

    runs = [
        Run(data, "t", 0, 0, 10, dropping("t0"), "t-0.log", 100),
        Run(plain, "t", 1, 0, 10, None, "t-1.log", 0),
        Run(data, "t", 2, 0, 10, dropping("t2"), "t-2.log", 5),
    ]
    table = decode_runs(runs)
    assert table.column("partition").to_pylist() == [1, 1]
    assert seen == {"t0": [(100, False), (100 + len(aborted), True)],
                    "t2": [(5, False), (5 + len(aborted), True)]}  # fmt: skip


def test_an_error_names_the_file_and_position_of_its_run() -> None:
    good = bytes(encode_arrow(make_table([{"value": b"v", "timestamp": 1}] * 4)).data)
    bad = bytearray(good)
    bad[70] ^= 0xFF
    runs = [Run(good, "t", 0, 0, 9, file="t-0.log"), Run(bytes(bad), "t", 1, 0, 9,
                                                        file="t-1.log", position=4096)]  # fmt: skip
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        decode_runs(runs)
    assert (info.value.file, info.value.position) == ("t-1.log", 4096)
