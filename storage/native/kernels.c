/* kafkatier's encoder kernels in C: the same algorithms as the numba kernels of
 * storage/arrow/encode_kernels.py and storage/partitioner_kernels.py, byte for byte, built once
 * per machine with the system's C compiler (storage/native/build.py) and called through cffi
 * (storage/native/kernels.py; kernels.h declares what it exports; C repeats each exported
 * function's parameters in its definition). Why a second build of them: numba costs a
 * short-lived process (`kafkatier produce`) about 0.4 s before its first record is encoded (its
 * import and the type registries its first call loads); this library is imported and bound in
 * 35-43 ms, cffi included.
 *
 * A binary column is (starts int64[n], data uint8[], lengths int64[n]); a null has length -1,
 * which is also how Kafka writes it. Headers are list offsets int64[n+1] (NULL: no headers)
 * over flattened header keys and values, two binary columns. Varints are Kafka's zig-zag
 * varints (kafka-format.md §1.5), written by bytes.h's kt_put_varint.
 */
#include <stdint.h>
#include <string.h>

#include "bytes.h"
#include "kernels.h"

static inline int64_t varint_size(int64_t v) {
    uint64_t u = kt_zigzag(v);
    int64_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

/* A length varint and the bytes; a null (length -1) is the single byte 0x01. */
static inline int64_t field_size(const int64_t *lengths, int64_t i) {
    int64_t n = lengths[i];
    return varint_size(n) + (n > 0 ? n : 0);
}

static inline int64_t put_field(uint8_t *buf, int64_t p, const kt_column *c, int64_t i) {
    int64_t n = c->lengths[i];
    p = kt_put_varint(buf, p, n);
    if (n > 0) {
        memcpy(buf + p, c->data + c->starts[i], (size_t)n);
        p += n;
    }
    return p;
}

/* Per record: bytes of key, value and headers, the parts that do not depend on the batch. */
void kt_payload_sizes(int64_t n, const int64_t *key_lengths, const int64_t *value_lengths,
                      const int64_t *header_offsets, const int64_t *header_key_lengths,
                      const int64_t *header_value_lengths, int64_t *out) {
    for (int64_t i = 0; i < n; i++) {
        int64_t size = field_size(key_lengths, i) + field_size(value_lengths, i);
        if (header_offsets == NULL) {
            size += 1;
        } else {
            int64_t first = header_offsets[i], last = header_offsets[i + 1];
            size += varint_size(last - first);
            for (int64_t h = first; h < last; h++)
                size += field_size(header_key_lengths, h) + field_size(header_value_lengths, h);
        }
        out[i] = size;
    }
}

/* Cut records into batches of at most max_bytes (overhead: the batch header's size); a
 * record's size depends on its batch (offset and timestamp deltas), so the cut is sequential.
 * Fills starts (first row of each batch, then n), body (each record's length), sizes and
 * max_ts of each batch; returns the number of batches, or -1 - row for a record too large for
 * any batch. starts holds n + 1 entries, the others n. */
int64_t kt_plan_batches(int64_t n, const int64_t *payload, const int64_t *ts, int64_t max_bytes,
                        int64_t max_records, int64_t overhead, int64_t *starts, int64_t *body,
                        int64_t *sizes, int64_t *max_ts) {
    int64_t nb = -1, first = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = 1 + varint_size(ts[i] - ts[first]) + varint_size(i - first) + payload[i];
        int64_t total = b + varint_size(b);
        if (nb < 0 || sizes[nb] + total > max_bytes || i - first >= max_records) {
            nb++;
            first = i;
            b = 3 + payload[i]; /* attributes, timestamp delta 0, offset delta 0 */
            total = b + varint_size(b);
            if (overhead + total > max_bytes) return -1 - i;
            starts[nb] = i;
            sizes[nb] = overhead;
            max_ts[nb] = ts[i];
        }
        body[i] = b;
        sizes[nb] += total;
        if (ts[i] > max_ts[nb]) max_ts[nb] = ts[i];
    }
    starts[nb + 1] = n;
    return nb + 1;
}

/* Write every batch's records after its (separately written) header; returns the number of
 * batches whose records did not end exactly at the planned size (0 unless plan and writer
 * disagree). */
int64_t kt_write_records(uint8_t *buf, int64_t batches, const int64_t *positions,
                         const int64_t *starts, const int64_t *body, const int64_t *ts,
                         const int64_t *sizes, int64_t overhead, const kt_column *key,
                         const kt_column *value, const kt_headers *hdr) {
    int64_t wrong = 0;
    for (int64_t b = 0; b < batches; b++) {
        int64_t p = positions[b] + overhead, first = starts[b];
        for (int64_t i = first; i < starts[b + 1]; i++) {
            p = kt_put_varint(buf, p, body[i]);
            buf[p] = 0; /* record attributes: unused */
            p = kt_put_varint(buf, p + 1, ts[i] - ts[first]);
            p = kt_put_varint(buf, p, i - first);
            p = put_field(buf, p, key, i);
            p = put_field(buf, p, value, i);
            if (hdr->list_offsets == NULL) {
                buf[p++] = 0;
                continue;
            }
            int64_t hf = hdr->list_offsets[i], hl = hdr->list_offsets[i + 1];
            p = kt_put_varint(buf, p, hl - hf);
            for (int64_t h = hf; h < hl; h++) {
                p = put_field(buf, p, &hdr->key, h);
                p = put_field(buf, p, &hdr->value, h);
            }
        }
        if (p != positions[b] + sizes[b]) wrong++;
    }
    return wrong;
}

/* Write row b of rows (width bytes each) at positions[b] (batch headers, rebased offsets). */
void kt_scatter_rows(uint8_t *buf, int64_t count, const int64_t *positions, const uint8_t *rows,
                     int64_t width) {
    for (int64_t b = 0; b < count; b++) memcpy(buf + positions[b], rows + b * width, (size_t)width);
}

/* Copy width bytes from each position into one row each (batch headers). */
void kt_gather_rows(const uint8_t *buf, int64_t count, const int64_t *positions, int64_t width,
                    uint8_t *out) {
    for (int64_t b = 0; b < count; b++) memcpy(out + b * width, buf + positions[b], (size_t)width);
}

/* Kafka's Utils.murmur2 (kafka-format.md §12): seed 0x9747b28c, m 0x5bd1e995, r 24,
 * little-endian 4-byte blocks, the tail at shifts 16/8/0 as Java's switch. */
static inline uint32_t murmur2(const uint8_t *d, int64_t length) {
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    int64_t blocks = length - (length % 4);
    for (int64_t i = 0; i < blocks; i += 4) {
        uint32_t k = (uint32_t)d[i] | ((uint32_t)d[i + 1] << 8) | ((uint32_t)d[i + 2] << 16) |
                     ((uint32_t)d[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
    }
    switch (length % 4) {
    case 3: h ^= (uint32_t)d[blocks + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)d[blocks + 1] << 8;  /* fall through */
    case 1: h ^= (uint32_t)d[blocks]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static inline int32_t hashed(uint32_t h, int64_t num_partitions) {
    if (num_partitions > 0) return (int32_t)((h & 0x7FFFFFFFu) % (uint64_t)num_partitions);
    return (int32_t)h;
}

/* Per key: its partition (num_partitions > 0) or signed murmur2 (0); nulls (valid[i] == 0)
 * give -1. Arrow's binary and string columns have int32 offsets, the large ones int64: one
 * function for each. */
#define HASH_ALL(name, offset_t)                                                              \
    void name(const uint8_t *data, const offset_t *offsets, const uint8_t *valid, int64_t n,  \
              int64_t num_partitions, int32_t *out) {                                         \
        for (int64_t i = 0; i < n; i++)                                                       \
            out[i] = valid[i] ? hashed(murmur2(data + offsets[i], offsets[i + 1] - offsets[i]), \
                                       num_partitions)                                        \
                              : -1;                                                           \
    }

HASH_ALL(kt_hash_all32, int32_t)
HASH_ALL(kt_hash_all64, int64_t)
