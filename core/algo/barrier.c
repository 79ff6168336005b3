/* barrier.c - dissemination barrier: ceil(log2 P) rounds of zero-byte
 * messages; no rank leaves before every rank has arrived. */
#include "internal.h"

int plx__barrier(struct algo_ctx *x)
{
    int P = x->size, r = x->rank;
    uint32_t step = 0;
    for (int k = 1; k < P; k <<= 1, step++) {
        int rc = plx__sendrecv(x, mod(r + k, P), NULL, 0, mod(r - k, P), NULL, 0, step_tag(x, step, 0));
        if (rc)
            return rc;
    }
    return 0;
}
