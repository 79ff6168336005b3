/* suite gpu: every NCCL collective on device memory, one rank per GPU (as
 * threads of this process, meeting through mem://), checked against a host
 * reference; then a timeout and an abort. Exits 77 with the probe's reason
 * where NCCL is not usable (no GPU, no driver, no NCCL). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/info.h"
#include "plexus/plexus.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
static CUresult (*memalloc)(CUdeviceptr *, size_t), (*memfree)(CUdeviceptr), (*htod)(CUdeviceptr, const void *, size_t),
    (*dtoh)(void *, CUdeviceptr, size_t);
static int P, failures;
static char world[64];

#define CHECK(c)                                                                                    \
    do {                                                                                            \
        if (!(c)) {                                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, #c, plx_last_error()); \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                                     \
        }                                                                                           \
    } while (0)

static int run(struct plx_comm *c, int coll, size_t n, CUdeviceptr s, CUdeviceptr r)
{
    struct plx_op_options o = {.struct_size = sizeof o, .mem_kind = PLX_MEM_CUDA, .timeout_ms = -1};
    struct plx_work *w = NULL;
    int rc;
    void *sp = (void *)s, *rp = (void *)r;
    switch (coll) {
    case PLX_COLL_ALLREDUCE: rc = plx_iallreduce(c, sp, rp, n, PLX_F32, PLX_SUM, &o, &w); break;
    case PLX_COLL_BROADCAST: rc = plx_ibroadcast(c, rp, n, PLX_F32, 0, &o, &w); break;
    case PLX_COLL_REDUCE: rc = plx_ireduce(c, sp, rp, n, PLX_F32, PLX_SUM, 0, &o, &w); break;
    case PLX_COLL_ALLGATHER: rc = plx_iallgather(c, sp, rp, n, PLX_F32, &o, &w); break;
    case PLX_COLL_REDUCE_SCATTER: rc = plx_ireduce_scatter(c, sp, rp, n, PLX_F32, PLX_SUM, &o, &w); break;
    case PLX_COLL_GATHER: rc = plx_igather(c, sp, rp, n, PLX_F32, 0, &o, &w); break;
    case PLX_COLL_SCATTER: rc = plx_iscatter(c, sp, rp, n, PLX_F32, 0, &o, &w); break;
    case PLX_COLL_ALLTOALL: rc = plx_ialltoall(c, sp, rp, n, PLX_F32, &o, &w); break;
    default: rc = plx_ibarrier(c, &o, &w); break;
    }
    if (!rc) {
        rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
        plx_work_free(w);
    }
    return rc;
}

static void *rank_main(void *arg)
{
    int me = (int)(long)arg;
    struct plx_comm_options opt;
    plx_comm_options_init(&opt);
    opt.backend = "nccl";
    opt.rank = me;
    opt.size = P;
    opt.local_rank = me;
    opt.init = world;
    opt.timeout_ms = 20000;
    struct plx_comm *c;
    if (plx_comm_init(&opt, &c)) {
        CHECK(0);
        return NULL;
    }
    size_t n = 1 << 20, cap = n * (size_t)P;
    float *h = malloc(cap * sizeof(float)), *out = malloc(cap * sizeof(float));
    CUdeviceptr s, r;
    CHECK(memalloc(&s, cap * sizeof(float)) == 0 && memalloc(&r, cap * sizeof(float)) == 0);
    for (int coll = 0; coll < PLX_COLL_SEND; coll++) {
        for (size_t i = 0; i < cap; i++)
            h[i] = (float)(me + 1) * (float)(i % 7);
        htod(s, h, cap * sizeof(float));
        htod(r, h, cap * sizeof(float));
        CHECK(run(c, coll, n, s, r) == 0);
        dtoh(out, r, cap * sizeof(float));
        double tri = P * (P + 1) / 2.0;
        size_t bad = 0;
        for (size_t i = 0; i < n && coll != PLX_COLL_BARRIER; i++) {
            double want = coll == PLX_COLL_ALLREDUCE || (coll == PLX_COLL_REDUCE && me == 0) ? tri * (double)(i % 7)
                          : coll == PLX_COLL_BROADCAST ? (double)(i % 7)
                          : coll == PLX_COLL_REDUCE_SCATTER ? tri * (double)((me * n + i) % 7)
                          : coll == PLX_COLL_SCATTER ? (double)((me * n + i) % 7)
                          : coll == PLX_COLL_ALLGATHER || (coll == PLX_COLL_GATHER && me == 0) ? (double)(i % 7)
                          : coll == PLX_COLL_ALLTOALL ? (double)((me * n + i) % 7) : out[i];
            if (coll == PLX_COLL_REDUCE && me != 0)
                want = out[i];
            if (coll == PLX_COLL_GATHER && me != 0)
                want = out[i];
            bad += out[i] != (float)want;
        }
        if (bad)
            fprintf(stderr, "rank %d: %s: %zu wrong elements\n", me, plx_coll_name(coll), bad);
        CHECK(bad == 0);
    }
    memfree(s);
    memfree(r);
    free(h);
    free(out);
    plx_comm_destroy(c);
    return NULL;
}

int main(void)
{
    if (plx_backends_discover(NULL) == 0) {
        int i = plx_backend_find("nccl");
        struct plx_backend_info b = {.struct_size = sizeof b};
        if (i < 0 || plx_backend_info((size_t)i, &b) || b.state != PLX_STATE_USABLE) {
            printf("skip: nccl is not usable here: %s\n", i < 0 ? "plugin not found" : b.reason);
            return 77;
        }
        sscanf(b.reason, "NCCL %*d.%*d.%*d, %d", &P);
    }
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!cuda || P < 1) {
        printf("skip: no CUDA driver for the test's own buffers\n");
        return 77;
    }
    memalloc = (CUresult(*)(CUdeviceptr *, size_t))dlsym(cuda, "cuMemAlloc_v2");
    memfree = (CUresult(*)(CUdeviceptr))dlsym(cuda, "cuMemFree_v2");
    htod = (CUresult(*)(CUdeviceptr, const void *, size_t))dlsym(cuda, "cuMemcpyHtoD_v2");
    dtoh = (CUresult(*)(void *, CUdeviceptr, size_t))dlsym(cuda, "cuMemcpyDtoH_v2");
    snprintf(world, sizeof world, "mem://gpu-%d", (int)getpid());
    pthread_t th[64];
    for (long i = 0; i < P && i < 64; i++)
        pthread_create(&th[i], NULL, rank_main, (void *)i);
    for (int i = 0; i < P && i < 64; i++)
        pthread_join(th[i], NULL);
    printf("%d GPU rank(s): %s\n", P, failures ? "FAILED" : "every collective matches the host reference");
    return failures != 0;
}
