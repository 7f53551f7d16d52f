"""CRC-32C as the batches use it (storage/record/crc.py: the crc32c package's extension loaded
alone) against the standard check value and the package imported whole."""

from __future__ import annotations

import random

import crc32c as package
import numpy as np

from kafkatier.storage.record.crc import crc32c


def test_the_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # CRC-32C's published check value
    assert crc32c(b"") == 0


def test_the_same_as_the_package_over_any_buffer() -> None:
    rng = random.Random(5)
    for size in (1, 7, 64, 1000, 65_537):
        data = rng.randbytes(size)
        expected = package.crc32c(data)
        assert crc32c(data) == expected
        assert crc32c(memoryview(bytearray(data))) == expected
        assert crc32c(np.frombuffer(data, np.uint8)) == expected
        cut = size // 3
        assert crc32c(data[cut:], crc32c(data[:cut])) == expected  # continued
