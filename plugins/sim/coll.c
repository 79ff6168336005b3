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

/* The data phases are split into work items (chunks of at most
 * SIM_ITEM_BYTES) that the ranks claim from a shared counter, reset at every
 * barrier. Whichever rank threads are running do the work, so with more
 * ranks than cores a descheduled thread does not hold up a phase. Each item
 * writes its own part of one output and reads inputs no other item of the
 * phase writes, which also holds in place. */
static size_t claim(struct world *w)
{
    return __atomic_fetch_add(&w->next_item, 1, __ATOMIC_RELAXED);
}

/* Elements in chunk k of count elements cut into chunks of per. */
static size_t piece(size_t count, size_t per, size_t k)
{
    return count - k * per < per ? count - k * per : per;
}

/* out = slot[first].src op slot[others].src over elements [off, off+len),
 * starting with `first` so an in-place output aliases its own input only.
 * Worked in cache-sized chunks: the partial result stays in cache while
 * every input streams past it once. */
static int reduce_into(struct impl *c, char *out, int first, size_t byte_off, size_t len,
                       const struct plx_coll_args *a)
{
    const struct plx_host *h = c->host;
    struct world *w = c->w;
    size_t es = sim_dtype_size(a->dtype), chunk = (32u << 10) / es;
    for (size_t base = 0; base < len; base += chunk) {
        size_t n = len - base < chunk ? len - base : chunk, boff = byte_off + base * es;
        char *o = out + base * es;
        plx_plugin_move(o, (const char *)w->slot[first]->send + boff, n * es);
        for (int s = 1; s < c->size; s++) {
            int u = (first + s) % c->size;
            int rc = h->reduce(o, (const char *)w->slot[u]->send + boff, n, a->dtype, a->op);
            if (rc)
                return rc;
        }
    }
    return a->op == PLX_AVG ? h->scale_div(out, len, a->dtype, (uint64_t)c->size) : 0;
}

void *sim_scratch(struct impl *c, size_t bytes)
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

/* One native collective in progress: its call and the cut of its blocks
 * into work items of per elements (nch items per block). */
struct phase {
    struct impl *c;
    const struct plx_coll_args *a;
    const char *what;
    uint64_t deadline;
    int64_t ms;
    size_t es, bytes, per, nch;
};

static int barrier(const struct phase *x)
{
    return sim_barrier(x->c, x->what, x->deadline, x->ms);
}

/* Chunk k of a block as a byte offset, and its length in bytes. */
static size_t at(const struct phase *x, size_t k)
{
    return k * x->per * x->es;
}

static size_t len(const struct phase *x, size_t k)
{
    return piece(x->a->count, x->per, k) * x->es;
}

/* Every rank publishes its call, meets the others, and checks that they
 * all called the same; an injected failure strikes after that, mid-
 * collective: this rank stops taking part, so the others time out at the
 * next barrier. */
static int rendezvous(const struct phase *x)
{
    struct impl *c = x->c;
    struct world *w = c->w;
    int rc;
    sim_fault_delay(c);
    w->slot[c->rank] = x->a;
    int parity = (int)(c->ncoll++ & 1);
    w->calls[parity][c->rank] = *x->a;
    if ((rc = barrier(x)) != 0)
        return rc;
    char mm[320];
    if (sim_check_match(c, parity, mm, sizeof mm) != 0) {
        rc = barrier(x); /* nobody returns while another reads its slot */
        return sim_error(c, PLX_ERR_MISMATCH, "sim: %s%s", mm, rc ? " (and a rank left)" : "");
    }
    if ((rc = sim_fault_check(c, x->what)) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", sim_last_error(c));
        sim_linger(c, x->deadline);
        return sim_error(c, rc, "%s", msg);
    }
    return 0;
}

/* Up to SIM_SMALL_BYTES every rank reduces everything, in rank order (so
 * all get the same bits), into its own scratch; after the barrier nobody
 * reads another rank's buffers, so no third barrier. Above, chunk k is
 * reduced once, into the receive buffer of rank k % P, then copied to
 * every other rank's. */
static int allreduce(const struct phase *x)
{
    struct impl *c = x->c;
    struct world *w = c->w;
    const struct plx_coll_args *a = x->a;
    int P = c->size, rc;
    if (x->bytes <= SIM_SMALL_BYTES) {
        if ((rc = reduce_into(c, c->small, 0, 0, a->count, a)) != 0 || (rc = barrier(x)) != 0)
            return rc;
        plx_plugin_move(a->recv, c->small, x->bytes);
        return 0;
    }
    for (size_t k; (k = claim(w)) < x->nch;)
        if ((rc = reduce_into(c, (char *)w->slot[k % P]->recv + at(x, k), (int)(k % P), at(x, k),
                              piece(a->count, x->per, k), a)) != 0)
            return rc;
    if ((rc = barrier(x)) != 0)
        return rc;
    for (size_t i; (i = claim(w)) < x->nch * (size_t)(P - 1);) {
        size_t k = i / (size_t)(P - 1);
        int o = (int)(k % P), d = (o + 1 + (int)(i % (size_t)(P - 1))) % P;
        plx_plugin_move((char *)w->slot[d]->recv + at(x, k), (const char *)w->slot[o]->recv + at(x, k), len(x, k));
    }
    return barrier(x);
}

static int reduce(const struct phase *x)
{
    struct world *w = x->c->w;
    int root = x->a->root, rc;
    for (size_t k; (k = claim(w)) < x->nch;)
        if ((rc = reduce_into(x->c, (char *)w->slot[root]->recv + at(x, k), root, at(x, k),
                              piece(x->a->count, x->per, k), x->a)) != 0)
            return rc;
    return barrier(x);
}

/* Item (d, k): chunk k of rank d's block. */
static int reduce_scatter(const struct phase *x)
{
    struct world *w = x->c->w;
    int rc;
    for (size_t i; (i = claim(w)) < x->nch * (size_t)x->c->size;) {
        size_t d = i / x->nch, k = i % x->nch;
        if ((rc = reduce_into(x->c, (char *)w->slot[d]->recv + at(x, k), (int)d, d * x->bytes + at(x, k),
                              piece(x->a->count, x->per, k), x->a)) != 0)
            return rc;
    }
    return barrier(x);
}

/* Item (d, k): chunk k to rank d, from the root's receive buffer
 * (broadcast) or from block d of the root's send buffer (scatter). */
static int from_root(const struct phase *x, int scatter)
{
    struct world *w = x->c->w;
    const struct plx_coll_args *root = w->slot[x->a->root];
    for (size_t i; (i = claim(w)) < x->nch * (size_t)x->c->size;) {
        size_t d = i / x->nch, k = i % x->nch;
        const char *src = scatter ? (const char *)root->send + d * x->bytes : (const char *)root->recv;
        plx_plugin_move((char *)w->slot[d]->recv + at(x, k), src + at(x, k), len(x, k));
    }
    return barrier(x);
}

/* Item (s, k): chunk k of rank s's block to the root. */
static int gather(const struct phase *x)
{
    struct world *w = x->c->w;
    for (size_t i; (i = claim(w)) < x->nch * (size_t)x->c->size;) {
        size_t s = i / x->nch, k = i % x->nch;
        plx_plugin_move((char *)w->slot[x->a->root]->recv + s * x->bytes + at(x, k),
                        (const char *)w->slot[s]->send + at(x, k), len(x, k));
    }
    return barrier(x);
}

/* Item (d, s, k): chunk k of block s of rank d, from rank s's send buffer:
 * its only block (allgather) or its block d (alltoall). */
static int exchange(const struct phase *x, int alltoall)
{
    struct world *w = x->c->w;
    size_t P = (size_t)x->c->size;
    for (size_t i; (i = claim(w)) < x->nch * P * P;) {
        size_t d = i / (x->nch * P), s = i / x->nch % P, k = i % x->nch;
        plx_plugin_move((char *)w->slot[d]->recv + s * x->bytes + at(x, k),
                        (const char *)w->slot[s]->send + (alltoall ? d * x->bytes : 0) + at(x, k), len(x, k));
    }
    return barrier(x);
}

/* In place, a rank's blocks are overwritten while others still read them:
 * each rank first collects its blocks into scratch. Every rank sees every
 * slot, so all agree on which way to go. */
static int alltoall(const struct phase *x)
{
    struct impl *c = x->c;
    struct world *w = c->w;
    int P = c->size, inplace = 0, rc;
    for (int s = 0; s < P; s++)
        inplace |= w->slot[s]->send == w->slot[s]->recv;
    if (!inplace)
        return exchange(x, 1);
    char *tmp = sim_scratch(c, x->bytes * (size_t)P);
    if (!tmp && x->bytes)
        return sim_error(c, PLX_ERR_NOMEM, "sim: out of memory");
    for (int s = 0; s < P; s++)
        plx_plugin_move(tmp + (size_t)s * x->bytes, (const char *)w->slot[s]->send + (size_t)c->rank * x->bytes,
                        x->bytes);
    if ((rc = barrier(x)) != 0)
        return rc;
    plx_plugin_move(x->a->recv, tmp, x->bytes * (size_t)P);
    return barrier(x);
}

/* Each data function ends with a barrier: nobody leaves while others may
 * still read its buffers. */
static int run(struct impl *c, const struct plx_coll_args *a, uint64_t deadline, int64_t ms)
{
    size_t es = sim_dtype_size(a->dtype), per = SIM_ITEM_BYTES / es;
    struct phase x = {.c = c, .a = a, .what = sim_coll_name(a->coll), .deadline = deadline, .ms = ms, .es = es,
                      .bytes = a->count * es, .per = per, .nch = (a->count + per - 1) / per};
    int rc = rendezvous(&x);
    if (rc)
        return rc;
    switch (a->coll) {
    case PLX_COLL_BARRIER: return 0;
    case PLX_COLL_ALLREDUCE: return allreduce(&x);
    case PLX_COLL_REDUCE: return reduce(&x);
    case PLX_COLL_REDUCE_SCATTER: return reduce_scatter(&x);
    case PLX_COLL_BROADCAST: return from_root(&x, 0);
    case PLX_COLL_SCATTER: return from_root(&x, 1);
    case PLX_COLL_ALLGATHER: return exchange(&x, 0);
    case PLX_COLL_GATHER: return gather(&x);
    case PLX_COLL_ALLTOALL: return alltoall(&x);
    default: return sim_error(c, PLX_ERR_UNSUPPORTED, "sim: no native %s", x.what);
    }
}

/* Run one collective request to completion in the calling thread (worker
 * or, for a blocking call, the caller) and record its outcome. */
static void execute(struct impl *c, struct sim_req *r, int aborted)
{
    struct world *w = c->w;
    int64_t ms = r->args.timeout_ms >= 0 ? r->args.timeout_ms : c->timeout_ms;
    uint64_t deadline = plx_plugin_deadline(ms);
    int rc = aborted ? sim_error(c, PLX_ERR_ABORTED, "sim: rank %d: communicator aborted", c->rank)
                     : run(c, &r->args, deadline, ms);
    char err[sizeof r->err] = "";
    if (rc)
        snprintf(err, sizeof err, "%s", sim_last_error(c)[0] ? sim_last_error(c) : "sim: collective failed");

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
        return sim_error(c, PLX_ERR_SYSTEM, "sim: cannot start the worker of rank %d", c->rank);
    c->has_worker = 1;
    return 0;
}

void sim_worker_stop(struct impl *c)
{
    struct world *w = c->w;
    if (!c->has_worker)
        return;
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
    if (c->model->on && sim_model_native(c, a->coll))
        return sim_native_model(c, a, req);
    if (!c->has_worker) /* the caps offered none */
        return sim_error(c, PLX_ERR_UNSUPPORTED, "sim: rank %d: native collectives are off", c->rank);
    struct sim_req *r = sim_req_new(c);
    if (!r)
        return sim_error(c, PLX_ERR_NOMEM, "sim: out of memory");
    r->is_coll = 1;
    r->owner = c->rank;
    r->args = *a;
    int blocking = a->struct_size >= offsetof(struct plx_coll_args, flags) + sizeof a->flags &&
                   (a->flags & PLX_COLL_FLAG_BLOCKING);
    pthread_mutex_lock(&w->mu);
    if (c->aborted) {
        sim_req_release_locked(c, r);
        pthread_mutex_unlock(&w->mu);
        return sim_error(c, PLX_ERR_ABORTED, "sim: rank %d: communicator aborted", c->rank);
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
