/* What the cleaner's C kernels (offset_map.c, clean_filter.c) share, inline: zig-zag varint
 * reads (kafka-format.md section 1.5; the writes and big-endian fields are bytes.h's), a v2
 * record's scan, the key digest (MurmurHash3_x64_128, storage/cleaner/kernels/murmur.py) and
 * the offset map's slots in Kafka's SkimpyOffsetMap probe sequence
 * (storage/cleaner/kernels/slots.py). Each follows the
 * numba kernel it stands in for, rule for rule; the tests hold them to the same results. */
#ifndef KT_CLEANER_H
#define KT_CLEANER_H

#include <stdint.h>
#include <string.h>

#include "bytes.h"

#define KT_HEADER 61         /* a v2 batch's header */
#define KT_PLAIN_MASK 0x37   /* codec bits, transactional, control: none in a plain batch */
#define KT_KEY_SEED 1        /* murmur.py KEY_SEED */

/* The size of the plain batch at `pos` of buf[0, len), whole in it; 0 where there is none
 * (chunks.py plain_batch_size). */
static inline int64_t kt_plain_batch(const uint8_t *buf, int64_t len, int64_t pos) {
    if (len - pos < KT_HEADER || buf[pos + 16] != 2) return 0;
    int64_t n = 12 + kt_be(buf + pos + 8, 4);
    if (n < KT_HEADER || n > len - pos) return 0;
    if ((kt_be(buf + pos + 21, 2) & KT_PLAIN_MASK) || kt_be(buf + pos + 57, 4) < 0) return 0;
    return n;
}

/* A zig-zag varint of at most `max` bytes in [p, end): its value in *out and the position
 * after it, or NULL where it is malformed or runs past `end`. */
static inline const uint8_t *kt_varint(const uint8_t *p, const uint8_t *end, int max,
                                       int64_t *out) {
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
static inline const uint8_t *kt_field(const uint8_t *p, const uint8_t *end, int64_t *len) {
    p = kt_varint(p, end, 5, len);
    if (p == NULL || (*len > 0 && *len > end - p)) return NULL;
    return p + (*len > 0 ? *len : 0);
}

/* One record as records.py scan_records gives its row: where it ends, where its key length
 * starts (the body the rebuild copies), its deltas, its key and the value's length. */
typedef struct {
    const uint8_t *end, *body, *key;
    int64_t ts_delta, offset_delta, key_len, value_len;
} kt_record;

/* The record at p within [p, end) scanned into *r: the position after it, or NULL where it is
 * malformed (scan_records' rules: lengths, varint widths, headers, exact end). */
static inline const uint8_t *kt_scan_record(const uint8_t *p, const uint8_t *end, kt_record *r) {
    int64_t length, headers;
    const uint8_t *q = kt_varint(p, end, 5, &length);
    if (q == NULL || length < 0 || length > end - q) return NULL;
    r->end = q + length;
    if ((q = kt_varint(q + 1, r->end, 10, &r->ts_delta)) == NULL) return NULL; /* attributes */
    if ((q = kt_varint(q, r->end, 5, &r->offset_delta)) == NULL) return NULL;
    r->body = q;
    if ((q = kt_field(q, r->end, &r->key_len)) == NULL) return NULL;
    r->key = q - (r->key_len > 0 ? r->key_len : 0);
    if ((q = kt_field(q, r->end, &r->value_len)) == NULL) return NULL;
    if ((q = kt_varint(q, r->end, 5, &headers)) == NULL || headers < 0) return NULL;
    for (int64_t h = 0; h < headers; h++) {
        int64_t hk, hv;
        if ((q = kt_varint(q, r->end, 5, &hk)) == NULL || hk < 0 || hk > r->end - q) return NULL;
        if ((q = kt_field(q + hk, r->end, &hv)) == NULL) return NULL;
    }
    return q == r->end ? q : NULL;
}

static inline uint64_t kt_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t kt_fmix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ULL;
    return k ^ (k >> 33);
}

static inline uint64_t kt_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A key's digest: MurmurHash3_x64_128 with KT_KEY_SEED as h[0], h[1] (murmur3_words), all
 * zero turned into (1, 0), the map's empty slot (murmur3_many). */
static inline void kt_digest(const uint8_t *d, int64_t n, uint64_t *h) {
    const uint64_t c1 = 0x87C37B91114253D5ULL, c2 = 0x4CF5AD432745937FULL;
    uint64_t h1 = KT_KEY_SEED, h2 = h1;
    for (int64_t b = 0; b < n / 16; b++) {
        uint64_t k1 = kt_le(d + 16 * b, 8), k2 = kt_le(d + 16 * b + 8, 8);
        h1 ^= kt_rotl(k1 * c1, 31) * c2;
        h1 = (kt_rotl(h1, 27) + h2) * 5 + 0x52DCE729;
        h2 ^= kt_rotl(k2 * c2, 33) * c1;
        h2 = (kt_rotl(h2, 31) + h1) * 5 + 0x38495AB5;
    }
    const uint8_t *tail = d + (n & ~(int64_t)15);
    int rest = (int)(n & 15);
    if (rest > 8) h2 ^= kt_rotl(kt_le(tail + 8, rest - 8) * c2, 33) * c1;
    if (rest > 0) h1 ^= kt_rotl(kt_le(tail, rest < 8 ? rest : 8) * c1, 31) * c2;
    h1 ^= (uint64_t)n;
    h2 ^= (uint64_t)n;
    h1 += h2;
    h2 += h1;
    h1 = kt_fmix(h1);
    h2 = kt_fmix(h2);
    h1 += h2;
    h2 += h1;
    h[0] = h1 == 0 && h2 == 0 ? 1 : h1;
    h[1] = h2;
}

static inline int kt_digest_byte(const uint64_t *h, int k) {
    return (int)((h[k >> 3] >> (8 * (k & 7))) & 0xFF);
}

/* Kafka's positionOf for one attempt (slots.py _probe): a big-endian int read from the digest
 * at min(attempt, 12), plus max(0, attempt - 12), with Java's int overflow and Utils.abs. */
static inline int64_t kt_probe(const uint64_t *h, int64_t attempt, int64_t slots) {
    int p = attempt < 12 ? (int)attempt : 12;
    uint32_t v = ((uint32_t)kt_digest_byte(h, p) << 24) |
                 ((uint32_t)kt_digest_byte(h, p + 1) << 16) |
                 ((uint32_t)kt_digest_byte(h, p + 2) << 8) | (uint32_t)kt_digest_byte(h, p + 3);
    v += (uint32_t)(attempt > 12 ? attempt - 12 : 0);
    int32_t j = (int32_t)v;
    int64_t a = j == INT32_MIN ? 0 : (j < 0 ? -(int64_t)j : j);
    /* a < 2^31: a 32-bit division where the table's rows allow it (the same result) */
    return slots <= 0xFFFFFFFFLL ? (int64_t)((uint32_t)a % (uint32_t)slots) : a % slots;
}

/* The slot holds the digest or is empty (slots.py _fits). */
static inline int kt_fits(const uint64_t *table, int64_t slot, const uint64_t *h) {
    const uint64_t *e = table + 3 * slot;
    return (e[0] == h[0] && e[1] == h[1]) || (e[0] == 0 && e[1] == 0);
}

/* The digest's slot from its first probe `guess` (slots.py resolve: the slot holding it, or
 * the empty one where it belongs). */
static inline int64_t kt_slot(const uint64_t *table, int64_t slots, const uint64_t *h,
                              int64_t guess) {
    int64_t slot = guess;
    for (int64_t attempt = 1; !kt_fits(table, slot, h); attempt++)
        slot = kt_probe(h, attempt, slots);
    return slot;
}

#endif
