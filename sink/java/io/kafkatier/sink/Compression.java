package io.kafkatier.sink;

import com.github.luben.zstd.Zstd;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.zip.CRC32;
import java.util.zip.Deflater;
import net.jpountz.lz4.LZ4Compressor;
import net.jpountz.lz4.LZ4Factory;
import org.xerial.snappy.Snappy;

/**
 * The records of a batch compressed with the framing Kafka's producer writes for each codec
 * (kafka-format.md section 2), the same as storage/compression.py: gzip members, snappy-java's
 * "xerial" stream (16-byte header, then big-endian length + raw block per 32 KiB), Kafka's LZ4
 * frame (independent 64 KiB blocks, no checksums; level 9 is lz4's fast compressor, other
 * levels LZ4-HC, as Kafka's Lz4BlockOutputStream) and one zstd frame. The codec libraries are
 * the ones Spark itself ships (lz4-java, snappy-java, zstd-jni).
 */
final class Compression implements Serializable {
  private static final long serialVersionUID = 1L;
  static final int NONE = 0;
  static final int GZIP = 1;
  static final int SNAPPY = 2;
  static final int LZ4 = 3;
  static final int ZSTD = 4;
  private static final byte[] SNAPPY_HEADER = {
    (byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1
  };
  private static final int SNAPPY_BLOCK = 32 * 1024;
  private static final int LZ4_BLOCK = 64 * 1024;
  private static final int LZ4_DEFAULT_LEVEL = 9;
  // magic 0x184D2204 LE, FLG 0x60 (v01, independent blocks), BD 0x40 (64 KiB), header checksum
  private static final byte[] LZ4_HEADER = {0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, (byte) 0x82};

  private final int codec;
  private final Integer level;
  private transient LZ4Compressor lz4;
  private transient Deflater deflater;

  Compression(int codec, Integer level) {
    if (codec < NONE || codec > ZSTD) {
      throw new IllegalArgumentException("unknown codec id " + codec);
    }
    this.codec = codec;
    this.level = level;
  }

  boolean compressed() {
    return codec != NONE;
  }

  /** Appends src[off, off+len) compressed to out. */
  void compress(byte[] src, int off, int len, Bytes out) {
    switch (codec) {
      case GZIP:
        gzip(src, off, len, out);
        break;
      case SNAPPY:
        snappy(src, off, len, out);
        break;
      case LZ4:
        lz4(src, off, len, out);
        break;
      case ZSTD:
        zstd(src, off, len, out);
        break;
      default:
        out.put(src, off, len);
    }
  }

  private void lz4(byte[] src, int off, int len, Bytes out) {
    if (lz4 == null) {
      int lvl = level == null ? LZ4_DEFAULT_LEVEL : level;
      LZ4Factory factory = LZ4Factory.fastestInstance();
      lz4 = lvl == LZ4_DEFAULT_LEVEL ? factory.fastCompressor() : factory.highCompressor(lvl);
    }
    out.put(LZ4_HEADER, 0, LZ4_HEADER.length);
    for (int at = off, end = off + len; at < end; at += LZ4_BLOCK) {
      int n = Math.min(LZ4_BLOCK, end - at);
      int bound = lz4.maxCompressedLength(n);
      out.ensure(4 + Math.max(bound, n));
      int written = lz4.compress(src, at, n, out.data, out.size + 4, bound);
      if (written >= n) { // stored raw when compression does not shrink the block
        out.setIntLE(out.size, n | 0x80000000);
        System.arraycopy(src, at, out.data, out.size + 4, n);
        written = n;
      } else {
        out.setIntLE(out.size, written);
      }
      out.size += 4 + written;
    }
    out.ensure(4);
    out.setIntLE(out.size, 0); // end mark
    out.size += 4;
  }

  private static void snappy(byte[] src, int off, int len, Bytes out) {
    out.put(SNAPPY_HEADER, 0, SNAPPY_HEADER.length);
    try {
      for (int at = off, end = off + len; at < end; at += SNAPPY_BLOCK) {
        int n = Math.min(SNAPPY_BLOCK, end - at);
        out.ensure(4 + Snappy.maxCompressedLength(n));
        int written = Snappy.compress(src, at, n, out.data, out.size + 4);
        out.setInt(out.size, written);
        out.size += 4 + written;
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private void gzip(byte[] src, int off, int len, Bytes out) {
    if (deflater == null) {
      int lvl = level == null || level == -1 ? Deflater.DEFAULT_COMPRESSION : level;
      deflater = new Deflater(lvl, true);
    }
    deflater.reset();
    // RFC 1952 header: magic, deflate, no flags, no mtime, no extra flags, OS unknown
    out.put(new byte[] {0x1f, (byte) 0x8b, 8, 0, 0, 0, 0, 0, 0, (byte) 0xff}, 0, 10);
    deflater.setInput(src, off, len);
    deflater.finish();
    while (!deflater.finished()) {
      out.ensure(Math.max(len / 2, 8192));
      out.size += deflater.deflate(out.data, out.size, out.data.length - out.size);
    }
    CRC32 crc = new CRC32();
    crc.update(src, off, len);
    out.ensure(8);
    out.setIntLE(out.size, (int) crc.getValue());
    out.setIntLE(out.size + 4, len);
    out.size += 8;
  }

  private void zstd(byte[] src, int off, int len, Bytes out) {
    int lvl = level == null ? 3 : level;
    int bound = (int) Zstd.compressBound(len);
    out.ensure(bound);
    long written = Zstd.compressByteArray(out.data, out.size, bound, src, off, len, lvl);
    if (Zstd.isError(written)) {
      throw new IllegalStateException("zstd: " + Zstd.getErrorName(written));
    }
    out.size += (int) written;
  }
}
