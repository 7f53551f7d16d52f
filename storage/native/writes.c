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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kernels.h"

_Static_assert(sizeof(kt_iov) == sizeof(struct iovec), "kt_iov is laid out as struct iovec");

struct kt_writes {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t ready;
    kt_write *ops;
    int64_t published; /* entries [0, published) may be written */
    int closed;        /* no entry will be published after `published` */
};

static int64_t write_one(kt_write *op) {
    struct iovec local[64];
    struct iovec *iov = op->iov_count <= 64 ? local : malloc(sizeof(struct iovec) * op->iov_count);
    if (iov == NULL) {
        return -ENOMEM;
    }
    memcpy(iov, op->iov, sizeof(struct iovec) * op->iov_count);
    int count = op->iov_count;
    struct iovec *at = iov;
    int64_t done = 0;
    int64_t result = 0;
    while (done < op->size) {
        ssize_t n = pwritev(op->fd, at, count, op->position + done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            result = n == 0 ? -ENOSPC : -errno;
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
        result = done;
    }
    if (iov != local) {
        free(iov);
    }
    return op->size == 0 ? 0 : result;
}

static void *run(void *arg) {
    kt_writes *w = arg;
    int64_t done = 0;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (done == w->published && !w->closed) {
            pthread_cond_wait(&w->ready, &w->lock);
        }
        int64_t upto = w->published;
        int closed = w->closed;
        pthread_mutex_unlock(&w->lock);
        if (done == upto && closed) {
            return NULL;
        }
        for (; done < upto; done++) {
            w->ops[done].result = write_one(&w->ops[done]);
        }
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

void kt_writes_publish(kt_writes *w, int64_t count) {
    pthread_mutex_lock(&w->lock);
    if (count > w->published) {
        w->published = count;
        pthread_cond_signal(&w->ready);
    }
    pthread_mutex_unlock(&w->lock);
}

void kt_writes_finish(kt_writes *w) {
    pthread_mutex_lock(&w->lock);
    w->closed = 1;
    pthread_cond_signal(&w->ready);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->ready);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
