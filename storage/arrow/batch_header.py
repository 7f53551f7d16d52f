"""numpy's view of the record batch v2 header (``wire.BATCH_HEADER``, kafka-format.md §1.2), so
whole arrays of headers convert in one step: the encoder fills them, the decoder reads them."""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from kafkatier.storage.wire import BATCH_HEADER, BATCH_HEADER_SIZE


def _header_dtype() -> np.dtype[Any]:
    names = (
        "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
        "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
        "base_sequence", "records_count",
    )  # fmt: skip
    codes = {"q": ">i8", "i": ">i4", "b": "i1", "I": ">u4", "h": ">i2"}
    fmt = BATCH_HEADER.format.lstrip(">")
    dtype = np.dtype([(name, codes[c]) for name, c in zip(names, fmt, strict=True)])
    assert dtype.itemsize == BATCH_HEADER_SIZE
    return dtype


BATCH_HEADER_DTYPE: Final = _header_dtype()
