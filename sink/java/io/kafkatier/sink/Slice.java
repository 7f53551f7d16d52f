package io.kafkatier.sink;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A key or value of the row being encoded: length bytes of data from offset, or null (length
 * -1). Where the row keeps the bytes in a Java array (a string; a binary field of an UnsafeRow
 * or of a column batch's writable vector, on the heap) the slice points into that array and the
 * record's bytes are copied once, into its batch (getBinary's copy was a sixth of a streaming
 * micro-batch's encode tasks, Java Flight Recorder); elsewhere getBinary's copy is taken. A view
 * is valid until the row moves on.
 */
final class Slice {
  static final int NULL = -1;
  byte[] data;
  int offset;
  int length = NULL;

  boolean isNull() {
    return length == NULL;
  }

  void set(byte[] bytes) {
    data = bytes;
    offset = 0;
    length = bytes == null ? NULL : bytes.length;
  }

  /**
   * The field at ordinal of row, a string or a binary; viewable: the row's getUTF8String of a
   * binary field gives its bytes (UnsafeRow, WritableColumnVector; not every row does: a
   * GenericInternalRow holds a byte array, Arrow's and constant vectors throw or answer null).
   */
  void read(InternalRow row, int ordinal, boolean string, boolean viewable) {
    if (ordinal < 0 || row.isNullAt(ordinal)) {
      set(null);
    } else if (string || viewable) {
      view(row.getUTF8String(ordinal));
    } else {
      set(row.getBinary(ordinal));
    }
  }

  private void view(UTF8String s) {
    if (s.getBaseObject() instanceof byte[] array) {
      data = array;
      offset = (int) (s.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET);
      length = s.numBytes();
    } else {
      set(s.getBytes()); // off the heap
    }
  }
}
