/* The cleaner's offset-map build over a buffer of plain batches in C: what the numba kernel
 * storage/cleaner/kernels/chunks.py map_chunk does with the MurmurHash3 digest (the cleaner's;
 * Kafka's MD5 stays in numba), with the same results (a test holds the two to the same table,
 * size, latest offset and superseded bits). Why a second build of it: numba's costs 140-160 ns
 * a record on the compaction bench (1M records), this 60-70 (ad hoc, same buffer, same table),
 * and the map build is the largest part of compacting a compressed topic.
 *
 * A plain batch is a whole v2 batch of the buffer, magic 2, neither compressed, control nor
 * transactional, with a record count >= 0 (kafka-format.md section 1); the walk stops at the
 * first other batch, or at a batch whose records do not scan exactly (the Python path then takes
 * it with its errors). The table is (slots, 3) uint64 rows: a digest's two little-endian words
 * (all zero: empty) and an offset, probed in Kafka's SkimpyOffsetMap sequence
 * (storage/cleaner/kernels/slots.py says it once in Python; probe() below follows it). */
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#define HEADER 61
#define PLAIN_MASK 0x37 /* codec bits, transactional, control */
#define KEY_SEED 1      /* storage/cleaner/kernels/murmur.py KEY_SEED */

static inline int64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    if (n < 8 && ((v >> (8 * n - 1)) & 1)) v -= (uint64_t)1 << (8 * n);
    return (int64_t)v;
}

/* A zig-zag varint of at most `max` bytes in [p, end): its value in *out and the position
 * after it, or NULL where it is malformed or runs past `end`. */
static inline const uint8_t *varint(const uint8_t *p, const uint8_t *end, int max, int64_t *out) {
    uint64_t r = 0;
    for (int i = 0, shift = 0; i < max; i++, shift += 7) {
        if (p + i >= end) return NULL;
        r |= (uint64_t)(p[i] & 0x7F) << shift;
        if (p[i] < 0x80) {
            *out = (int64_t)(r >> 1) ^ -(int64_t)(r & 1);
            return p + i + 1;
        }
    }
    return NULL;
}

/* A length-prefixed field (a null is -1) within [p, end): the position after it, or NULL. */
static inline const uint8_t *field(const uint8_t *p, const uint8_t *end, int64_t *len) {
    p = varint(p, end, 5, len);
    if (p == NULL || (*len > 0 && *len > end - p)) return NULL;
    return p + (*len > 0 ? *len : 0);
}

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t fmix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ULL;
    return k ^ (k >> 33);
}

static inline uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* MurmurHash3_x64_128 (storage/cleaner/kernels/murmur.py murmur3_words): h[0], h[1]. */
static void murmur3(const uint8_t *d, int64_t n, uint64_t seed, uint64_t *h) {
    const uint64_t c1 = 0x87C37B91114253D5ULL, c2 = 0x4CF5AD432745937FULL;
    uint64_t h1 = seed & 0xFFFFFFFF, h2 = h1;
    for (int64_t b = 0; b < n / 16; b++) {
        uint64_t k1 = le(d + 16 * b, 8), k2 = le(d + 16 * b + 8, 8);
        h1 ^= rotl(k1 * c1, 31) * c2;
        h1 = (rotl(h1, 27) + h2) * 5 + 0x52DCE729;
        h2 ^= rotl(k2 * c2, 33) * c1;
        h2 = (rotl(h2, 31) + h1) * 5 + 0x38495AB5;
    }
    const uint8_t *tail = d + (n & ~(int64_t)15);
    int rest = (int)(n & 15);
    if (rest > 8) h2 ^= rotl(le(tail + 8, rest - 8) * c2, 33) * c1;
    if (rest > 0) h1 ^= rotl(le(tail, rest < 8 ? rest : 8) * c1, 31) * c2;
    h1 ^= (uint64_t)n;
    h2 ^= (uint64_t)n;
    h1 += h2;
    h2 += h1;
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 += h2;
    h2 += h1;
    h[0] = h1 == 0 && h2 == 0 ? 1 : h1; /* all zero marks an empty slot (murmur3_many) */
    h[1] = h2;
}

static inline int digest_byte(const uint64_t *h, int k) {
    return (int)((h[k >> 3] >> (8 * (k & 7))) & 0xFF);
}

/* Kafka's positionOf for one attempt (slots.py _probe): a big-endian int read from the digest
 * at min(attempt, 12), plus max(0, attempt - 12), with Java's int overflow and Utils.abs. */
static inline int64_t probe(const uint64_t *h, int64_t attempt, int64_t slots) {
    int p = attempt < 12 ? (int)attempt : 12;
    uint32_t v = ((uint32_t)digest_byte(h, p) << 24) | ((uint32_t)digest_byte(h, p + 1) << 16) |
                 ((uint32_t)digest_byte(h, p + 2) << 8) | (uint32_t)digest_byte(h, p + 3);
    v += (uint32_t)(attempt > 12 ? attempt - 12 : 0);
    int32_t j = (int32_t)v;
    int64_t a = j == INT32_MIN ? 0 : (j < 0 ? -(int64_t)j : j);
    return a % slots;
}

static inline int fits(const uint64_t *table, int64_t slot, const uint64_t *h) {
    const uint64_t *e = table + 3 * slot;
    return (e[0] == h[0] && e[1] == h[1]) || (e[0] == 0 && e[1] == 0);
}

/* The keys to put of the batch's `count` records in [p, end) (offset at or after `start`, key
 * not null): their digests, offsets and first probes (prefetched) into the scratch; how many,
 * or -1 where the records do not scan exactly (records.py scan_records' rule). */
static int64_t scan_keys(const uint8_t *p, const uint8_t *end, int64_t count, int64_t base,
                         int64_t start, int64_t slots, const uint64_t *table, uint64_t *digests,
                         int64_t *offsets, int64_t *guesses) {
    int64_t k = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t length, ts, delta, key_len, value_len, headers;
        const uint8_t *q = varint(p, end, 5, &length);
        if (q == NULL || length < 0 || length > end - q) return -1;
        const uint8_t *stop = q + length;
        if ((q = varint(q + 1, stop, 10, &ts)) == NULL) return -1; /* after the attributes */
        if ((q = varint(q, stop, 5, &delta)) == NULL) return -1;
        if ((q = field(q, stop, &key_len)) == NULL) return -1;
        const uint8_t *key = q - (key_len > 0 ? key_len : 0);
        if ((q = field(q, stop, &value_len)) == NULL) return -1;
        if ((q = varint(q, stop, 5, &headers)) == NULL || headers < 0) return -1;
        for (int64_t h = 0; h < headers; h++) {
            int64_t hk, hv;
            if ((q = varint(q, stop, 5, &hk)) == NULL || hk < 0 || hk > stop - q) return -1;
            if ((q = field(q + hk, stop, &hv)) == NULL) return -1;
        }
        if (q != stop) return -1;
        p = stop;
        if (key_len >= 0 && base + delta >= start) {
            murmur3(key, key_len, KEY_SEED, digests + 2 * k);
            offsets[k] = base + delta;
            guesses[k] = probe(digests + 2 * k, 0, slots);
            __builtin_prefetch(table + 3 * guesses[k]);
            k++;
        }
    }
    return p == end ? k : -1;
}

int64_t kt_map_plain(uint64_t *table, int64_t slots, const uint8_t *buf, int64_t len,
                     int64_t pos, int64_t start, int64_t size, int64_t limit, int64_t latest,
                     uint8_t *sup, int64_t sup_bits, int64_t sup_start, uint64_t *digests,
                     int64_t *offsets, int64_t *guesses, int64_t capacity, int64_t *out) {
    int64_t status = 0, full = 0;
    for (;;) {
        if (len - pos < HEADER || buf[pos + 16] != 2) break;
        int64_t n = 12 + be(buf + pos + 8, 4), count = be(buf + pos + 57, 4);
        if (n < HEADER || n > len - pos || (be(buf + pos + 21, 2) & PLAIN_MASK) || count < 0)
            break;
        if (count > capacity) { /* the caller grows the scratch and calls again from here */
            status = count;
            break;
        }
        int64_t base = be(buf + pos, 8), last_put = -1;
        int64_t k = scan_keys(buf + pos + HEADER, buf + pos + n, count, base, start, slots,
                              table, digests, offsets, guesses);
        if (k < 0) break;
        for (int64_t i = 0; i < k && !full; i++) {
            const uint64_t *h = digests + 2 * i;
            if (size >= limit) { /* Kafka checks the size before every put */
                full = 1;
                break;
            }
            int64_t slot = guesses[i];
            for (int64_t attempt = 1; !fits(table, slot, h); attempt++)
                slot = probe(h, attempt, slots);
            uint64_t *e = table + 3 * slot;
            if (e[0] == 0 && e[1] == 0) {
                e[0] = h[0];
                e[1] = h[1];
                size++;
            } else { /* the offset it replaces is superseded (slots.py put_marking) */
                int64_t old = (int64_t)e[2] - sup_start;
                if (old >= 0 && old < sup_bits) sup[old >> 3] |= (uint8_t)(1 << (old & 7));
            }
            e[2] = (uint64_t)offsets[i];
            last_put = offsets[i];
        }
        if (full) {
            latest = latest > last_put ? latest : last_put;
            break;
        }
        int64_t last = base + be(buf + pos + 23, 4);
        if (last >= start) latest = last;
        pos += n;
    }
    out[0] = pos;
    out[1] = full;
    out[2] = size;
    out[3] = latest;
    return status;
}
