/* One rank of a plexus-run job on the ucc backend: every collective x dtype
 * x op (every op for the reductions), blocking and nonblocking, in place
 * and out of place, at counts 0, 1, P-1 and 7P+3, every element compared
 * with a serial reference. What the plugin calls native runs in UCC (a
 * combination UCC's CPU path refuses fails the case, so a native answer
 * that UCC cannot serve fails here), what it calls generic the core runs,
 * and what it says cannot be done (f16 reductions: UCC's CPU path has none,
 * and the plugin has no point-to-point for the core's algorithms) is
 * refused with an error, not run wrong; f16 that only moves runs in UCC. The answers are printed per collective.
 * usage: test_ucc */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "matrix.h"
#include "plexus/plexus.h"

static int failures;

/* The answers for one collective: native (UCC), generic (the core), or
 * none; each must be one of these. */
static void print_caps(struct plx_comm *c, int coll)
{
    int count[3] = {0, 0, 0}; /* native, generic, cannot */
    char other[512] = "";
    for (int dt = 0; dt < PLX_DTYPE_COUNT; dt++)
        for (int op = 0; op < (matrix_is_reduction(coll) ? PLX_REDOP_COUNT : 1); op++) {
            int n = plx_comm_native(c, coll, dt, op);
            int k = n == 1 ? 0 : n == 0 ? 1 : 2;
            count[k]++;
            if (k && strlen(other) < sizeof other - 40)
                snprintf(other + strlen(other), sizeof other - strlen(other), " %s%s%s%s", k == 1 ? "generic:" : "",
                         plx_dtype_name(dt), matrix_is_reduction(coll) ? "/" : "",
                         matrix_is_reduction(coll) ? plx_redop_name(op) : "");
        }
    printf("ucc: %-15s native %2d, generic %d, none %2d%s%s\n", plx_coll_name(coll), count[0], count[1], count[2],
           other[0] ? ":" : "", other);
}

/* The matrix runs what the backend says can be done. */
static int cannot(int coll, int dtype, int op, size_t n, void *arg)
{
    (void)n;
    return plx_comm_native(arg, coll, dtype, op) < 0;
}

int main(void)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "ucc"; /* rank, size, store: from plexus-run */
    o.timeout_ms = 60000;
    struct plx_comm *c = NULL;
    int rc = plx_comm_init(&o, &c);
    if (rc) {
        fprintf(stderr, "init: %s: %s\n", plx_err_name(rc), plx_last_error());
        return 1;
    }
    int P = plx_comm_size(c), me = plx_comm_rank(c);
    CHECK(!strcmp(plx_comm_backend(c), "ucc"));
    /* UCC's CPU reductions have no f16: the plugin must not claim it, and
     * the call is refused on every rank alike; moving f16 is UCC's. */
    CHECK(plx_comm_native(c, PLX_COLL_ALLREDUCE, PLX_F16, PLX_SUM) < 0);
    CHECK(plx_comm_native(c, PLX_COLL_ALLGATHER, PLX_F16, PLX_SUM) == 1);
    CHECK(plx_comm_native(c, PLX_COLL_ALLREDUCE, PLX_F32, PLX_SUM) == 1);
    unsigned short h[4] = {0}, hr[4];
    CHECK(plx_allreduce(c, h, hr, 4, PLX_F16, PLX_SUM) != 0);
    if (me == 0)
        for (int coll = 0; coll < PLX_COLL_SEND; coll++)
            print_caps(c, coll);
    size_t counts[] = {0, 1, (size_t)P - 1, 7 * (size_t)P + 3};
    int cases = 0;
    long bad = 0;
    for (int nb = 0; nb < 2 && !failures; nb++) {
        long w = matrix_run(c, nb, counts, sizeof counts / sizeof counts[0], cannot, c, &cases);
        if (w < 0)
            failures++;
        else
            bad += w;
    }
    CHECK(bad == 0);
    printf("rank %d: %d cases, %ld wrong elements\n", me, cases, bad);
    CHECK(plx_comm_destroy(c) == 0);
    CHECK(plx_finalize() == 0);
    if (failures)
        fprintf(stderr, "rank %d: %d failures\n", me, failures);
    else if (me == 0)
        printf("ucc: %d ranks: all checks passed\n", P);
    return failures ? 1 : 0;
}
