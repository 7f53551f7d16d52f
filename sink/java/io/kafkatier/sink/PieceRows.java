package io.kafkatier.sink;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;

/**
 * The staged pieces' rows (PieceOutput's: task, topic, partition, records, path, position,
 * length) packed for the driver's Python in one byte array, little-endian (sink/pieces.py's
 * unpack_pieces reads it):
 *
 * <pre>
 * names int32, then each name: length int32, UTF-8 bytes (topics and paths, each once) |
 * rows int32, then each row: task int32 | topic int32 (its name's index) | partition int32 |
 *   path int32 (its name's index) | records int64 | position int64 | length int64
 * </pre>
 */
final class PieceRows {
  static final int ROW_BYTES = 4 * 4 + 3 * 8;

  private PieceRows() {}

  /** One task's rows packed (an iterator of one array, for mapPartitions). */
  static java.util.Iterator<byte[]> packTask(java.util.Iterator<Row> rows) {
    List<Row> all = new ArrayList<>();
    rows.forEachRemaining(all::add);
    return java.util.List.of(pack(all)).iterator();
  }

  /** The tasks' packed rows one after the other: their count, then each one's length and bytes. */
  static byte[] join(List<byte[]> tasks) {
    int size = 4;
    for (byte[] t : tasks) {
      size += 4 + t.length;
    }
    ByteBuffer out = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    out.putInt(tasks.size());
    for (byte[] t : tasks) {
      out.putInt(t.length).put(t);
    }
    return out.array();
  }

  static byte[] pack(List<Row> rows) {
    Names names = new Names();
    int[] topics = new int[rows.size()];
    int[] paths = new int[rows.size()];
    for (int i = 0; i < rows.size(); i++) {
      Row r = rows.get(i);
      if (r.isNullAt(4)) {
        throw new IllegalStateException("a piece without a staging file: not a staged job");
      }
      topics[i] = names.index(r.getString(1));
      paths[i] = names.index(r.getString(4));
    }
    ByteBuffer out = ByteBuffer.allocate(names.bytes + 8 + rows.size() * ROW_BYTES)
        .order(ByteOrder.LITTLE_ENDIAN);
    out.putInt(names.utf8.size());
    for (byte[] name : names.utf8) {
      out.putInt(name.length).put(name);
    }
    out.putInt(rows.size());
    for (int i = 0; i < rows.size(); i++) {
      Row r = rows.get(i);
      out.putInt(r.getInt(0)).putInt(topics[i]).putInt(r.getInt(2)).putInt(paths[i]);
      out.putLong(r.getLong(3)).putLong(r.getLong(5)).putLong(r.getLong(6));
    }
    return out.array();
  }

  /** The names of one task's rows, each once, in first-use order, and their packed size. */
  private static final class Names {
    final Map<String, Integer> index = new HashMap<>();
    final List<byte[]> utf8 = new ArrayList<>();
    int bytes;

    int index(String name) {
      return index.computeIfAbsent(name, n -> {
        byte[] encoded = n.getBytes(StandardCharsets.UTF_8);
        utf8.add(encoded);
        bytes += 4 + encoded.length;
        return utf8.size() - 1;
      });
    }
  }
}
