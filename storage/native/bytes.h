/* The fields of Kafka's formats as the library's sources read and write them, inline (one copy
 * for checks.c, committed.c, kernels.c and the cleaner's cleaner.h): big-endian integers,
 * zig-zag varints (kafka-format.md sections 1 and 1.5) and int64 sums that wrap. */
#ifndef KT_BYTES_H
#define KT_BYTES_H

#include <stdint.h>

/* The big-endian integer of n bytes at p, sign-extended (callers cast to the field's width). */
static inline int64_t kt_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    if (n < 8 && ((v >> (8 * n - 1)) & 1)) v -= (uint64_t)1 << (8 * n);
    return (int64_t)v;
}

static inline void kt_put_be(uint8_t *p, int n, uint64_t v) {
    for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static inline uint64_t kt_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

/* v as a zig-zag varint at buf[p]; the position after it. A 64-bit zig-zag of a value in int32
 * range gives the same bytes as the 32-bit one, so one writer serves varint and varlong alike. */
static inline int64_t kt_put_varint(uint8_t *buf, int64_t p, int64_t v) {
    uint64_t u = kt_zigzag(v);
    while (u >= 0x80) {
        buf[p++] = (uint8_t)((u & 0x7F) | 0x80);
        u >>= 7;
    }
    buf[p] = (uint8_t)u;
    return p + 1;
}

/* a + b and a - b as Java's and numba's int64 arithmetic wrap (a signed overflow is undefined
 * in C): a corrupt header's base offset or timestamp, or delete.retention.ms near
 * Long.MAX_VALUE. */
static inline int64_t kt_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

static inline int64_t kt_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }

#endif
