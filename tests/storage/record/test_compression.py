"""Compression framings against kafka-format.md §2 (and §13.10's Lz4CompressionTest rules)."""

from __future__ import annotations

import gzip
import json
import os
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import cast

import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.errors import CompressionError
from kafkatier.storage.record import lz4_frame
from kafkatier.storage.record.compression import SNAPPY_HEADER, compress, decompress
from kafkatier.storage.wire import Codec

LZ4_VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "vectors" / "lz4_frame.json").read_text()
)
COMPRESSED = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
# Compressible and incompressible parts, bigger than every codec's block size.
MIXED = os.urandom(70_000) + b"kafka " * 30_000


def _lz4_blocks(frame: bytes, start: int = 7) -> list[tuple[bool, bytes]]:
    """(stored raw?, block bytes) of a frame with no checksums, read independently of our reader."""
    blocks: list[tuple[bool, bytes]] = []
    pos = start
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            assert pos == len(frame)
            return blocks
        size = word & 0x7FFFFFFF
        blocks.append((bool(word >> 31), frame[pos : pos + size]))
        pos += size


# ------------------------------------------------------------------ all codecs


@settings(max_examples=40, deadline=None)
@given(codec=st.sampled_from(list(Codec)), data=st.binary(max_size=3000))
def test_round_trip(codec: Codec, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_round_trip_large_and_from_memoryview(codec: Codec) -> None:
    framed = compress(codec, memoryview(MIXED))
    assert decompress(codec, memoryview(framed)) == MIXED
    assert decompress(codec, bytearray(framed)) == MIXED


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_raises_compression_error_naming_codec(codec: Codec) -> None:
    with pytest.raises(CompressionError) as info:
        decompress(codec, b"\x00\x01 definitely not compressed \xff" * 3)
    assert info.value.codec == codec.kafka_name


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_truncated_stream_is_an_error(codec: Codec) -> None:
    framed = compress(codec, MIXED)
    with pytest.raises(CompressionError):
        decompress(codec, framed[: len(framed) - 5])


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_ids(codec_id: int) -> None:
    with pytest.raises(CompressionError):
        decompress(cast(Codec, codec_id), b"abc")
    with pytest.raises(CompressionError):
        compress(cast(Codec, codec_id), b"abc")


@pytest.mark.parametrize(
    ("codec", "level"), [(Codec.GZIP, 0), (Codec.GZIP, 10), (Codec.LZ4, 18), (Codec.ZSTD, 23)]
)
def test_levels_outside_kafkas_ranges_are_rejected(codec: Codec, level: int) -> None:
    with pytest.raises(CompressionError):
        compress(codec, b"abc", level)


# ------------------------------------------------------------------ gzip


def test_gzip_writes_an_rfc1952_member_readable_by_python_gzip() -> None:
    framed = compress(Codec.GZIP, MIXED, 1)
    assert framed[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(framed) == MIXED


def test_gzip_reads_concatenated_members_and_ignores_trailing_garbage() -> None:
    two = gzip.compress(b"first ", mtime=0) + gzip.compress(b"second", mtime=0)
    assert decompress(Codec.GZIP, two) == b"first second"
    assert decompress(Codec.GZIP, two + b"\x00junk") == b"first second"


# ------------------------------------------------------------------ snappy


def test_snappy_xerial_framing_is_exact() -> None:
    framed = compress(Codec.SNAPPY, MIXED)
    assert framed[:16] == bytes.fromhex("82534e41505059000000000100000001") == SNAPPY_HEADER
    pos, chunks = 16, []
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert pos == len(framed)
    assert [len(c) for c in chunks] == [32768] * (len(MIXED) // 32768) + [len(MIXED) % 32768]
    assert b"".join(chunks) == MIXED


def test_snappy_empty_input_is_just_the_header() -> None:
    assert compress(Codec.SNAPPY, b"") == SNAPPY_HEADER


def test_snappy_output_reads_with_aiokafka() -> None:
    from aiokafka.codec import snappy_decode

    assert snappy_decode(compress(Codec.SNAPPY, MIXED)) == MIXED


def test_snappy_reads_raw_blocks_without_the_header() -> None:
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(MIXED))) == MIXED


def test_snappy_reads_concatenated_streams() -> None:
    both = compress(Codec.SNAPPY, b"one " * 100) + compress(Codec.SNAPPY, b"two " * 100)
    assert decompress(Codec.SNAPPY, both) == b"one " * 100 + b"two " * 100


def test_snappy_rejects_googles_framing_format() -> None:
    google = bytes(cramjam.snappy.compress(b"hello world " * 100))
    assert google.startswith(b"\xff\x06\x00\x00sNaPpY")
    with pytest.raises(CompressionError):
        decompress(Codec.SNAPPY, google)


def test_snappy_negative_chunk_length_is_an_error() -> None:
    with pytest.raises(CompressionError, match="chunk size"):
        decompress(Codec.SNAPPY, SNAPPY_HEADER + b"\xff\xff\xff\xfe" + b"x" * 10)


# ------------------------------------------------------------------ lz4


def test_lz4_header_and_empty_frame_match_kafka() -> None:
    assert compress(Codec.LZ4, b"") == bytes.fromhex(LZ4_VECTORS["empty_frame"])
    assert compress(Codec.LZ4, MIXED).startswith(bytes.fromhex(LZ4_VECTORS["header_v2"]))
    assert decompress(Codec.LZ4, bytes.fromhex(LZ4_VECTORS["empty_frame"])) == b""


def test_lz4_header_checksum_is_second_byte_of_xxh32() -> None:
    header = bytes.fromhex(LZ4_VECTORS["header_v2"])
    assert header[6] == (lz4_frame.xxh32(header[4:6]) >> 8) & 0xFF
    # Published XXH32 check values (seed 0).
    assert lz4_frame.xxh32(b"") == 0x02CC5D05
    assert lz4_frame.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_blocks_are_independent_64k_with_raw_bit_when_not_smaller() -> None:
    framed = compress(Codec.LZ4, MIXED)
    blocks = _lz4_blocks(framed)
    decoded = [
        raw_block if raw else lz4.block.decompress(raw_block, uncompressed_size=65536)
        for raw, raw_block in blocks
    ]
    assert [len(d) for d in decoded[:-1]] == [65536] * (len(decoded) - 1)
    assert b"".join(decoded) == MIXED
    assert blocks[0][0]  # random bytes do not compress: stored raw, bit 31 set
    assert not blocks[-1][0]
    assert lz4.frame.decompress(framed) == MIXED  # a standard reader agrees


def test_lz4_incompressible_small_payload_is_one_raw_block() -> None:
    data = bytes(range(36))
    framed = compress(Codec.LZ4, data)
    assert framed == bytes.fromhex("04224d18604082") + b"\x24\x00\x00\x80" + data + b"\0" * 4


def _frame(**kwargs: object) -> bytes:
    out: bytes = lz4.frame.compress(MIXED, block_size=lz4.frame.BLOCKSIZE_MAX64KB, **kwargs)
    return out


def test_lz4_reader_accepts_content_size_and_block_checksums() -> None:
    framed = _frame(block_linked=False, store_size=True, block_checksum=True)
    assert framed[4] & 0x18 == 0x18
    assert decompress(Codec.LZ4, framed) == MIXED


def test_lz4_block_checksum_mismatch_is_an_error() -> None:
    framed = bytearray(_frame(block_linked=False, store_size=False, block_checksum=True))
    framed[-5] ^= 0xFF  # the last byte of the last block's checksum (before the end mark)
    with pytest.raises(CompressionError, match="checksum"):
        decompress(Codec.LZ4, bytes(framed))


def test_lz4_content_checksum_is_read_but_not_verified() -> None:
    framed = bytearray(_frame(block_linked=False, store_size=False, content_checksum=True))
    assert framed[4] & 0x04
    framed[-1] ^= 0xFF
    assert decompress(Codec.LZ4, bytes(framed)) == MIXED


def test_lz4_rejects_linked_blocks() -> None:
    linked = _frame(block_linked=True)
    with pytest.raises(CompressionError, match="linked"):
        decompress(Codec.LZ4, linked)


def test_lz4_rejects_dictionary_ids() -> None:
    flg, bd = 0x61, 0x40
    hc = (lz4_frame.xxh32(bytes([flg, bd]) + b"\x07\x00\x00\x00") >> 8) & 0xFF
    framed = lz4_frame.MAGIC + bytes([flg, bd]) + b"\x07\x00\x00\x00" + bytes([hc]) + b"\0" * 4
    with pytest.raises(CompressionError, match="dictionary"):
        decompress(Codec.LZ4, framed)


def test_lz4_corrupt_header_checksum() -> None:
    framed = bytearray(compress(Codec.LZ4, MIXED))
    framed[LZ4_VECTORS["header_checksum_byte"]] ^= 0x01
    with pytest.raises(CompressionError, match="descriptor corrupted"):
        decompress(Codec.LZ4, bytes(framed))
    # Magic 0 wrote a wrong checksum, so Kafka ignores it there.
    assert lz4_frame.decompress(bytes(framed), ignore_header_checksum=True) == MIXED


def test_lz4_block_larger_than_max_is_an_error() -> None:
    framed = bytes.fromhex("04224d18604082") + struct.pack("<I", 65537) + b"\0" * 65537
    with pytest.raises(CompressionError, match="exceeds max"):
        decompress(Codec.LZ4, framed + b"\0" * 4)


SMALL = os.urandom(3_000) + b"kafka " * 1_000  # one 64 KiB block: a batch of small records


def _one_block(**kwargs: object) -> bytes:
    out: bytes = lz4.frame.compress(SMALL, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                    block_linked=False, **kwargs)  # fmt: skip
    return out


@pytest.mark.parametrize(
    ("name", "framed", "decoded"),
    [
        ("kafka's layout", compress(Codec.LZ4, SMALL), SMALL),
        ("a raw block", compress(Codec.LZ4, bytes(range(36))), bytes(range(36))),
        ("two blocks", compress(Codec.LZ4, MIXED), None),
        ("content size", _one_block(store_size=True), None),
        ("block checksum", _one_block(store_size=False, block_checksum=True), None),
        ("content checksum", _one_block(store_size=False, content_checksum=True), None),
        ("bytes after the end mark", compress(Codec.LZ4, SMALL) + b"\0", None),
        ("no end mark", compress(Codec.LZ4, SMALL)[:-4], None),
        ("a corrupt block", (lambda f: f[:11] + b"\xff" * (len(f) - 15) + f[-4:])(
            compress(Codec.LZ4, SMALL)), None),
        ("an empty frame", compress(Codec.LZ4, b""), None),
    ],
)
def test_lz4_kafka_frame_fast_path_decodes_only_kafkas_one_block_layout(
    name: str, framed: bytes, decoded: bytes | None
) -> None:
    """``decode_kafka_frame`` (the cleaner's one-call path) decodes exactly Kafka's one-block
    frame and declines everything else, which the full reader then takes, reads the same and
    reports; it never decodes what the full reader would refuse."""
    assert lz4_frame.decode_kafka_frame(memoryview(framed)) == decoded, name
    if decoded is not None:
        assert decompress(Codec.LZ4, framed) == decoded


def test_lz4_non_default_level_uses_hc_and_still_reads() -> None:
    framed = compress(Codec.LZ4, MIXED, 12)
    assert framed.startswith(bytes.fromhex(LZ4_VECTORS["header_v2"]))
    assert decompress(Codec.LZ4, framed) == MIXED


# ------------------------------------------------------------------ zstd


def test_zstd_default_level_is_3() -> None:
    assert compress(Codec.ZSTD, MIXED) == zstandard.ZstdCompressor(level=3).compress(MIXED)


def test_zstd_reads_streamed_frames_without_content_size_and_concatenated_frames() -> None:
    stream = zstandard.ZstdCompressor(level=3).compressobj()
    no_size = stream.compress(MIXED) + stream.flush()
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(no_size)  # why streaming is needed
    assert decompress(Codec.ZSTD, no_size) == MIXED
    assert decompress(Codec.ZSTD, no_size + compress(Codec.ZSTD, b"tail")) == MIXED + b"tail"


def test_zstd_sized_frames_one_shot_or_streamed_decode_alike() -> None:
    """A frame with its content size is decoded in one call; two of them, or one claiming more
    than the one-shot limit, fall back to the streaming decoder with the same result."""
    sized = compress(Codec.ZSTD, MIXED)
    assert zstandard.frame_content_size(sized) == len(MIXED)
    assert decompress(Codec.ZSTD, sized) == MIXED
    assert decompress(Codec.ZSTD, sized + compress(Codec.ZSTD, b"tail")) == MIXED + b"tail"
    huge = b"\0" * (80 << 20)
    assert decompress(Codec.ZSTD, compress(Codec.ZSTD, huge)) == huge  # over 64 MiB: streamed


def _streamed(data: bytes) -> bytes:
    """The streaming decoder alone, frame by frame (the reference for the one-shot path)."""
    out, rest = [], data
    while rest:
        frame = zstandard.ZstdDecompressor().decompressobj()
        out.append(frame.decompress(rest))
        if not frame.eof:
            raise zstandard.ZstdError("truncated")
        rest = frame.unused_data
    return b"".join(out)


def test_zstd_damaged_sized_frames_decode_or_fail_as_streamed() -> None:
    """Every byte of a sized frame flipped in turn: the result is the streaming decoder's, or
    one CompressionError where it fails (zstd has no checksum here: the batch CRC catches what
    decodes to other bytes)."""
    sized = compress(Codec.ZSTD, MIXED[:600])
    for at in range(len(sized)):
        damaged = bytearray(sized)
        damaged[at] ^= 0xFF
        try:
            expected: bytes | None = _streamed(bytes(damaged))
        except zstandard.ZstdError:
            expected = None
        if expected is None:
            with pytest.raises(CompressionError, match="zstd"):
                decompress(Codec.ZSTD, bytes(damaged))
        else:
            assert decompress(Codec.ZSTD, bytes(damaged)) == expected


def test_zstd_contexts_are_per_thread_and_per_level() -> None:
    """The cached contexts give what fresh ones give, at every level, from many threads."""
    for level in (1, 3, 19):
        fresh = zstandard.ZstdCompressor(level=level).compress(MIXED)
        assert compress(Codec.ZSTD, MIXED, level) == fresh
    payloads = [MIXED[i:] * 3 for i in range(0, 400, 25)]
    framed = [compress(Codec.ZSTD, p) for p in payloads]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(20):
            assert list(pool.map(lambda f: decompress(Codec.ZSTD, f), framed)) == payloads


def test_zstd_trailing_garbage_is_an_error() -> None:
    with pytest.raises(CompressionError, match="zstd"):
        decompress(Codec.ZSTD, compress(Codec.ZSTD, b"abc") + b"garbage")


def test_gzip_default_level_matches_zlib_default() -> None:
    framed = compress(Codec.GZIP, MIXED)
    raw = zlib.compressobj(-1, zlib.DEFLATED, -zlib.MAX_WBITS)
    assert framed[10:-8] == raw.compress(MIXED) + raw.flush()
