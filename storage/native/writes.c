/* Queued writes: positioned writes (pwritev) done by a thread of their own, in the order they
 * were queued, while the caller (Python, holding its GIL) goes on placing the next ones. Why: a
 * micro-batch into a thousand partitions makes a thousand small appends, and each costs the
 * kernel 11-17 us (page cache, ext4's block reservation, the inode's times); written by this
 * thread on the other core, that time overlaps the Python work of the next partitions' appends
 * instead of adding to it (storage/log/queued_writes.py says who queues what and when).
 *
 * The caller owns the array of kt_write and every buffer the iovecs point to, and keeps them
 * until kt_writes_finish returns; it fills entry i before it publishes a count above i. The
 * thread sets each entry's `result`: the bytes written (its `size`: a short write is continued)
 * or -errno (0 bytes written at all counts as ENOSPC, as the Python path has it).
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
    int64_t written;   /* entries [0, written) are (atomic) */
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

/* Sleep until more is published or the queue is closed; false when closed with nothing left. */
static int wait_for_more(kt_writes *w, int64_t done) {
    pthread_mutex_lock(&w->lock);
    __atomic_store_n(&w->sleeping, 1, __ATOMIC_SEQ_CST);
    while (done == __atomic_load_n(&w->published, __ATOMIC_SEQ_CST) &&
           !__atomic_load_n(&w->closed, __ATOMIC_SEQ_CST)) {
        pthread_cond_wait(&w->ready, &w->lock);
    }
    __atomic_store_n(&w->sleeping, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&w->lock);
    return done < __atomic_load_n(&w->published, __ATOMIC_SEQ_CST);
}

static void *run(void *arg) {
    kt_writes *w = arg;
    int64_t done = 0;
    int64_t idle_since = now_ns();
    for (;;) {
        int64_t upto = __atomic_load_n(&w->published, __ATOMIC_SEQ_CST);
        if (done < upto) {
            for (; done < upto; done++) {
                w->ops[done].result = write_one(&w->ops[done]);
                __atomic_store_n(&w->written, done + 1, __ATOMIC_SEQ_CST);
            }
            idle_since = now_ns();
            continue;
        }
        if (__atomic_load_n(&w->closed, __ATOMIC_SEQ_CST)) {
            if (done == __atomic_load_n(&w->published, __ATOMIC_SEQ_CST)) {
                return NULL;
            }
            continue;
        }
        if (now_ns() - idle_since < SPIN_NS) {
            sched_yield();
            continue;
        }
        if (!wait_for_more(w, done) && __atomic_load_n(&w->closed, __ATOMIC_SEQ_CST)) {
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

/* Until every entry published so far is written (the crash tests' steps: bytes in the files). */
void kt_writes_wait(kt_writes *w) {
    while (__atomic_load_n(&w->written, __ATOMIC_SEQ_CST) <
           __atomic_load_n(&w->published, __ATOMIC_SEQ_CST)) {
        sched_yield();
    }
}

void kt_writes_finish(kt_writes *w) {
    __atomic_store_n(&w->closed, 1, __ATOMIC_SEQ_CST);
    wake(w);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->ready);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
