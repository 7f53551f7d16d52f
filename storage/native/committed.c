/* The sink's committed appends of a micro-batch, every partition in one call: what
 * storage/log/committed.py's write_committed does for one partition in Python (about 30 us of
 * calls a partition, 1,024 partitions a micro-batch), over arrays, with the Python around it
 * reduced to reading each partition's state and setting what changed
 * (storage/log/committed_all.py says which state, and why the rules are the same).
 *
 * Per partition, `in` holds KT_COMMIT_IN int64s (the kt_commit_in names below) and `out`
 * receives KT_COMMIT_OUT. A partition is taken only where every check of write_committed's
 * one-pass case holds over its batches and the marker: each batch of the producer at its epoch,
 * a transactional data batch, in the topic's codec (-1: any), within the batch size limit; its
 * new last sequence none of the producer's retained ones; the first new sequence following the
 * producer's last; everything within the segment's room, the marker's offset relative to the
 * segment's base within int32, an index slot for every batch and the marker, and no timestamp
 * past the segment.ms limit. A partition not taken keeps its bytes untouched (out status > 0
 * says which check failed), and the caller appends it the full way.
 *
 * A taken partition's batches get their base sequences (from its first sequence on; the CRC
 * rewritten), base offsets (from the producer state's end offset on) and the leader epoch in
 * place; the marker template is copied into `markers` (one slot a partition) with its offset and
 * leader epoch; its index entries are packed into `offset_entries` / `time_entries` (slots from
 * batch_start + partition: at most one a batch and the marker) by Kafka's index.interval.bytes
 * rule as LogSegment._index_batches applies it; `batch_out` receives each batch's retained
 * metadata (last sequence, last offset, offset delta, max timestamp); and ops / iovs receive
 * the partition's write (its batches and marker at the segment's end, on `fd`), one entry per
 * taken partition in order. Returns the entries written, or -1 where the CPU has no CRC-32C
 * instruction (nothing done: the caller appends every partition the Python way). */
#include <stdint.h>
#include <string.h>

#include "bytes.h"
#include "kernels.h"

#define HEADER 61
#define CRC_START 21
#define ATTR_CODEC_MASK 0x07
#define ATTR_KIND 0x30 /* transactional | control */
#define ATTR_TRANSACTIONAL 0x10
#define INT32_MAX_ 2147483647LL
#define RETAINED 5

enum kt_commit_in {
    I_BATCH_START, I_BATCH_COUNT, I_FIRST_SEQUENCE, I_LAST_SEQ, I_FIRST_OFFSET, I_BASE_OFFSET,
    I_POSITION, I_ROOM, I_LIMIT, I_CODEC, I_INDEX_ROOM, I_SINCE, I_INTERVAL, I_BEST_TS,
    I_BEST_OFFSET, I_LAST_TIME_TS, I_TIME_LIMIT, I_LEADER_EPOCH, I_FD, I_RETAINED
};
enum kt_commit_out {
    O_STATUS, O_END_OFFSET, O_SIZE, O_RECORDS, O_LARGEST, O_SINCE, O_BEST_TS, O_BEST_OFFSET,
    O_OFFSET_ENTRIES, O_TIME_ENTRIES, O_FIRST_OFFSET, O_LAST_OFFSET, O_FIRST_TIME_TS,
    O_FIRST_TIME_OFFSET, O_LAST_TIME_TS, O_LAST_TIME_OFFSET
};
_Static_assert(I_RETAINED + RETAINED == KT_COMMIT_IN, "kt_commit_in's fields");
_Static_assert(O_LAST_TIME_OFFSET + 1 == KT_COMMIT_OUT, "kt_commit_out's fields");

/* Kafka's incrementSequence: wraps from INT32_MAX to 0. */
static inline int64_t increment(int64_t sequence, int64_t by) {
    return sequence > INT32_MAX_ - by ? by - (INT32_MAX_ - sequence) - 1 : sequence + by;
}

/* Why partition `in` cannot be taken (0: it can), its batches read, nothing written. */
static int64_t refuse(const int64_t *in, uint8_t *const *bufs, const int64_t *lens,
                      int64_t producer_id, int64_t producer_epoch, int64_t marker_len) {
    int64_t sequence = in[I_FIRST_SEQUENCE], offset = in[I_FIRST_OFFSET];
    int64_t size = marker_len, count = in[I_BATCH_COUNT];
    int64_t last_seq = in[I_LAST_SEQ];
    if (count <= 0) return 1;
    if (!(sequence == last_seq + 1 || (sequence == 0 && last_seq == INT32_MAX_))) return 2;
    if (marker_len > in[I_LIMIT] || count + 1 > in[I_INDEX_ROOM]) return 3;
    for (int64_t i = in[I_BATCH_START]; i < in[I_BATCH_START] + count; i++) {
        const uint8_t *p = bufs[i];
        int64_t attributes = (int16_t)kt_be(p + 21, 2), delta = (int32_t)kt_be(p + 23, 4);
        if (lens[i] < HEADER || lens[i] > in[I_LIMIT] || p[16] != 2) return 4;
        if ((int32_t)kt_be(p + 57, 4) != delta + 1 || delta < 0) return 4;
        if (kt_be(p + 43, 8) != producer_id || (int16_t)kt_be(p + 51, 2) != producer_epoch) return 5;
        if ((attributes & ATTR_KIND) != ATTR_TRANSACTIONAL) return 6;
        if (in[I_CODEC] >= 0 && (attributes & ATTR_CODEC_MASK) != in[I_CODEC]) return 7;
        if ((int64_t)kt_be(p + 35, 8) > in[I_TIME_LIMIT]) return 8;
        int64_t last = increment(sequence, delta);
        for (int r = 0; r < RETAINED; r++) {
            if (in[I_RETAINED + r] == last) return 9;
        }
        sequence = increment(sequence, (int32_t)kt_be(p + 57, 4));
        offset += delta + 1;
        size += lens[i];
    }
    if (size > in[I_ROOM] || offset - in[I_BASE_OFFSET] > INT32_MAX_) return 10;
    return 0;
}

/* One entry per due batch (LogSegment._index_batches' loop): `at` the batch's position in the
 * segment, `last` its last offset, `ts` its max timestamp. */
typedef struct {
    int64_t since, best_ts, best_offset, last_time_ts, interval, base, entries, times;
    uint8_t *offsets, *timestamps;
    int64_t *out;
} indexer;

static void index_batch(indexer *x, int64_t at, int64_t size, int64_t last, int64_t ts) {
    if (ts > x->best_ts) {
        x->best_ts = ts;
        x->best_offset = last;
    }
    if (x->since > x->interval) {
        kt_put_be(x->offsets + 8 * x->entries, 4, (uint64_t)(last - x->base));
        kt_put_be(x->offsets + 8 * x->entries + 4, 4, (uint64_t)at);
        x->out[x->entries ? O_LAST_OFFSET : O_FIRST_OFFSET] = last;
        x->out[O_LAST_OFFSET] = last;
        x->entries++;
        if (x->best_ts > x->last_time_ts) {
            kt_put_be(x->timestamps + 12 * x->times, 8, (uint64_t)x->best_ts);
            kt_put_be(x->timestamps + 12 * x->times + 8, 4, (uint64_t)(x->best_offset - x->base));
            if (!x->times) {
                x->out[O_FIRST_TIME_TS] = x->best_ts;
                x->out[O_FIRST_TIME_OFFSET] = x->best_offset;
            }
            x->out[O_LAST_TIME_TS] = x->best_ts;
            x->out[O_LAST_TIME_OFFSET] = x->best_offset;
            x->last_time_ts = x->best_ts;
            x->times++;
        }
        x->since = 0;
    }
    x->since += size;
}

/* Partition `in`'s batches and marker stamped, indexed and queued (refuse() said yes). */
static void take(const int64_t *in, int64_t *out, uint8_t *const *bufs, const int64_t *lens,
                 int64_t *batch_out, const uint8_t *marker, int64_t marker_len, uint8_t *own,
                 indexer *x, kt_write *op, kt_iov *iov) {
    int64_t sequence = in[I_FIRST_SEQUENCE], offset = in[I_FIRST_OFFSET];
    int64_t position = 0, records = 1, largest = (int64_t)kt_be(marker + 35, 8);
    int64_t start = in[I_BATCH_START], count = in[I_BATCH_COUNT];
    for (int64_t i = start; i < start + count; i++) {
        uint8_t *p = bufs[i];
        int64_t delta = (int32_t)kt_be(p + 23, 4), max_ts = (int64_t)kt_be(p + 35, 8);
        kt_put_be(p + 53, 4, (uint64_t)sequence);
        kt_put_be(p + 17, 4, kt_crc32c(p + CRC_START, lens[i] - CRC_START));
        kt_put_be(p, 8, (uint64_t)offset);
        kt_put_be(p + 12, 4, (uint64_t)in[I_LEADER_EPOCH]);
        int64_t *meta = batch_out + 4 * i;
        meta[0] = increment(sequence, delta);
        meta[1] = offset + delta;
        meta[2] = delta;
        meta[3] = max_ts;
        index_batch(x, in[I_POSITION] + position, lens[i], offset + delta, max_ts);
        iov[i - start].base = p;
        iov[i - start].len = (size_t)lens[i];
        sequence = increment(sequence, (int32_t)kt_be(p + 57, 4));
        records += (int32_t)kt_be(p + 57, 4);
        largest = max_ts > largest ? max_ts : largest;
        offset += delta + 1;
        position += lens[i];
    }
    memcpy(own, marker, (size_t)marker_len);
    kt_put_be(own, 8, (uint64_t)offset);
    kt_put_be(own + 12, 4, (uint64_t)in[I_LEADER_EPOCH]);
    index_batch(x, in[I_POSITION] + position, marker_len, offset, (int64_t)kt_be(marker + 35, 8));
    iov[count].base = own;
    iov[count].len = (size_t)marker_len;
    *op = (kt_write){(int32_t)in[I_FD], (int32_t)(count + 1), iov, in[I_POSITION],
                     position + marker_len, 0};
    out[O_END_OFFSET] = offset + 1;
    out[O_SIZE] = position + marker_len;
    out[O_RECORDS] = records;
    out[O_LARGEST] = largest;
}

int64_t kt_commit_all(int64_t parts, const int64_t *in, int64_t *out, uint8_t *const *bufs,
                      const int64_t *lens, int64_t *batch_out, int64_t producer_id,
                      int64_t producer_epoch, const uint8_t *marker, int64_t marker_len,
                      uint8_t *markers, uint8_t *offset_entries, uint8_t *time_entries,
                      kt_write *ops, kt_iov *iovs) {
    if (!kt_crc_available()) return -1;
    int64_t taken = 0;
    for (int64_t k = 0; k < parts; k++) {
        const int64_t *pin = in + k * KT_COMMIT_IN;
        int64_t *pout = out + k * KT_COMMIT_OUT;
        memset(pout, 0, sizeof(int64_t) * KT_COMMIT_OUT);
        pout[O_STATUS] = refuse(pin, bufs, lens, producer_id, producer_epoch, marker_len);
        if (pout[O_STATUS]) continue;
        int64_t slot = pin[I_BATCH_START] + k; /* the partition's first entry and iovec slot */
        indexer x = {pin[I_SINCE], pin[I_BEST_TS], pin[I_BEST_OFFSET], pin[I_LAST_TIME_TS],
                     pin[I_INTERVAL], pin[I_BASE_OFFSET], 0, 0, offset_entries + 8 * slot,
                     time_entries + 12 * slot, pout};
        take(pin, pout, bufs, lens, batch_out, marker, marker_len, markers + k * marker_len, &x,
             ops + taken, iovs + slot);
        pout[O_SINCE] = x.since;
        pout[O_BEST_TS] = x.best_ts;
        pout[O_BEST_OFFSET] = x.best_offset;
        pout[O_OFFSET_ENTRIES] = x.entries;
        pout[O_TIME_ENTRIES] = x.times;
        taken++;
    }
    return taken;
}
