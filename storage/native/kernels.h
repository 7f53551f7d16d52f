/* What the library's sources export: their C compiler reads this, and so does cffi
 * (storage/native/kernels.py, which takes these declarations as they are: no preprocessor lines
 * here). Arrays are pointers to contiguous memory; a binary column is its starts, data and
 * lengths (-1: null). */
typedef struct {
    const int64_t *starts;
    const uint8_t *data;
    const int64_t *lengths;
} kt_column;
typedef struct {
    const int64_t *list_offsets; /* NULL: the table has no headers column */
    kt_column key;
    kt_column value;
} kt_headers;
void kt_payload_sizes(int64_t n, const int64_t *key_lengths, const int64_t *value_lengths,
                      const int64_t *header_offsets, const int64_t *header_key_lengths,
                      const int64_t *header_value_lengths, int64_t *out);
int64_t kt_plan_batches(int64_t n, const int64_t *payload, const int64_t *ts, int64_t max_bytes,
                        int64_t max_records, int64_t overhead, int64_t *starts, int64_t *body,
                        int64_t *sizes, int64_t *max_ts);
int64_t kt_write_records(uint8_t *buf, int64_t batches, const int64_t *positions,
                         const int64_t *starts, const int64_t *body, const int64_t *ts,
                         const int64_t *sizes, int64_t overhead, const kt_column *key,
                         const kt_column *value, const kt_headers *hdr);
void kt_scatter_rows(uint8_t *buf, int64_t count, const int64_t *positions, const uint8_t *rows,
                     int64_t width);
void kt_gather_rows(const uint8_t *buf, int64_t count, const int64_t *positions, int64_t width,
                    uint8_t *out);
void kt_hash_all32(const uint8_t *data, const int32_t *offsets, const uint8_t *valid, int64_t n,
                   int64_t num_partitions, int32_t *out);
void kt_hash_all64(const uint8_t *data, const int64_t *offsets, const uint8_t *valid, int64_t n,
                   int64_t num_partitions, int32_t *out);
/* checks.c: a buffer's record batches framed, CRC-checked and read (KT_BATCH_FIELDS int64s
 * a batch: its position, then the header's 13 fields); -1: no CRC instruction here. */
enum { KT_BATCH_FIELDS = 14 };
int64_t kt_check_batches(const uint8_t *buf, int64_t len, int64_t *out, int64_t max,
                         int64_t *end);
uint32_t kt_crc32c(const uint8_t *p, int64_t n); /* CRC-32C (kt_crc_available: not 0) */
int kt_crc_available(void);
/* Each of `rows` v2 batches of buf (infos: 4 int64s a row, its position and size first) given
 * its CRC-32C (kt_crc_available: not 0): the cleaner's batches compressed again. */
void kt_seal_batches(uint8_t *buf, const int64_t *infos, int64_t rows);
/* headers.c: a .log window's batch headers framed (KT_HEADER_FIELDS int64s a batch: position,
 * size, base offset, last offset, magic, attributes, producer id) and where framing stopped. */
enum { KT_HEADER_FIELDS = 7 };
int64_t kt_walk_headers(const uint8_t *buf, int64_t len, int64_t limit, int64_t *out,
                        int64_t max, int64_t *end);
/* writes.c: positioned writes by a thread of their own (queued, then published in order). */
typedef struct {
    void *base;
    size_t len;
} kt_iov;
typedef struct {
    int32_t fd;
    int32_t iov_count;
    const kt_iov *iov;
    int64_t position;
    int64_t size;
    int64_t result; /* set by the thread: bytes written, or -errno */
} kt_write;
typedef struct kt_writes kt_writes;
kt_writes *kt_writes_start(kt_write *ops);
void kt_writes_publish(kt_writes *w, int64_t count);
void kt_writes_wait(kt_writes *w);
void kt_writes_finish(kt_writes *w, int share);
/* committed.c: the sink's committed appends of many partitions (KT_COMMIT_IN int64s in and
 * KT_COMMIT_OUT out a partition); -1: no CRC instruction here. */
enum { KT_COMMIT_IN = 24, KT_COMMIT_OUT = 16 };
int64_t kt_commit_all(int64_t parts, const int64_t *in, int64_t *out, uint8_t *const *bufs,
                      const int64_t *lens, int64_t *batch_out, int64_t producer_id,
                      int64_t producer_epoch, const uint8_t *marker, int64_t marker_len,
                      uint8_t *markers, uint8_t *offset_entries, uint8_t *time_entries,
                      kt_write *ops, kt_iov *iovs);
/* offset_map.c: the cleaner's map build over plain batches (MurmurHash3 digests); out: where
 * it stopped, whether the map is full, its size and latest offset; returns 0, or the records of
 * the batch it stopped at where the scratch (capacity records) is too small for them. */
int64_t kt_map_plain(uint64_t *table, int64_t slots, const uint8_t *buf, int64_t len,
                     int64_t pos, int64_t start, int64_t size, int64_t limit, int64_t latest,
                     uint8_t *sup, int64_t sup_bits, int64_t sup_start, uint64_t *digests,
                     int64_t *offsets, int64_t *guesses, int64_t capacity, int64_t *out);
/* clean_filter.c: the cleaner's rewrite of plain batches (MurmurHash3 digests); result: where
 * it stopped, bytes in out, rows in infos; returns 0, or the records of the batch it stopped at
 * where the scratch (capacity records: kt_record_size bytes each, and as many int64s in kept)
 * is too small for them. Needs the CRC instruction (kt_crc_available). */
int64_t kt_filter_plain(const uint64_t *table, int64_t slots, const uint8_t *sup,
                        int64_t sup_bits, const uint8_t *buf, int64_t len, int64_t pos,
                        const int64_t *ctx, const int64_t *pids, const int64_t *last_offsets,
                        int64_t producers, uint8_t *out, int64_t out_len, int64_t *infos,
                        int64_t info_rows, int64_t *stats, void *scratch, int64_t *kept,
                        int64_t capacity, int64_t *result);
int64_t kt_record_size(void);
