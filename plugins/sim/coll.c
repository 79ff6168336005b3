/* coll.c - native collectives over shared memory. Each rank has a worker
 * thread that runs its collectives in issue order, so work progresses
 * without the caller polling. The ranks' workers meet at barriers between
 * phases; in each phase every rank does its own share (rank t reduces slice
 * t), so P threads work in parallel and each byte is copied once. A
 * blocking collective with nothing queued runs in the caller's thread: it
 * would only wait for the worker anyway, and this saves two hand-offs. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct part {
    size_t off, len;
};

/* Slice t of count elements over P ranks (sizes differ by at most one). */
static struct part slice(size_t count, int P, int t)
{
    size_t base = count / (size_t)P, rem = count % (size_t)P;
    struct part p = {base * (size_t)t + ((size_t)t < rem ? (size_t)t : rem), base + ((size_t)t < rem)};
    return p;
}

static void copy(void *dst, const void *src, size_t n)
{
    if (n && dst != src)
        memmove(dst, src, n);
}

/* out = slot[first].src op slot[others].src over elements [off, off+len),
 * starting with `first` so an in-place output aliases its own input only.
 * Worked in cache-sized chunks: the partial result stays in cache while
 * every input streams past it once. */
static int reduce_into(struct impl *c, char *out, int first, size_t byte_off, size_t len,
                       const struct plx_coll_args *a)
{
    const struct plx_host *h = sim_host;
    struct world *w = c->w;
    size_t es = sim_dtype_size(a->dtype), chunk = (32u << 10) / es;
    for (size_t base = 0; base < len; base += chunk) {
        size_t n = len - base < chunk ? len - base : chunk, boff = byte_off + base * es;
        char *o = out + base * es;
        copy(o, (const char *)w->slot[first]->send + boff, n * es);
        for (int s = 1; s < c->size; s++) {
            int u = (first + s) % c->size;
            int rc = h->reduce(o, (const char *)w->slot[u]->send + boff, n, a->dtype, a->op);
            if (rc)
                return rc;
        }
    }
    return a->op == PLX_AVG ? h->scale_div(out, len, a->dtype, (uint64_t)c->size) : 0;
}

static void *scratch(struct impl *c, size_t bytes)
{
    if (bytes > c->scratch_bytes) {
        void *p = realloc(c->scratch, bytes);
        if (!p)
            return NULL;
        c->scratch = p;
        c->scratch_bytes = bytes;
    }
    return c->scratch;
}

#define BARRIER() sim_barrier(c, what, deadline, ms)

static int run(struct impl *c, const struct plx_coll_args *a, uint64_t deadline, int64_t ms)
{
    struct world *w = c->w;
    int P = c->size, t = c->rank, rc;
    const char *what = sim_coll_name(a->coll);
    size_t es = sim_dtype_size(a->dtype), bytes = a->count * es;

    sim_fault_delay(c);
    w->slot[t] = a;
    if ((rc = BARRIER()) != 0)
        return rc;
    /* Injected failures strike after the rendezvous, mid-collective: this
     * rank stops taking part, so the others time out at the next barrier. */
    if ((rc = sim_fault_check(c, what)) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", sim_last_error());
        sim_linger(c, deadline);
        return sim_error(rc, "%s", msg);
    }

    switch (a->coll) {
    case PLX_COLL_BARRIER:
        return 0;
    case PLX_COLL_ALLREDUCE: {
        if (bytes <= SIM_SMALL_BYTES) {
            /* Every rank reduces everything, in rank order (so all get the
             * same bits), into its own scratch; after the barrier nobody
             * reads another rank's buffers, so no third barrier. */
            if ((rc = reduce_into(c, c->small, 0, 0, a->count, a)) != 0)
                return rc;
            if ((rc = BARRIER()) != 0)
                return rc;
            copy(a->recv, c->small, bytes);
            return 0;
        }
        struct part p = slice(a->count, P, t);
        if ((rc = reduce_into(c, (char *)a->recv + p.off * es, t, p.off * es, p.len, a)) != 0)
            return rc;
        if ((rc = BARRIER()) != 0)
            return rc;
        for (int s = 0; s < P; s++) {
            struct part q = slice(a->count, P, s);
            if (s != t)
                copy((char *)a->recv + q.off * es, (const char *)w->slot[s]->recv + q.off * es, q.len * es);
        }
        break;
    }
    case PLX_COLL_REDUCE: {
        struct part p = slice(a->count, P, t);
        int root = a->root;
        if ((rc = reduce_into(c, (char *)w->slot[root]->recv + p.off * es, root, p.off * es, p.len, a)) != 0)
            return rc;
        break;
    }
    case PLX_COLL_REDUCE_SCATTER:
        if ((rc = reduce_into(c, a->recv, t, (size_t)t * bytes, a->count, a)) != 0)
            return rc;
        break;
    case PLX_COLL_BROADCAST:
        if (t != a->root)
            copy(a->recv, w->slot[a->root]->recv, bytes);
        break;
    case PLX_COLL_ALLGATHER:
        for (int s = 0; s < P; s++)
            copy((char *)a->recv + (size_t)s * bytes, w->slot[s]->send, bytes);
        break;
    case PLX_COLL_GATHER:
        for (int s = 0; t == a->root && s < P; s++)
            copy((char *)a->recv + (size_t)s * bytes, w->slot[s]->send, bytes);
        break;
    case PLX_COLL_SCATTER:
        copy(a->recv, (const char *)w->slot[a->root]->send + (size_t)t * bytes, bytes);
        break;
    case PLX_COLL_ALLTOALL: {
        int inplace = 0; /* every rank sees every slot, so all agree */
        for (int s = 0; s < P; s++)
            inplace |= w->slot[s]->send == w->slot[s]->recv;
        if (!inplace) {
            for (int s = 0; s < P; s++)
                copy((char *)a->recv + (size_t)s * bytes, (const char *)w->slot[s]->send + (size_t)t * bytes, bytes);
            break;
        }
        char *tmp = scratch(c, bytes * (size_t)P);
        if (!tmp && bytes)
            return sim_error(PLX_ERR_NOMEM, "sim: out of memory");
        for (int s = 0; s < P; s++)
            copy(tmp + (size_t)s * bytes, (const char *)w->slot[s]->send + (size_t)t * bytes, bytes);
        if ((rc = BARRIER()) != 0)
            return rc;
        copy(a->recv, tmp, bytes * (size_t)P);
        break;
    }
    default:
        return sim_error(PLX_ERR_UNSUPPORTED, "sim: no native %s", what);
    }
    /* Nobody leaves while others may still read its buffers. */
    return BARRIER();
}

/* Run one collective request to completion in the calling thread (worker
 * or, for a blocking call, the caller) and record its outcome. */
static void execute(struct impl *c, struct sim_req *r, int aborted)
{
    struct world *w = c->w;
    int64_t ms = r->args.timeout_ms >= 0 ? r->args.timeout_ms : c->timeout_ms;
    uint64_t deadline = sim_host->clock_ns() + (uint64_t)ms * 1000000u;
    int rc = aborted ? sim_error(PLX_ERR_ABORTED, "sim: rank %d: communicator aborted", c->rank)
                     : run(c, &r->args, deadline, ms);
    char err[sizeof r->err] = "";
    if (rc)
        snprintf(err, sizeof err, "%s", sim_last_error()[0] ? sim_last_error() : "sim: collective failed");

    pthread_mutex_lock(&w->mu);
    r->status = rc;
    r->done = 1;
    if (rc) /* recorded in this thread; replayed to the waiter by test/wait */
        memcpy(r->err, err, sizeof r->err);
    c->busy = 0;
    if (r->freed)
        sim_req_release_locked(c, r);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg)
{
    struct impl *c = arg;
    struct world *w = c->w;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while ((!c->qhead || c->busy) && !c->stopping)
            pthread_cond_wait(&c->cv, &w->mu);
        struct sim_req *r = c->qhead;
        if (!r)
            break;
        if (c->busy) { /* stopping, but a caller still runs one inline */
            pthread_cond_wait(&c->cv, &w->mu);
            continue;
        }
        c->qhead = r->next;
        if (!c->qhead)
            c->qtail = NULL;
        c->busy = 1;
        int aborted = c->aborted || c->stopping;
        pthread_mutex_unlock(&w->mu);
        execute(c, r, aborted);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int sim_worker_start(struct impl *c)
{
    if (pthread_create(&c->worker, NULL, worker_main, c) != 0)
        return sim_error(PLX_ERR_SYSTEM, "sim: cannot start the worker of rank %d", c->rank);
    return 0;
}

void sim_worker_stop(struct impl *c)
{
    struct world *w = c->w;
    pthread_mutex_lock(&w->mu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(c->worker, NULL);
}

int sim_collective(void *comm, const struct plx_coll_args *a, void **req)
{
    struct impl *c = comm;
    struct world *w = c->w;
    struct sim_req *r = sim_req_new(c);
    if (!r)
        return sim_error(PLX_ERR_NOMEM, "sim: out of memory");
    r->is_coll = 1;
    r->owner = c->rank;
    r->args = *a;
    int blocking = a->struct_size >= offsetof(struct plx_coll_args, flags) + sizeof a->flags &&
                   (a->flags & PLX_COLL_FLAG_BLOCKING);
    pthread_mutex_lock(&w->mu);
    if (c->aborted) {
        sim_req_release_locked(c, r);
        pthread_mutex_unlock(&w->mu);
        return sim_error(PLX_ERR_ABORTED, "sim: rank %d: communicator aborted", c->rank);
    }
    if (blocking && !c->qhead && !c->busy) {
        c->busy = 1; /* the worker holds back until execute() clears it */
        pthread_mutex_unlock(&w->mu);
        execute(c, r, 0);
        *req = r;
        return 0;
    }
    if (c->qtail)
        c->qtail->next = r;
    else
        c->qhead = r;
    c->qtail = r;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&w->mu);
    *req = r;
    return 0;
}
