/* avg_lowp.c - AVG of f16 and bf16 without overflow, the same on every
 * backend.
 *
 * Summing first and dividing after overflows f16 as soon as the sum passes
 * 65504 (four ranks holding 30000), although the mean is representable. So
 * every rank widens its input to f32 and divides it by the group size, the
 * backend (native or the generic algorithms) runs an f32 SUM, and the result
 * is rounded once to the 16-bit type. Pre-dividing keeps bf16 values near
 * its maximum (which is f32's too) finite in the f32 sum; accumulating in
 * f32 keeps the 16-bit rounding to one step, so backends whose sums run in
 * different orders agree (f32 holds the sum of a few 16-bit values exactly
 * or to far below half a 16-bit ulp). The price is twice the bytes on the
 * wire; a caller who wants 16-bit traffic pre-scales and asks for SUM, as
 * PyTorch's fp16_compress_hook does. */
#include <stdlib.h>

#include "comm.h"
#include "error.h"
#include "reduce.h"

struct plx__lowp_avg {
    struct plx_comm *comm; /* takes the copy back when the work ends */
    void *recv;   /* the caller's buffer */
    size_t sn;    /* elements this rank sends */
    size_t rn;    /* elements this rank receives */
    size_t cap;   /* elements buf holds */
    int dtype;
    float buf[];  /* send copy, then receive copy */
};

int plx__lowp_avg_needed(const struct plx_coll_args *a)
{
    return a->op == PLX_AVG && (a->dtype == PLX_F16 || a->dtype == PLX_BF16) && a->mem_kind == PLX_MEM_HOST &&
           (a->coll == PLX_COLL_ALLREDUCE || a->coll == PLX_COLL_REDUCE || a->coll == PLX_COLL_REDUCE_SCATTER);
}

/* The copy c kept from its last call if it is big enough (two calls in
 * flight at once: the second allocates its own), else a new one. */
static struct plx__lowp_avg *take(struct plx_comm *c, size_t n)
{
    struct plx__lowp_avg *x = __atomic_exchange_n(&c->lowp_spare, NULL, __ATOMIC_ACQ_REL);
    if (x && x->cap >= n)
        return x;
    free(x);
    if ((x = malloc(sizeof *x + n * sizeof(float))) != NULL)
        x->cap = n;
    return x;
}

int plx__lowp_avg_begin(struct plx_comm *c, struct plx_coll_args *a, struct plx__lowp_avg **out)
{
    size_t sn, rn;
    int use_send, use_recv;
    plx__coll_extent(c, a, &sn, &rn, &use_send, &use_recv);
    if (!use_recv || !a->recv)
        rn = 0;
    if (sn + rn > (SIZE_MAX - sizeof(struct plx__lowp_avg)) / sizeof(float))
        return plx__err(PLX_ERR_INVALID_ARG, "%s: count %zu overflows the address space", plx_coll_name(a->coll),
                        a->count);
    struct plx__lowp_avg *x = take(c, sn + rn);
    if (!x)
        return plx__err(PLX_ERR_NOMEM, "%s(%s, avg): no memory for the %zu-element f32 copy", plx_coll_name(a->coll),
                        plx_dtype_name(a->dtype), sn + rn);
    x->comm = c;
    x->recv = a->recv;
    x->sn = sn;
    x->rn = rn;
    x->dtype = a->dtype;
    int rc = plx__widen_div(x->buf, a->send, sn, a->dtype, (uint64_t)c->size);
    if (rc) {
        plx__lowp_avg_end(x, rc);
        return rc;
    }
    a->send = x->buf;
    a->recv = rn ? x->buf + sn : NULL;
    a->dtype = PLX_F32;
    a->op = PLX_SUM;
    *out = x;
    return 0;
}

int plx__lowp_avg_end(struct plx__lowp_avg *x, int status)
{
    if (!x)
        return status;
    if (status == 0 && x->rn)
        status = plx__narrow(x->recv, x->buf + x->sn, x->rn, x->dtype);
    /* Calls one after another hand the same copy on, so it is the largest
     * yet; of two in flight, the one that ends last stays. */
    free(__atomic_exchange_n(&x->comm->lowp_spare, x, __ATOMIC_ACQ_REL));
    return status;
}

void plx__lowp_avg_drop(struct plx_comm *c)
{
    free(__atomic_exchange_n(&c->lowp_spare, NULL, __ATOMIC_ACQ_REL));
}
