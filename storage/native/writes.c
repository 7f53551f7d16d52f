/* Queued writes: positioned writes (pwritev) done by a thread of their own, taken in the order
 * they were queued, while the caller (Python, holding its GIL) goes on placing the next ones.
 * Why: a micro-batch into a thousand partitions makes a thousand small appends, and each costs the
 * kernel 11-17 us (page cache, ext4's block reservation, the inode's times; about 30 while the
 * filesystem writes back); written by this thread on the other core, that time overlaps the
 * Python work of the next partitions' appends instead of adding to it
 * (storage/log/queued_writes.py says who queues what and when).
 *
 * The caller that finishes the queue writes too: it claims the next entries not yet taken, as
 * the thread does, instead of only waiting for the thread, so what is left of the queue when the
 * caller has placed everything is written on both cores. At 1,024 partitions that was most of
 * the wait at a micro-batch's end (the thread wrote for 17-25 ms after the caller's last
 * entry, 28-36 ms in all, while the host wrote back; ad hoc phase timers, docs/performance.md,
 * stop 67). Each entry is one append of its own file (one a partition: a queue never holds
 * two unwritten appends of one file), so the entries written side by side need no order
 * between them; a crash among them leaves some partitions' appends written, as it did before.
 *
 * The caller owns the array of kt_write and every buffer the iovecs point to, and keeps them
 * until kt_writes_finish returns; it fills entry i before it publishes a count above i. The
 * writer of each entry sets its `result`: the bytes written (its `size`: a short write is
 * continued) or -errno (0 bytes written at all counts as ENOSPC, as the Python path has it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "kernels.h"

_Static_assert(sizeof(kt_iov) == sizeof(struct iovec), "kt_iov is laid out as struct iovec");

struct kt_writes {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t ready;
    kt_write *ops;
    int64_t published; /* entries [0, published) may be written (atomic) */
    int64_t claimed;   /* entries [0, claimed) are taken by a writer (atomic) */
    int64_t written;   /* how many entries are written (atomic) */
    int closed;        /* no entry will be published after `published` (atomic) */
    int sleeping;      /* the thread waits on `ready` (atomic; set and cleared under `lock`) */
};

/* How long the thread looks for newly published entries before it sleeps: a caller publishes
 * every few appends, and a publish that woke a sleeping thread cost the caller 27 us a time
 * (the futex wake-up and whatever it set off; 1.4 us a publish with the thread spinning, ad
 * hoc), more than the appends it handed over. */
#define SPIN_NS 2000000L

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000L + t.tv_nsec;
}

/* The entry's bytes written (a short write continued): its size, or -errno. */
static int64_t write_one(kt_write *op) {
    struct iovec local[64];
    struct iovec *iov = op->iov_count <= 64 ? local : malloc(sizeof(struct iovec) * op->iov_count);
    if (iov == NULL) {
        return -ENOMEM;
    }
    memcpy(iov, op->iov, sizeof(struct iovec) * op->iov_count); /* advanced past short writes */
    struct iovec *at = iov;
    int count = op->iov_count;
    int64_t done = 0;
    while (done < op->size) {
        ssize_t n = pwritev(op->fd, at, count, op->position + done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            done = n == 0 ? -ENOSPC : -errno;
            break;
        }
        done += n;
        while (count > 0 && (size_t)n >= at->iov_len) { /* drop the iovecs written whole */
            n -= (ssize_t)at->iov_len;
            at++;
            count--;
        }
        if (count > 0 && n > 0) {
            at->iov_base = (uint8_t *)at->iov_base + n;
            at->iov_len -= (size_t)n;
        }
    }
    if (iov != local) {
        free(iov);
    }
    return done;
}

/* The next published entry no writer has taken, now taken; -1 when there is none. */
static int64_t claim(kt_writes *w) {
    int64_t next = __atomic_load_n(&w->claimed, __ATOMIC_SEQ_CST);
    while (next < __atomic_load_n(&w->published, __ATOMIC_SEQ_CST)) {
        if (__atomic_compare_exchange_n(&w->claimed, &next, next + 1, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            return next;
        }
    }
    return -1;
}

/* Write every entry this writer can claim; whether it wrote any. */
static int write_claimed(kt_writes *w) {
    int any = 0;
    for (int64_t i = claim(w); i >= 0; i = claim(w)) {
        w->ops[i].result = write_one(&w->ops[i]);
        __atomic_add_fetch(&w->written, 1, __ATOMIC_SEQ_CST);
        any = 1;
    }
    return any;
}

/* Sleep until more is published or the queue is closed; false when closed with nothing left. */
static int wait_for_more(kt_writes *w) {
    pthread_mutex_lock(&w->lock);
    __atomic_store_n(&w->sleeping, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&w->claimed, __ATOMIC_SEQ_CST) ==
               __atomic_load_n(&w->published, __ATOMIC_SEQ_CST) &&
           !__atomic_load_n(&w->closed, __ATOMIC_SEQ_CST)) {
        pthread_cond_wait(&w->ready, &w->lock);
    }
    __atomic_store_n(&w->sleeping, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&w->lock);
    return __atomic_load_n(&w->claimed, __ATOMIC_SEQ_CST) <
           __atomic_load_n(&w->published, __ATOMIC_SEQ_CST);
}

static void *run(void *arg) {
    kt_writes *w = arg;
    int64_t idle_since = now_ns();
    for (;;) {
        if (write_claimed(w)) {
            idle_since = now_ns();
            continue;
        }
        if (__atomic_load_n(&w->closed, __ATOMIC_SEQ_CST)) {
            /* closed after the last publish, which this load now sees: what is left of it,
             * shared with the finishing caller (or all of it, where the caller only waits) */
            write_claimed(w);
            return NULL;
        }
        if (now_ns() - idle_since < SPIN_NS) {
            sched_yield();
            continue;
        }
        if (!wait_for_more(w) && __atomic_load_n(&w->closed, __ATOMIC_SEQ_CST)) {
            return NULL;
        }
        idle_since = now_ns();
    }
}

kt_writes *kt_writes_start(kt_write *ops) {
    kt_writes *w = calloc(1, sizeof(kt_writes));
    if (w == NULL) {
        return NULL;
    }
    w->ops = ops;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->ready, NULL);
    if (pthread_create(&w->thread, NULL, run, w) != 0) {
        pthread_cond_destroy(&w->ready);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
    }
    return w;
}

/* Wakes the thread only where it sleeps (see `sleeping`): the store of `published` and the
 * load of `sleeping` here, and the store of `sleeping` and the load of `published` there, are
 * sequentially consistent, so one of the two sides always sees the other's. */
static void wake(kt_writes *w) {
    if (__atomic_load_n(&w->sleeping, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&w->lock);
        pthread_cond_signal(&w->ready);
        pthread_mutex_unlock(&w->lock);
    }
}

void kt_writes_publish(kt_writes *w, int64_t count) {
    if (count > __atomic_load_n(&w->published, __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&w->published, count, __ATOMIC_SEQ_CST);
        wake(w);
    }
}

/* Until every entry published so far is written (the crash tests' steps: bytes in the files;
 * only the thread writes before the finish, and it claims in order). */
void kt_writes_wait(kt_writes *w) {
    while (__atomic_load_n(&w->written, __ATOMIC_SEQ_CST) <
           __atomic_load_n(&w->published, __ATOMIC_SEQ_CST)) {
        sched_yield();
    }
}

/* Every entry written, then the thread joined (the caller published the last count before);
 * share: the caller writes those the thread has not taken, beside it (0: it only waits, as
 * bench/sink_writes.py compares). */
void kt_writes_finish(kt_writes *w, int share) {
    __atomic_store_n(&w->closed, 1, __ATOMIC_SEQ_CST);
    wake(w);
    if (share) {
        write_claimed(w);
    }
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->ready);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
