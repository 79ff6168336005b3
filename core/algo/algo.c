/* algo.c - dispatch of generic collectives, scratch memory, and the
 * point-to-point helpers every algorithm uses. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "error.h"
#include "internal.h"
#include "reduce.h"

void *plx__scratch_get(struct plx__scratch *s, size_t bytes)
{
    if (bytes <= s->bytes)
        return s->buf;
    /* Grow by doubling and keep it: a fresh buffer faults its pages in on
     * first touch, a kept one does not, on every later call. */
    size_t n = s->bytes ? s->bytes : 4096;
    while (n < bytes)
        n *= 2;
    void *p = realloc(s->buf, n);
    if (!p) {
        plx__err(PLX_ERR_NOMEM, "cannot allocate %zu bytes of scratch", n);
        return NULL;
    }
    s->buf = p;
    s->bytes = n;
    return p;
}

/* Timing only: the largest scratch any communicator asked for, as address
 * space without access. An older, smaller one stays mapped: a rank on
 * another thread may still hold addresses in it. */
static pthread_mutex_t virtual_mu = PTHREAD_MUTEX_INITIALIZER;
static char *virtual_scratch;
static size_t virtual_bytes;

void *plx__algo_scratch(const struct algo_ctx *x, size_t bytes)
{
    if (!plx__algo_timing_only(x))
        return plx__scratch_get(x->scratch, bytes);
    pthread_mutex_lock(&virtual_mu);
    if (bytes > virtual_bytes) {
        size_t n = virtual_bytes ? virtual_bytes : (size_t)1 << 20;
        while (n < bytes)
            n *= 2;
        void *p = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            virtual_scratch = p;
            virtual_bytes = n;
        }
    }
    char *p = bytes <= virtual_bytes ? virtual_scratch : NULL;
    pthread_mutex_unlock(&virtual_mu);
    if (!p)
        plx__err(PLX_ERR_NOMEM, "cannot reserve %zu bytes of address space for timing-only scratch", bytes);
    return p;
}

void plx__scratch_free(struct plx__scratch *s)
{
    free(s->buf);
    s->buf = NULL;
    s->bytes = 0;
}

int plx__send(struct algo_ctx *x, int to, const void *buf, size_t bytes, uint64_t tag)
{
    void *r;
    int rc = plx__isend(x, to, buf, bytes, tag, &r);
    return rc ? rc : x->p->wait(x->p->ctx, r, x->deadline);
}

int plx__recv(struct algo_ctx *x, int from, void *buf, size_t bytes, uint64_t tag)
{
    void *r;
    int rc = plx__irecv(x, from, buf, bytes, tag, &r);
    return rc ? rc : x->p->wait(x->p->ctx, r, x->deadline);
}

int plx__sendrecv(struct algo_ctx *x, int to, const void *sbuf, size_t sbytes, int from, void *rbuf, size_t rbytes,
                  uint64_t tag)
{
    void *rr, *sr;
    int rc = plx__irecv(x, from, rbuf, rbytes, tag, &rr);
    if (rc)
        return rc;
    if ((rc = plx__isend(x, to, sbuf, sbytes, tag, &sr)) != 0) {
        x->p->discard(x->p->ctx, rr);
        return rc;
    }
    rc = x->p->wait(x->p->ctx, rr, x->deadline);
    if (rc) {
        x->p->discard(x->p->ctx, sr);
        return rc;
    }
    return x->p->wait(x->p->ctx, sr, x->deadline);
}

static int finish_avg(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    if (a->op != PLX_AVG || plx__algo_timing_only(x))
        return 0;
    switch (a->coll) {
    case PLX_COLL_ALLREDUCE:
    case PLX_COLL_REDUCE_SCATTER:
        return plx__scale_div(a->recv, a->count, a->dtype, (uint64_t)x->size);
    case PLX_COLL_REDUCE:
        return x->rank == a->root ? plx__scale_div(a->recv, a->count, a->dtype, (uint64_t)x->size) : 0;
    default:
        return 0;
    }
}

/* Bytes from a to a + an and from b to b + bn, once where they overlap (in
 * place); sizes alone where a buffer is not given. */
static size_t span_bytes(const void *a, size_t an, const void *b, size_t bn)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    if (!a || !b || x + an <= y || y + bn <= x)
        return an + bn;
    uintptr_t lo = x < y ? x : y, hi = x + an > y + bn ? x + an : y + bn;
    return (size_t)(hi - lo);
}

static size_t sum_counts(const size_t *counts, int n)
{
    size_t s = 0;
    for (int i = 0; counts && i < n; i++)
        s += counts[i];
    return s;
}

/* The bytes of this rank's buffers that the operation reads or writes. */
static size_t footprint(const struct plx_coll_args *a, size_t es, int rank, int size)
{
    size_t n = a->count * es, P = (size_t)size, in = n, out = n;
    switch (a->coll) {
    case PLX_COLL_BARRIER: return 0;
    case PLX_COLL_BROADCAST: return n;
    case PLX_COLL_ALLGATHER: out = P * n; break;
    case PLX_COLL_REDUCE_SCATTER: in = P * n; break;
    case PLX_COLL_ALLTOALL: in = out = P * n; break;
    case PLX_COLL_GATHER: out = rank == a->root ? P * n : 0; break;
    case PLX_COLL_SCATTER: in = rank == a->root ? P * n : 0; break;
    case PLX_COLL_REDUCE: out = rank == a->root ? n : 0; break;
    case PLX_COLL_ALLTOALLV:
        in = sum_counts(a->send_counts, size) * es;
        out = sum_counts(a->recv_counts, size) * es;
        break;
    case PLX_COLL_ALLGATHERV:
        in = a->recv_counts ? a->recv_counts[rank] * es : 0;
        out = sum_counts(a->recv_counts, size) * es;
        break;
    default: break;
    }
    return span_bytes(a->send, in, a->recv, out);
}

int plx__algo_run(const struct plx__p2p *p, const struct plx__algo_tuning *t, struct plx__scratch *scratch,
                  const struct plx_coll_args *a, uint64_t deadline_ns)
{
    struct algo_ctx x = {
        .p = p, .t = t, .scratch = scratch, .a = a, .deadline = deadline_ns,
        .esize = plx_dtype_size(a->dtype), .rank = p->rank, .size = p->size,
    };
    if (a->coll == PLX_COLL_BARRIER)
        x.esize = 1;
    if (p->op_footprint)
        p->op_footprint(p->ctx, footprint(a, x.esize, x.rank, x.size));
    int rc;
    switch (a->coll) {
    case PLX_COLL_ALLREDUCE: rc = plx__allreduce(&x); break;
    case PLX_COLL_BROADCAST: rc = plx__broadcast(&x); break;
    case PLX_COLL_REDUCE: rc = plx__reduce_tree(&x); break;
    case PLX_COLL_ALLGATHER: rc = plx__allgather(&x); break;
    case PLX_COLL_REDUCE_SCATTER: rc = plx__reduce_scatter(&x); break;
    case PLX_COLL_GATHER: rc = plx__gather(&x); break;
    case PLX_COLL_SCATTER: rc = plx__scatter(&x); break;
    case PLX_COLL_ALLTOALL: rc = plx__alltoall(&x); break;
    case PLX_COLL_BARRIER: rc = plx__barrier(&x); break;
    case PLX_COLL_ALLTOALLV: rc = plx__alltoallv(&x); break;
    case PLX_COLL_ALLGATHERV: rc = plx__allgatherv(&x); break;
    default:
        rc = plx__err(PLX_ERR_INVALID_ARG, "no generic algorithm for collective %d", a->coll);
        break;
    }
    if (p->op_footprint)
        p->op_footprint(p->ctx, 0);
    return rc ? rc : finish_avg(&x);
}
