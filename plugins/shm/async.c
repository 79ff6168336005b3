/* async.c - how shm's collectives run: a blocking one in the caller's
 * thread when nothing is queued before it (no hand-off), every other one
 * queued, in issue order, to the communicator's progress thread, so a
 * nonblocking call returns as soon as it is posted and the collective
 * advances while the caller computes.
 *
 * One collective runs at a time (`busy`): the protocol's epochs and slot
 * halves (sync.c, coll.c) are one sequence per communicator. A blocking
 * collective with nothing queued claims `busy` with one compare-and-swap,
 * without the lock (the queue's count, `queued`, says whether anything
 * is); whoever else runs one claims it the same way, under the lock. The progress
 * thread is started by the first queued collective and sleeps on a
 * condition variable while the queue is empty; inside a collective it
 * waits as every shm wait does (pace.c: look, spin, yield, futex). A
 * waiting caller helps: when the thread has not yet taken the next
 * collective (it has no core), the caller runs it itself; otherwise the
 * caller looks a few times, then sleeps on its request's futex, so it does
 * not take the core from the thread doing its work.
 *
 * A collective's request handed to the core is its struct shm_creq with
 * the low bit set: the plugin tells it apart from a point-to-point request
 * (p2p.c, in the core's memory, aligned for any type) without reading
 * either.
 *
 * A failure inside the progress thread is reported to the waiter with the
 * same message: the collective writes it into its request (struct
 * shm_op's err) as it reports it, and the waiter's test or wait reports it
 * again through the communicator's host, so the core keeps it for the
 * waiting thread. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#define WAIT_SLICE_NS (20 * UINT64_C(1000000)) /* a waiter rechecks at least this often */
#define WAIT_LOOKS 256

struct shm_creq {
    struct plx_coll_args a; /* the core's args (its buffers are borrowed until done) */
    uint32_t done;          /* futex word: 1 once status and err are final */
    int status;
    int running;            /* taken from the queue */
    char err[SHM_ERR_BYTES]; /* the failure's message, written by whoever runs it */
    struct shm_creq *next;
};

struct shm_async {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* work queued, a collective finished, or stopping */
    struct shm_creq *head, *tail;
    int queued;             /* collectives in the queue: changed under mu, read atomically */
    int busy;               /* atomic: a collective runs (in a caller or the thread) */
    int started, stopping;
    pthread_t thread;
};

/* ---- requests ------------------------------------------------------------ */

static void *tagged(struct shm_creq *r)
{
    return (void *)((uintptr_t)r | 1u);
}

struct shm_creq *shm__creq_of(void *req)
{
    return (uintptr_t)req & 1u ? (struct shm_creq *)((uintptr_t)req & ~(uintptr_t)1u) : NULL;
}

static void futex_wake_private(uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait_private(uint32_t *w, uint32_t val, uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

/* Run a collective after what every collective checks first; with busy
 * held. err as shm__collective's. */
static int run(struct shm_comm *c, const struct plx_coll_args *a, char *err)
{
    int rc = shm__refusal(c, 0, err);
    return rc ? rc : shm__collective(c, a, err);
}

static int claim(struct shm_async *q)
{
    int idle = 0;
    return __atomic_compare_exchange_n(&q->busy, &idle, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* Sequentially consistent, as the end of an inline run's store and load:
 * a thread that saw busy and sleeps is woken by the end that clears it.
 * Not inlined: gcc 12 with -fsanitize=address reports a bogus
 * stringop-overflow for the atomic load inlined into the waits (only slow
 * paths call it). */
__attribute__((noinline)) static int is_busy(struct shm_async *q)
{
    return __atomic_load_n(&q->busy, __ATOMIC_SEQ_CST);
}

/* Take the next queued collective and run it in this thread, unless a
 * caller's blocking one runs; called and returns with mu held and the
 * queue non-empty on entry. */
static void run_head(struct shm_comm *c, struct shm_async *q)
{
    if (!claim(q))
        return; /* its end wakes the thread: the queue is not empty */
    struct shm_creq *r = q->head;
    q->head = r->next;
    if (!q->head)
        q->tail = NULL;
    __atomic_store_n(&q->queued, q->queued - 1, __ATOMIC_RELAXED);
    r->running = 1;
    int stopping = q->stopping;
    pthread_mutex_unlock(&q->mu);

    int rc = PLX_ERR_ABORTED;
    if (stopping)
        snprintf(r->err, sizeof r->err, "shm: communicator '%s' was destroyed with this %s pending", c->name,
                 shm__coll_name(r->a.coll));
    else
        rc = run(c, &r->a, r->err);

    pthread_mutex_lock(&q->mu);
    r->status = rc;
    if (rc && !r->err[0])
        snprintf(r->err, sizeof r->err, "shm: collective failed");
    __atomic_store_n(&q->busy, 0, __ATOMIC_RELEASE);
    /* Under mu: the core frees the request (req_free takes mu) only after
     * this wake. */
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    futex_wake_private(&r->done);
    pthread_cond_broadcast(&q->cv);
}

static void *progress_main(void *arg)
{
    struct shm_comm *c = arg;
    struct shm_async *q = c->async;
    pthread_setname_np(pthread_self(), "plx-shm-progress");
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while ((!q->head || is_busy(q)) && !q->stopping)
            pthread_cond_wait(&q->cv, &q->mu);
        if (!q->head)
            break; /* stopping and drained */
        if (is_busy(q)) { /* stopping: the running one first (its end wakes us: the queue is not empty) */
            pthread_cond_wait(&q->cv, &q->mu);
            continue;
        }
        run_head(c, q);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int shm__async_create(struct shm_comm *c)
{
    struct shm_async *q = calloc(1, sizeof *q);
    if (!q)
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "shm: out of memory");
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    c->async = q;
    return 0;
}

int shm__coll_start(struct shm_comm *c, const struct plx_coll_args *a, void **req)
{
    struct shm_async *q = c->async;
    if ((a->flags & PLX_COLL_FLAG_BLOCKING) && !__atomic_load_n(&q->queued, __ATOMIC_ACQUIRE) && claim(q)) {
        if (!__atomic_load_n(&q->queued, __ATOMIC_SEQ_CST)) {
            /* Nothing before it: run here, no hand-off latency. */
            int rc = run(c, a, NULL);
            __atomic_store_n(&q->busy, 0, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(&q->queued, __ATOMIC_SEQ_CST)) { /* queued meanwhile by another thread */
                pthread_mutex_lock(&q->mu);
                pthread_cond_broadcast(&q->cv);
                pthread_mutex_unlock(&q->mu);
            }
            if (rc)
                return rc;
            *req = c; /* complete on return */
            return 0;
        }
        /* queued by another thread just now: it goes first */
        __atomic_store_n(&q->busy, 0, __ATOMIC_SEQ_CST);
        pthread_mutex_lock(&q->mu);
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    pthread_mutex_lock(&q->mu);
    struct shm_creq *r = calloc(1, sizeof *r);
    if (!r) {
        pthread_mutex_unlock(&q->mu);
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "shm: out of memory");
    }
    r->a = *a;
    if (!q->started) {
        int e = pthread_create(&q->thread, NULL, progress_main, c);
        if (e) {
            pthread_mutex_unlock(&q->mu);
            free(r);
            return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: cannot start the progress thread of '%s': %s",
                                    c->name, strerror(e));
        }
        q->started = 1;
    }
    if (q->tail)
        q->tail->next = r;
    else
        q->head = r;
    q->tail = r;
    __atomic_store_n(&q->queued, q->queued + 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    *req = tagged(r);
    return 0;
}

static int finished(struct shm_comm *c, struct shm_creq *r)
{
    return r->status ? plx_plugin_error(c->host, r->status, "%s", r->err) : 0;
}

int shm__creq_test(struct shm_comm *c, struct shm_creq *r, int *done)
{
    *done = (int)__atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
    return *done ? finished(c, r) : 0;
}

int shm__creq_wait_until(struct shm_comm *c, struct shm_creq *r, uint64_t deadline_ns)
{
    struct shm_async *q = c->async;
    for (unsigned k = 0;; k++) {
        if (__atomic_load_n(&r->done, __ATOMIC_ACQUIRE))
            return finished(c, r);
        if (k < WAIT_LOOKS) {
            shm__cpu_relax();
            continue;
        }
        /* The progress thread has not taken the next collective: run it here. */
        pthread_mutex_lock(&q->mu);
        if (!__atomic_load_n(&r->done, __ATOMIC_RELAXED) && !is_busy(q) && q->head && !q->stopping)
            run_head(c, q);
        pthread_mutex_unlock(&q->mu);
        if (__atomic_load_n(&r->done, __ATOMIC_ACQUIRE))
            return finished(c, r);
        uint64_t now = c->host->clock_ns();
        if (now >= deadline_ns)
            return plx_plugin_error(c->host, PLX_ERR_TIMEOUT, "shm: %s(seq %llu) on '%s' still pending",
                                    shm__coll_name(r->a.coll), (unsigned long long)r->a.seq, c->name);
        uint64_t ns = deadline_ns - now < WAIT_SLICE_NS ? deadline_ns - now : WAIT_SLICE_NS;
        futex_wait_private(&r->done, 0, ns);
    }
}

void shm__creq_free(struct shm_comm *c, struct shm_creq *r)
{
    struct shm_async *q = c->async;
    pthread_mutex_lock(&q->mu);
    if (!__atomic_load_n(&r->done, __ATOMIC_RELAXED) && !r->running) { /* still queued: cancel it */
        struct shm_creq **p = &q->head, *prev = NULL;
        while (*p && *p != r) {
            prev = *p;
            p = &(*p)->next;
        }
        if (*p) {
            *p = r->next;
            if (q->tail == r)
                q->tail = prev;
            __atomic_store_n(&q->queued, q->queued - 1, __ATOMIC_RELAXED);
        }
    } else if (!__atomic_load_n(&r->done, __ATOMIC_RELAXED)) {
        /* Running: the caller's buffers must be free when this returns, so
         * end it (the communicator is failed already: the core frees a
         * pending request only after a timeout or an error) and wait. */
        __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
        shm__wake_all(c);
        while (!__atomic_load_n(&r->done, __ATOMIC_RELAXED))
            pthread_cond_wait(&q->cv, &q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    free(r);
}

void shm__async_destroy(struct shm_comm *c)
{
    struct shm_async *q = c->async;
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    int pending = is_busy(q) || q->head;
    pthread_mutex_unlock(&q->mu);
    if (pending) { /* destroyed with collectives in flight: make them end now, not at their timeout */
        __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
        if (c->base)
            shm__wake_all(c);
    }
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    pthread_cond_broadcast(&q->cv);
    int started = q->started;
    pthread_mutex_unlock(&q->mu);
    if (started)
        pthread_join(q->thread, NULL);
    /* Whatever the core never collected. */
    for (struct shm_creq *r = q->head, *n; r; r = n) {
        n = r->next;
        free(r);
    }
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
    c->async = NULL;
}
