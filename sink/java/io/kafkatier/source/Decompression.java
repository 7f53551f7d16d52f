package io.kafkatier.source;

import com.github.luben.zstd.ZstdInputStream;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import java.util.zip.GZIPInputStream;
import net.jpountz.lz4.LZ4FrameInputStream;
import org.xerial.snappy.SnappyInputStream;

/**
 * The records of a compressed batch, inflated into one buffer reused from batch to batch:
 * gzip, snappy-java's xerial stream, LZ4 frames and zstd frames (kafka-format.md section 2),
 * with the codec libraries Spark itself ships.
 */
final class Decompression {
  static final int MAX_CODEC = 4;
  private byte[] out = new byte[1 << 16];

  byte[] buffer() {
    return out;
  }

  /** Inflates {@code src[at, at+length)} compressed with {@code codec}; the bytes written. */
  int inflate(int codec, byte[] src, int at, int length) throws IOException {
    try (InputStream in = stream(codec, new ByteArrayInputStream(src, at, length))) {
      int n = 0;
      while (true) {
        if (n == out.length) {
          out = Arrays.copyOf(out, n * 2);
        }
        int read = in.read(out, n, out.length - n);
        if (read < 0) {
          return n;
        }
        n += read;
      }
    }
  }

  private static InputStream stream(int codec, InputStream raw) throws IOException {
    switch (codec) {
      case 1:
        return new GZIPInputStream(raw, 64 * 1024);
      case 2:
        return new SnappyInputStream(raw);
      case 3:
        return new LZ4FrameInputStream(raw);
      case 4:
        return new ZstdInputStream(raw);
      default:
        throw new IOException("unknown compression codec id " + codec);
    }
  }
}
