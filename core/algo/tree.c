/* tree.c - binomial-tree broadcast (segmented, so inner ranks forward
 * segment k while segment k+1 arrives) and binomial-tree reduce. */
#include <stdlib.h>

#include "error.h"
#include "internal.h"
#include "reduce.h"

/* Lowest set bit of vr, or the power of two above P for the root. */
static int top_mask(int vr, int P)
{
    if (vr == 0) {
        int m = 1;
        while (m < P)
            m <<= 1;
        return m;
    }
    return vr & -vr;
}

int plx__tree_bcast(struct algo_ctx *x, char *buf, int root)
{
    const struct plx__p2p *p = x->p;
    int P = x->size, vr = mod(x->rank - root, P), rc = 0;
    size_t bytes = x->a->count * x->esize;
    if (P == 1 || bytes == 0)
        return 0;
    size_t seg = x->t->segment_bytes ? x->t->segment_bytes : bytes;
    if (bytes / seg >= 4096)
        seg = bytes / 4095 + 1;
    size_t nseg = (bytes + seg - 1) / seg;
    int tm = top_mask(vr, P), nchild = 0, children[32];
    for (int m = tm >> 1; m >= 1; m >>= 1)
        if (vr + m < P)
            children[nchild++] = mod(vr + m + root, P);
    int parent = vr ? mod(vr - tm + root, P) : -1;

    void **rreq = calloc(nseg, sizeof *rreq), **sreq = calloc(nseg * (size_t)(nchild ? nchild : 1), sizeof *sreq);
    size_t nr = 0, rdone = 0, ns = 0, sdone = 0;
    if (!rreq || !sreq) {
        rc = plx__err(PLX_ERR_NOMEM, "broadcast: out of memory");
        goto out;
    }
    if (parent >= 0)
        for (; nr < nseg; nr++) {
            size_t off = nr * seg, len = seg_len(bytes, nr, seg);
            if ((rc = plx__irecv(x, parent, buf + off, len, step_tag(x, 0, (uint32_t)nr), &rreq[nr])) != 0)
                goto out;
        }
    for (size_t k = 0; k < nseg; k++) {
        size_t off = k * seg, len = seg_len(bytes, k, seg);
        if (parent >= 0) {
            rc = p->wait(p->ctx, rreq[rdone++], x->deadline);
            if (rc)
                goto out;
        }
        for (int c = 0; c < nchild; c++) {
            if ((rc = plx__isend(x, children[c], buf + off, len, step_tag(x, 0, (uint32_t)k), &sreq[ns])) != 0)
                goto out; /* no request was made: not counted */
            ns++;
        }
    }
    for (; sdone < ns; sdone++)
        if ((rc = p->wait(p->ctx, sreq[sdone], x->deadline)) != 0) {
            sdone++;
            goto out;
        }
out:
    for (; rreq && rdone < nr; rdone++)
        p->discard(p->ctx, rreq[rdone]);
    for (; sreq && sdone < ns; sdone++)
        p->discard(p->ctx, sreq[sdone]);
    free(rreq);
    free(sreq);
    return rc;
}

int plx__tree_reduce(struct algo_ctx *x, const char *send, char *recv, char *acc_buf, int root)
{
    const struct plx_coll_args *a = x->a;
    int P = x->size, vr = mod(x->rank - root, P), rc;
    size_t bytes = a->count * x->esize;
    if (bytes == 0)
        return 0;
    int is_root = x->rank == root;
    char *scratch = plx__algo_scratch(x, 2 * bytes);
    if (!scratch)
        return PLX_ERR_NOMEM;
    char *tmp = scratch, *acc_dst = is_root ? recv : acc_buf ? acc_buf : scratch + bytes;
    const char *acc = send; /* no copy until a child's data arrives */
    for (int mask = 1; mask < P; mask <<= 1) {
        if (vr & mask)
            return plx__send(x, mod(vr - mask + root, P), acc, bytes, step_tag(x, 0, 0));
        if (vr + mask < P) {
            if ((rc = plx__recv(x, mod(vr + mask + root, P), tmp, bytes, step_tag(x, 0, 0))) != 0)
                return rc;
            if ((rc = plx__algo_reduce3(x, acc_dst, acc, tmp, a->count, a->dtype, a->op)) != 0)
                return rc;
            acc = acc_dst;
        }
    }
    if (acc != recv) /* root without children (P == 1) */
        plx__algo_copy(x, recv, acc, bytes);
    return 0;
}

int plx__broadcast(struct algo_ctx *x)
{
    return plx__tree_bcast(x, x->a->recv, x->a->root);
}

int plx__reduce_tree(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    return plx__tree_reduce(x, a->send, a->recv, NULL, a->root);
}
