/* The cleaner's rewrite of a buffer of plain batches in C: what the numba kernel
 * storage/cleaner/kernels/chunks.py filter_chunk does with the MurmurHash3 digest, with the same
 * results (the tests hold the two to the same bytes, batch infos, counters and stopping
 * point). Why a second build of it: numba's walk and rebuild cost 70-100 ns a record on the
 * compaction bench's 1M records, and compacting that topic uncompressed went from 0.48 to 0.70
 * of a plain rewrite's speed with this, offset_map.c and the collector paused
 * (bench/compaction.py, medians of three runs alternating with the code before; lz4 0.35 to
 * 0.39, where the codec's work and the map's cache misses remain).
 *
 * Per plain batch (cleaner.h kt_plain_batch), Kafka's shouldRetainRecord for each record
 * (chunks.py select_batch): a record past the map's latest offset stays; one marked
 * superseded, or keyless, goes; else it stays if its offset is at least its key's in the map
 * and it has a value or deletes are still retained (a batch with a delete horizon retains
 * them until then). Within the superseded bits' range every put marks the offset it replaces
 * (offset_map.c, slots.py put_marking), so a keyed record there that is not marked is its
 * key's entry: it is not looked up (a cache miss a record in a large map; on the compaction
 * bench's zstd input the rewrite took 0.080 s against 0.089, bench/compaction.py phases). A
 * batch whose every offset is marked (and need not stay empty) goes without its records being
 * scanned: the map build scanned and marked each of them (superseded.py drops such compressed
 * batches unread the same way; these are the inflated ones of the runs around them, about half
 * the bench's batches: its filter calls took 16 ms a compaction against 21, stop 71). A batch
 * keeping every record (and needing no horizon) is copied as it was; one keeping none goes,
 * unless it must stay as an empty batch (its producer's last, or the one that ends the cleaned
 * range: the Python path builds those); the others are rebuilt with the kept records
 * (chunks.py _write_rebuilt), their CRC-32C computed. The walk stops at
 * the first batch that is not plain or does not scan, or when `out` or `infos` might not hold
 * the next batch. ctx: map latest offset, now, delete.retention.ms, the cleaned range's upper
 * bound, (unused: the digest), the superseded bits' first offset. */
#include "cleaner.h"
#include "kernels.h"

#define ATTR_LOG_APPEND_TIME 0x08
#define ATTR_DELETE_HORIZON 0x40

enum { STAT_READ, STAT_RETAINED, STAT_BYTES, STAT_TOMBSTONES, STAT_EXPIRED };
enum { CTX_LATEST, CTX_NOW, CTX_DELETE_RETENTION, CTX_UPPER, CTX_DIGEST, CTX_SUP_START };

/* The batch must stay even with no record kept (chunks.py kept_empty): it ends the cleaned
 * range, or it is its producer's last data batch (pids sorted; _is_last_of_producer). */
static int kept_empty(const uint8_t *b, const int64_t *ctx, const int64_t *pids,
                      const int64_t *last_offsets, int64_t producers) {
    int64_t last = kt_add(kt_be(b, 8), kt_be(b + 23, 4)), pid = kt_be(b + 43, 8);
    if (kt_add(last, 1) == ctx[CTX_UPPER]) return 1;
    if (pid <= -1) return 0;
    int64_t lo = 0, hi = producers; /* numpy searchsorted, side left */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (pids[mid] < pid) lo = mid + 1;
        else hi = mid;
    }
    return lo < producers && pids[lo] == pid && last_offsets[lo] == last;
}

/* Whether the superseded bits cover the offset (the map build's own range) and, if so,
 * whether its bit is set: 1 superseded, 0 its key's entry in the map, -1 not covered. */
static int superseded(const uint8_t *sup, int64_t bits, int64_t start, int64_t offset) {
    int64_t i = kt_sub(offset, start);
    if (i < 0 || i >= bits) return -1;
    return (sup[i >> 3] >> (i & 7)) & 1;
}

/* Whether every offset from first to last is marked superseded (slots.py all_marked; a
 * batch with a gap in its offsets has unmarked ones), a byte of bits at a time. */
static int all_marked(const uint8_t *sup, int64_t bits, int64_t start, int64_t first,
                      int64_t last) {
    int64_t i = kt_sub(first, start), j = kt_sub(last, start);
    if (last < first || i < 0 || j >= bits) return 0;
    for (; i <= j && (i & 7); i++)
        if (!((sup[i >> 3] >> (i & 7)) & 1)) return 0;
    for (; i + 7 <= j; i += 8)
        if (sup[i >> 3] != 0xFF) return 0;
    for (; i <= j; i++)
        if (!((sup[i >> 3] >> (i & 7)) & 1)) return 0;
    return 1;
}

typedef struct {
    const uint64_t *table;
    int64_t slots;
    const uint8_t *sup;
    int64_t sup_bits;
    const int64_t *ctx;
} retention;

/* Which of the batch's scanned records stay (their indexes into `kept`): the count, with the
 * tombstones kept and those dropped as expired added to stats (select_batch). */
static int64_t select_records(const retention *m, const kt_record *rs, int64_t count,
                              int64_t base, int retain_deletes, int64_t *kept, int64_t *tomb,
                              int64_t *expired) {
    int64_t n = 0, latest = m->ctx[CTX_LATEST];
    for (int64_t i = 0; i < count; i++) {
        int64_t offset = kt_add(base, rs[i].offset_delta);
        int has_value = rs[i].value_len >= 0, retained;
        int marked = superseded(m->sup, m->sup_bits, m->ctx[CTX_SUP_START], offset);
        if (offset > latest) {
            retained = 1;
        } else if (rs[i].key_len < 0 || marked == 1) {
            retained = 0;
        } else {
            int newest = 1; /* unmarked in the map's range: its key's entry (no look-up) */
            if (marked < 0) {
                uint64_t h[2];
                kt_digest(rs[i].key, rs[i].key_len, h);
                const uint64_t *e = m->table + 3 * kt_slot(m->table, m->slots, h,
                                                            kt_probe(h, 0, m->slots));
                int64_t in_map = e[0] == 0 && e[1] == 0 ? -1 : (int64_t)e[2];
                newest = offset >= in_map;
            }
            retained = newest && (has_value || retain_deletes);
            *expired += newest && !retained;
        }
        if (retained) {
            kept[n++] = i;
            *tomb += !has_value;
        }
    }
    return n;
}

/* The batch at b with only the kept records into out (chunks.py _write_rebuilt; horizon < 0:
 * none); its size, and its max timestamp in *max_ts. */
static int64_t rebuild(const uint8_t *b, const kt_record *rs, const int64_t *kept, int64_t n,
                       int64_t horizon, uint8_t *out, int64_t *max_ts) {
    int64_t attrs = kt_be(b + 21, 2), base_ts = kt_be(b + 27, 8);
    int log_append = (attrs & ATTR_LOG_APPEND_TIME) != 0;
    *max_ts = kt_be(b + 35, 8);
    int64_t first = log_append ? *max_ts : kt_add(base_ts, rs[kept[0]].ts_delta);
    if (!log_append) {
        int64_t most = -1;
        for (int64_t j = 0; j < n; j++) {
            int64_t ts = kt_add(base_ts, rs[kept[j]].ts_delta);
            most = ts > most ? ts : most;
        }
        *max_ts = most;
    }
    int64_t new_base = horizon >= 0 ? horizon : first, at = KT_HEADER;
    for (int64_t j = 0; j < n; j++) {
        const kt_record *r = rs + kept[j];
        uint8_t head[21];
        int64_t stamp = log_append ? *max_ts : kt_add(base_ts, r->ts_delta);
        head[0] = 0; /* record attributes */
        int64_t h = kt_put_varint(head, kt_put_varint(head, 1, kt_sub(stamp, new_base)),
                                  r->offset_delta);
        int64_t tail = r->end - r->body;
        at = kt_put_varint(out, at, h + tail);
        memcpy(out + at, head, (size_t)h);
        memcpy(out + at + h, r->body, (size_t)tail);
        at += h + tail;
    }
    memcpy(out, b, 17); /* base offset, (length), leader epoch, magic */
    kt_put_be(out + 8, 4, (uint64_t)(at - 12));
    kt_put_be(out + 21, 2, (uint64_t)((attrs & ATTR_LOG_APPEND_TIME) |
                                      (horizon >= 0 ? ATTR_DELETE_HORIZON : 0)));
    memcpy(out + 23, b + 23, 4); /* last offset delta */
    kt_put_be(out + 27, 8, (uint64_t)new_base);
    kt_put_be(out + 35, 8, (uint64_t)*max_ts);
    memcpy(out + 43, b + 43, 14); /* producer id, epoch, base sequence */
    kt_put_be(out + 57, 4, (uint64_t)n);
    kt_put_be(out + 17, 4, kt_crc32c(out + 21, at - 21));
    return at;
}

int64_t kt_filter_plain(const uint64_t *table, int64_t slots, const uint8_t *sup,
                        int64_t sup_bits, const uint8_t *buf, int64_t len, int64_t pos,
                        const int64_t *ctx, const int64_t *pids, const int64_t *last_offsets,
                        int64_t producers, uint8_t *out, int64_t out_len, int64_t *infos,
                        int64_t info_rows, int64_t *stats, void *scratch, int64_t *kept,
                        int64_t capacity, int64_t *result) {
    retention m = {table, slots, sup, sup_bits, ctx};
    kt_record *records = scratch;
    int64_t at = 0, written = 0, status = 0, n;
    while (slots > 0 && (n = kt_plain_batch(buf, len, pos)) != 0 && written < info_rows) {
        const uint8_t *b = buf + pos, *p = b + KT_HEADER;
        int64_t count = kt_be(b + 57, 4), base = kt_be(b, 8);
        if (at + n + 10 * count + 64 > out_len) break; /* ts deltas grow to at most 10 bytes */
        if (all_marked(sup, sup_bits, ctx[CTX_SUP_START], base, kt_add(base, kt_be(b + 23, 4))) &&
            !kept_empty(b, ctx, pids, last_offsets, producers)) {
            stats[STAT_READ] += count; /* every record superseded: none kept, none scanned */
            stats[STAT_BYTES] += n;
            pos += n;
            continue;
        }
        if (count > capacity) { /* the caller grows the scratch and calls again from here */
            status = count;
            break;
        }
        int64_t i = 0;
        for (; i < count && p != NULL; i++) p = kt_scan_record(p, b + n, records + i);
        if (p != b + n) break;
        int has_horizon = (kt_be(b + 21, 2) & ATTR_DELETE_HORIZON) != 0;
        int64_t horizon = has_horizon ? kt_be(b + 27, 8) : -1, tomb = 0, expired = 0;
        int64_t k = select_records(&m, records, count, base,
                                   !has_horizon || ctx[CTX_NOW] < horizon, kept, &tomb, &expired);
        if (k == 0 && kept_empty(b, ctx, pids, last_offsets, producers)) break;
        stats[STAT_READ] += count;
        stats[STAT_RETAINED] += k;
        stats[STAT_BYTES] += n;
        stats[STAT_TOMBSTONES] += tomb;
        stats[STAT_EXPIRED] += expired;
        int64_t size = 0, max_ts = kt_be(b + 35, 8);
        int needs_horizon = tomb > 0 && !has_horizon;
        if (k == count && !needs_horizon) {
            memcpy(out + at, b, (size_t)n);
            size = n;
        } else if (k > 0) {
            int64_t new_horizon = needs_horizon ? kt_add(ctx[CTX_NOW], ctx[CTX_DELETE_RETENTION])
                                                : horizon;
            size = rebuild(b, records, kept, k, new_horizon, out + at, &max_ts);
        }
        if (size) {
            int64_t *row = infos + 4 * written++;
            row[0] = at;
            row[1] = size;
            row[2] = kt_add(base, kt_be(b + 23, 4));
            row[3] = max_ts;
            at += size;
        }
        pos += n;
    }
    result[0] = pos;
    result[1] = at;
    result[2] = written;
    return status;
}

int64_t kt_record_size(void) { return (int64_t)sizeof(kt_record); }
