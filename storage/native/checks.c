/* A buffer of record batches v2 framed, CRC-checked and read in one call: what
 * storage/log/validator.py's parse_incoming does for a client's append, batch by batch in
 * Python, where the sink's driver checks two batches a partition for each of thousands of
 * partitions a micro-batch (about 5 us a batch in Python, most of it not the CRC).
 *
 * kt_check_batches walks the batches from the buffer's start and stops at the first that is not
 * a whole, valid client batch: fewer bytes left than a header or than the batch's length, magic
 * other than 2, batchLength below the header's, a CRC-32C that differs, a control batch,
 * recordsCount not lastOffsetDelta + 1 or not positive, a producer id without a base sequence.
 * It says how far it got; the caller parses the rest the Python way, which names the fault (or,
 * were this stricter than Python, accepts the batch): so every error is said once, in Python.
 *
 * Per batch it writes KT_BATCH_FIELDS int64s: the batch's position, then the 13 header fields
 * in their wire order (storage/wire.py's BATCH_HEADER), signed as Kafka's types are (crc as
 * uint32). The CRC is SSE4.2's crc32 instruction (CRC-32C's polynomial); without it the call
 * returns -1 and Python checks everything. */
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#define HEADER 61    /* BATCH_HEADER_SIZE */
#define OVERHEAD 12  /* LOG_OVERHEAD: baseOffset and batchLength */
#define CRC_START 21 /* the CRC covers [21, end) */
#define ATTR_CONTROL 0x20

static inline uint64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("sse4.2"))) static uint32_t crc32c(const uint8_t *p, int64_t n) {
    uint64_t crc = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __builtin_ia32_crc32di(crc, word);
    }
    uint32_t c = (uint32_t)crc;
    for (; n > 0; p++, n--) c = __builtin_ia32_crc32qi(c, *p);
    return c ^ 0xFFFFFFFFu;
}

static int crc_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}
#else
static uint32_t crc32c(const uint8_t *p, int64_t n) {
    (void)p;
    (void)n;
    return 0;
}

static int crc_available(void) { return 0; }
#endif

/* The header at p into out[1..13], as BATCH_HEADER unpacks it. */
static void read_header(const uint8_t *p, int64_t *out) {
    out[1] = (int64_t)be(p, 8);                   /* baseOffset */
    out[2] = (int32_t)be(p + 8, 4);               /* batchLength */
    out[3] = (int32_t)be(p + 12, 4);              /* partitionLeaderEpoch */
    out[4] = (int8_t)p[16];                       /* magic */
    out[5] = (int64_t)(uint32_t)be(p + 17, 4);    /* crc */
    out[6] = (int16_t)be(p + 21, 2);              /* attributes */
    out[7] = (int32_t)be(p + 23, 4);              /* lastOffsetDelta */
    out[8] = (int64_t)be(p + 27, 8);              /* baseTimestamp */
    out[9] = (int64_t)be(p + 35, 8);              /* maxTimestamp */
    out[10] = (int64_t)be(p + 43, 8);             /* producerId */
    out[11] = (int16_t)be(p + 51, 2);             /* producerEpoch */
    out[12] = (int32_t)be(p + 53, 4);             /* baseSequence */
    out[13] = (int32_t)be(p + 57, 4);             /* recordsCount */
}

/* Whether the batch read into f (size bytes at p) is a valid client batch. */
static int valid(const uint8_t *p, const int64_t *f, int64_t size) {
    if (f[4] != 2 || size < HEADER) return 0;
    if (crc32c(p + CRC_START, size - CRC_START) != (uint32_t)f[5]) return 0;
    if (f[6] & ATTR_CONTROL) return 0;
    if (f[13] <= 0 || f[13] != f[7] + 1) return 0;
    return !(f[10] > -1 && f[12] < 0);
}

int64_t kt_check_batches(const uint8_t *buf, int64_t len, int64_t *out, int64_t max,
                         int64_t *end) {
    static int available = -1;
    if (available < 0) available = crc_available();
    if (!available) return -1;
    int64_t count = 0, position = 0;
    while (count < max && len - position >= HEADER) {
        const uint8_t *p = buf + position;
        int64_t *f = out + count * KT_BATCH_FIELDS;
        read_header(p, f);
        int64_t size = OVERHEAD + f[2];
        if (size > len - position || !valid(p, f, size)) break;
        f[0] = position;
        position += size;
        count++;
    }
    *end = position;
    return count;
}
