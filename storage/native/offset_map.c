/* The cleaner's offset-map build over a buffer of plain batches in C: what the numba kernel
 * storage/cleaner/kernels/chunks.py map_chunk does with the MurmurHash3 digest (the cleaner's;
 * Kafka's MD5 stays in numba), with the same results (a test holds the two to the same table,
 * size, latest offset and superseded bits). Why a second build of it: on the compaction
 * bench's 1M records in one buffer numba's took 143-168 ms, this 58-75 (ad hoc, same table);
 * within a compaction, where the table's cache misses weigh more, 0.13-0.22 s against
 * 0.10-0.19 (the rest is those misses: perf puts the stalls on the probes' loads).
 *
 * A plain batch is a whole v2 batch of the buffer, magic 2, neither compressed, control nor
 * transactional, with a record count >= 0 (kafka-format.md section 1); the walk stops at the
 * first other batch, or at a batch whose records do not scan exactly (the Python path then takes
 * it with its errors). The table is (slots, 3) uint64 rows: a digest's two little-endian words
 * (all zero: empty) and an offset, probed in Kafka's SkimpyOffsetMap sequence
 * (storage/cleaner/kernels/slots.py says it once in Python; cleaner.h's kt_probe follows it). */
#include "cleaner.h"
#include "kernels.h"

/* How many puts ahead a slot is prefetched. All of a batch's slots prefetched at once as its
 * keys were scanned (a hundred in the bench's batches) stalled on the prefetches themselves
 * (perf put a third of this kernel's samples on the instruction after them, the load queue
 * full): the map build of bench/compaction.py's zstd input took 131 ms against 122 with this
 * (and kt_probe's 32-bit division), medians of 12 alternating rounds (2026-12-02, stop 71). */
#define KT_AHEAD 16

/* The keys to put of the batch's `count` records in [p, end) (offset at or after `start`, key
 * not null): their digests, offsets and first probes into the scratch; how many,
 * or -1 where the records do not scan exactly (records.py scan_records' rule). */
static int64_t scan_keys(const uint8_t *p, const uint8_t *end, int64_t count, int64_t base,
                         int64_t start, int64_t slots, uint64_t *digests, int64_t *offsets,
                         int64_t *guesses) {
    int64_t k = 0;
    kt_record r;
    for (int64_t i = 0; i < count; i++) {
        if ((p = kt_scan_record(p, end, &r)) == NULL) return -1;
        if (r.key_len >= 0 && kt_add(base, r.offset_delta) >= start) {
            kt_digest(r.key, r.key_len, digests + 2 * k);
            offsets[k] = kt_add(base, r.offset_delta);
            guesses[k] = kt_probe(digests + 2 * k, 0, slots);
            k++;
        }
    }
    return p == end ? k : -1;
}

int64_t kt_map_plain(uint64_t *table, int64_t slots, const uint8_t *buf, int64_t len,
                     int64_t pos, int64_t start, int64_t size, int64_t limit, int64_t latest,
                     uint8_t *sup, int64_t sup_bits, int64_t sup_start, uint64_t *digests,
                     int64_t *offsets, int64_t *guesses, int64_t capacity, int64_t *out) {
    int64_t status = 0, full = 0, n;
    while (slots > 0 && (n = kt_plain_batch(buf, len, pos)) != 0) {
        int64_t count = kt_be(buf + pos + 57, 4);
        if (count > capacity) { /* the caller grows the scratch and calls again from here */
            status = count;
            break;
        }
        int64_t base = kt_be(buf + pos, 8), last_put = -1;
        int64_t k = scan_keys(buf + pos + KT_HEADER, buf + pos + n, count, base, start, slots,
                              digests, offsets, guesses);
        if (k < 0) break;
        for (int64_t i = 0; i < k && i < KT_AHEAD; i++) __builtin_prefetch(table + 3 * guesses[i]);
        for (int64_t i = 0; i < k; i++) {
            const uint64_t *h = digests + 2 * i;
            if (i + KT_AHEAD < k) __builtin_prefetch(table + 3 * guesses[i + KT_AHEAD]);
            if (size >= limit) { /* Kafka checks the size before every put */
                full = 1;
                break;
            }
            uint64_t *e = table + 3 * kt_slot(table, slots, h, guesses[i]);
            if (e[0] == 0 && e[1] == 0) {
                e[0] = h[0];
                e[1] = h[1];
                size++;
            } else { /* the offset it replaces is superseded (slots.py put_marking) */
                int64_t old = kt_sub((int64_t)e[2], sup_start);
                if (old >= 0 && old < sup_bits) sup[old >> 3] |= (uint8_t)(1 << (old & 7));
            }
            e[2] = (uint64_t)offsets[i];
            last_put = offsets[i];
        }
        if (full) {
            latest = latest > last_put ? latest : last_put;
            break;
        }
        int64_t last = kt_add(base, kt_be(buf + pos + 23, 4));
        if (last >= start) latest = last;
        pos += n;
    }
    out[0] = pos;
    out[1] = full;
    out[2] = size;
    out[3] = latest;
    return status;
}
