/* ckpt_roundtrip - save an FSDP FULL_SHARD model (+ optimizer state and
 * replicated state) on one world size, load it on another, in an FSDP or a
 * DDP layout, and check that every full tensor is bit-identical to what
 * was saved.
 *
 *   ckpt_roundtrip save|load-fsdp|load-ddp DIR [--ranks N] [--async] [--hybrid L]
 * --hybrid L: HYBRID_SHARD in groups of L ranks (replicas write copies).
 * --ranks N: N sim ranks as threads; otherwise one rank of a plexus-run job
 * (backend from the environment). Exit 0 only if every rank checked out. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_data.h"
#include "plexus/checkpoint.h"
#include "plexus/strategy.h"

static const char *mode, *dir;
static int use_async, hybrid_local;

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "rank %d: %s: %s: %s\n", me, #call, plx_err_name(rc_), plx_last_error()); \
            bad++;                                                                                 \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static int run(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c), bad = 0;
    int is_save = !strcmp(mode, "save"), is_ddp = !strcmp(mode, "load-ddp");
    struct plx_fsdp *f = NULL;
    struct plx_mesh *mesh = NULL;
    struct plx_ckpt_item items[CK_UNITS + 1 + CK_REPL];
    void *full[CK_UNITS] = {0}, *repl[CK_REPL] = {0}, *mom = NULL;
    int n = 0;
    for (int k = 0; k < CK_UNITS; k++)
        full[k] = calloc(ck_unit_counts[k], plx_dtype_size(ck_unit_dtypes[k]));
    for (int r = 0; r < CK_REPL; r++) {
        repl[r] = calloc(ck_repl_counts[r], plx_dtype_size(ck_repl_dtypes[r]));
        if (is_save)
            ck_fill(repl[r], ck_repl_dtypes[r], CK_UNITS + r, 0, ck_repl_counts[r]);
    }
    if (!is_ddp) {
        struct plx_fsdp_options o;
        plx_fsdp_options_init(&o);
        o.strategy = PLX_FSDP_FULL_SHARD;
        if (hybrid_local) { /* shards inside groups of hybrid_local, replicas across */
            TRY(plx_mesh_create(c, hybrid_local, &mesh));
            o.strategy = PLX_FSDP_HYBRID_SHARD;
            o.mesh = mesh;
        }
        TRY(plx_fsdp_create(c, &o, &f));
        for (int k = 0; k < CK_UNITS; k++) /* zeros: a load must bring the values */
            TRY(plx_fsdp_add_unit(f, full[k], ck_unit_counts[k], ck_unit_dtypes[k], NULL));
        TRY(plx_ckpt_fsdp_items(f, CK_UNITS, ck_unit_names, ck_unit_counts, ck_unit_dtypes, ck_unit_ndims,
                                ck_unit_shapes, items));
        if (is_save) /* "trained" values in every shard */
            for (int k = 0; k < CK_UNITS; k++)
                ck_fill(items[k].data, items[k].dtype, k, items[k].offset, items[k].count);
        /* The optimizer state lives sharded like its parameter. */
        items[CK_UNITS] = items[0];
        items[CK_UNITS].name = CK_MOMENTUM;
        items[CK_UNITS].dtype = PLX_F32;
        mom = calloc(items[0].count + 1, sizeof(float));
        items[CK_UNITS].data = mom;
        for (size_t j = 0; is_save && j < items[0].count; j++)
            ((float *)mom)[j] = (float)ck_momentum(items[0].offset + j);
        n = CK_UNITS + 1;
    } else {
        /* DDP: every rank loads whole tensors; momentum too. */
        TRY(plx_ckpt_replicated_items(c, 0, CK_UNITS, ck_unit_names, full, ck_unit_counts, ck_unit_dtypes,
                                      ck_unit_ndims, ck_unit_shapes, items));
        mom = calloc(ck_unit_counts[0], sizeof(float));
        items[CK_UNITS] = items[0];
        items[CK_UNITS].name = CK_MOMENTUM;
        items[CK_UNITS].data = mom;
        n = CK_UNITS + 1;
    }
    TRY(plx_ckpt_replicated_items(c, is_save, CK_REPL, ck_repl_names, repl, ck_repl_counts, ck_repl_dtypes, NULL,
                                  NULL, items + n));
    n += CK_REPL;
    if (is_save) {
        if (use_async) {
            struct plx_ckpt_job *job;
            TRY(plx_ckpt_save_async(c, dir, items, n, NULL, &job));
            /* The snapshot is taken: scribbling on the shards now must not
             * reach the files. */
            memset(items[0].data, 0xff, items[0].count * sizeof(float));
            TRY(plx_ckpt_wait(job, 60000));
        } else {
            TRY(plx_ckpt_save(c, dir, items, n, NULL));
        }
        if (me == 0)
            printf("saved %d tensors on %d ranks into %s\n", n, P, dir);
        goto out;
    }
    TRY(plx_ckpt_load(c, dir, items, n, NULL));
    /* Full tensors, bit for bit. */
    for (int k = 0; k < CK_UNITS; k++) {
        if (f)
            TRY(plx_fsdp_gather(f, k, full[k]));
        if (!ck_equal(full[k], ck_unit_dtypes[k], k, 0, ck_unit_counts[k])) {
            fprintf(stderr, "rank %d: %s differs from what was saved\n", me, ck_unit_names[k]);
            bad++;
        }
    }
    for (size_t j = 0; j < items[CK_UNITS].count; j++)
        if (((float *)mom)[j] != (float)ck_momentum(items[CK_UNITS].offset + j)) {
            fprintf(stderr, "rank %d: %s element %zu differs\n", me, CK_MOMENTUM, items[CK_UNITS].offset + j);
            bad++;
            break;
        }
    for (int r = 0; r < CK_REPL; r++)
        if (!ck_equal(repl[r], ck_repl_dtypes[r], CK_UNITS + r, 0, ck_repl_counts[r])) {
            fprintf(stderr, "rank %d: %s differs from what was saved\n", me, ck_repl_names[r]);
            bad++;
        }
    if (me == 0 && !bad)
        printf("%s on %d ranks: every tensor bit-identical to the saved one\n", mode, P);
out:;
    int total = 0;
    if (plx_allreduce(c, &bad, &total, 1, PLX_I32, PLX_SUM))
        total = bad + 1;
    plx_fsdp_destroy(f);
    plx_mesh_destroy(mesh);
    for (int k = 0; k < CK_UNITS; k++)
        free(full[k]);
    for (int r = 0; r < CK_REPL; r++)
        free(repl[r]);
    free(mom);
    return total != 0;
}

static int nranks;
static char world[64];
struct targ {
    int rank, status;
};

static void *rank_main(void *p)
{
    struct targ *t = p;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.rank = t->rank;
    o.size = nranks;
    o.init = world;
    o.timeout_ms = 30000;
    struct plx_comm *c;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "rank %d: %s\n", t->rank, plx_last_error());
        t->status = 2;
        return NULL;
    }
    t->status = run(c);
    plx_comm_destroy(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ckpt_roundtrip save|load-fsdp|load-ddp DIR [--ranks N] [--async] [--hybrid L]\n");
        return 2;
    }
    mode = argv[1];
    dir = argv[2];
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            nranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--async"))
            use_async = 1;
        else if (!strcmp(argv[i], "--hybrid") && i + 1 < argc)
            hybrid_local = atoi(argv[++i]);
        else
            return 2;
    }
    if (nranks > 0) {
        snprintf(world, sizeof world, "mem://ckpt-%d", (int)getpid());
        pthread_t th[16];
        struct targ a[16];
        if (nranks > 16)
            return 2;
        for (int i = 0; i < nranks; i++) {
            a[i] = (struct targ){i, 0};
            pthread_create(&th[i], NULL, rank_main, &a[i]);
        }
        int st = 0;
        for (int i = 0; i < nranks; i++) {
            pthread_join(th[i], NULL);
            st = a[i].status > st ? a[i].status : st;
        }
        return st;
    }
    struct plx_comm *c;
    if (plx_comm_init(NULL, &c)) {
        fprintf(stderr, "ckpt_roundtrip: %s\n", plx_last_error());
        return 2;
    }
    int st = run(c);
    plx_comm_destroy(c);
    plx_finalize();
    return st;
}
