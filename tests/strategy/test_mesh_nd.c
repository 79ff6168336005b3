/* The N-D device mesh on P sim ranks: coordinates are row-major, each
 * dimension's communicator holds exactly the ranks that differ only there
 * (checked with an allreduce of world ranks against rank_at), a -1 size is
 * inferred, bad shapes are refused with a message, and the 2-D plx_mesh is
 * the ("node", "local") special case.
 * usage: test_mesh_nd P */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/parallel.h"
#include "plexus/strategy.h"
#include "ranks.h"

static int failures, P;

/* Factor P into up to three dimensions (dp, pp, tp), tp and pp of 2 while
 * they divide it. */
static void shape(int *sizes)
{
    int rest = P;
    sizes[2] = rest % 2 == 0 ? 2 : 1;
    rest /= sizes[2];
    sizes[1] = rest % 2 == 0 ? 2 : 1;
    rest /= sizes[1];
    sizes[0] = rest;
}

static int body(struct rank_ctx *ctx, int init_status)
{
    if (init_status)
        return 1;
    const char *names[] = {"dp", "pp", "tp"};
    int sizes[3], me = ctx->rank;
    shape(sizes);
    int given[3] = {-1, sizes[1], sizes[2]};
    struct plx_nd_mesh *m;
    CHECK(plx_nd_mesh_create(ctx->comm, 3, names, given, &m) == 0);
    if (!m)
        return 1;
    CHECK(plx_nd_mesh_ndims(m) == 3);
    CHECK(plx_nd_mesh_dim(m, "pp") == 1 && plx_nd_mesh_dim(m, "ep") == PLX_ERR_NOT_FOUND);
    int coords[3], back[3];
    CHECK(plx_nd_mesh_coords_of(m, me, coords) == 0);
    /* row-major: the last dimension varies fastest */
    CHECK(coords[2] == me % sizes[2] && coords[1] == me / sizes[2] % sizes[1] && coords[0] == me / (sizes[1] * sizes[2]));
    CHECK(plx_nd_mesh_rank_at(m, coords) == me);
    for (int d = 0; d < 3; d++) {
        CHECK(plx_nd_mesh_size(m, d) == sizes[d]);
        CHECK(!strcmp(plx_nd_mesh_name(m, d), names[d]));
        CHECK(plx_nd_mesh_coord(m, d) == coords[d]);
        struct plx_comm *c = plx_nd_mesh_comm(m, d);
        CHECK(c && plx_comm_size(c) == sizes[d] && plx_comm_rank(c) == coords[d]);
        /* The members: the sum of their world ranks, and the max. */
        int want_sum = 0, want_max = 0;
        for (int k = 0; k < sizes[d]; k++) {
            memcpy(back, coords, sizeof back);
            back[d] = k;
            int r = plx_nd_mesh_rank_at(m, back);
            want_sum += r;
            want_max = r > want_max ? r : want_max;
        }
        int got_sum = 0, got_max = 0;
        CHECK(plx_allreduce(c, &me, &got_sum, 1, PLX_I32, PLX_SUM) == 0);
        CHECK(plx_allreduce(c, &me, &got_max, 1, PLX_I32, PLX_MAX) == 0);
        CHECK(got_sum == want_sum && got_max == want_max);
    }
    back[0] = sizes[0];
    back[1] = back[2] = 0;
    CHECK(plx_nd_mesh_rank_at(m, back) == PLX_ERR_INVALID_ARG);
    plx_nd_mesh_destroy(m);

    /* Refusals (before any split, so every rank fails alike). */
    int wrong[3] = {P + 1, 1, 1};
    m = NULL;
    CHECK(plx_nd_mesh_create(ctx->comm, 3, names, wrong, &m) == PLX_ERR_INVALID_ARG && !m);
    CHECK(strstr(plx_last_error(), "multiply to the world size") != NULL);
    if (me == 0)
        printf("refused: %s\n", plx_last_error());
    const char *twice[] = {"dp", "dp"};
    int two[2] = {1, P};
    CHECK(plx_nd_mesh_create(ctx->comm, 2, twice, two, &m) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "twice") != NULL);

    /* The 2-D mesh is the ("node", "local") case: same members, same ranks. */
    int L = P % 2 == 0 ? 2 : 1;
    const char *nl[] = {"node", "local"};
    int nls[2] = {P / L, L};
    struct plx_mesh *m2;
    CHECK(plx_nd_mesh_create(ctx->comm, 2, nl, nls, &m) == 0);
    CHECK(plx_mesh_create(ctx->comm, L, &m2) == 0);
    if (m && m2) {
        struct plx_comm *pairs[2][2] = {{plx_mesh_intra(m2), plx_nd_mesh_comm(m, 1)},
                                        {plx_mesh_inter(m2), plx_nd_mesh_comm(m, 0)}};
        for (int k = 0; k < 2; k++) {
            CHECK(plx_comm_size(pairs[k][0]) == plx_comm_size(pairs[k][1]));
            CHECK(plx_comm_rank(pairs[k][0]) == plx_comm_rank(pairs[k][1]));
            int a = 0, b = 0;
            CHECK(plx_allreduce(pairs[k][0], &me, &a, 1, PLX_I32, PLX_SUM) == 0);
            CHECK(plx_allreduce(pairs[k][1], &me, &b, 1, PLX_I32, PLX_SUM) == 0);
            CHECK(a == b);
        }
        CHECK(plx_mesh_nodes(m2) == plx_nd_mesh_size(m, 0));
    }
    plx_mesh_destroy(m2);
    plx_nd_mesh_destroy(m);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    P = argc > 1 ? atoi(argv[1]) : 8;
    int rc = run_ranks(P, "sim", NULL, 30000, body, NULL);
    if (rc || failures)
        fprintf(stderr, "mesh_nd P=%d: %d checks failed\n", P, failures);
    else
        printf("mesh_nd P=%d: ok\n", P);
    return rc || failures ? 1 : 0;
}
