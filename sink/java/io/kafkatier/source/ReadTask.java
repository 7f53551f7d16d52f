package io.kafkatier.source;

import org.apache.spark.sql.connector.read.InputPartition;

/** One Spark task: the ranges the planner packed into it (sink/source/split.py), in order. */
final class ReadTask implements InputPartition {
  private static final long serialVersionUID = 1L;
  final ReadRange[] ranges;

  ReadTask(ReadRange[] ranges) {
    this.ranges = ranges;
  }
}
