/* suite gpu: every NCCL collective on device memory, one rank per GPU (as
 * threads of this process, meeting through mem://), checked against a host
 * reference; then a timeout, an abort, and CUDA buffers on the sim backend
 * (refused, then staged through host memory). Exits 77 with the probe's reason
 * where NCCL is not usable (no GPU, no driver, no NCCL). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plexus/info.h"
#include "plexus/plexus.h"
#include "check.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
static CUresult (*memalloc)(CUdeviceptr *, size_t), (*memfree)(CUdeviceptr), (*htod)(CUdeviceptr, const void *, size_t),
    (*dtoh)(void *, CUdeviceptr, size_t), (*stream_create)(void **, unsigned), (*stream_destroy)(void *),
    (*stream_wait_value)(void *, CUdeviceptr, unsigned, unsigned);
static int P, failures;
static char world[64];

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

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct aborter {
    struct plx_comm *c;
    int after_ms;
};

static void *abort_later(void *arg)
{
    struct aborter *a = arg;
    usleep((useconds_t)a->after_ms * 1000u);
    plx_comm_abort(a->c);
    return NULL;
}

/* An allreduce that can never start: its stream first waits for a device
 * flag nobody sets (cuStreamWaitValue32 >= 1). With abort_ms > 0 another
 * thread aborts the communicator then; else the op's 2 s timeout must fire.
 * Either way the wait ends in bounded time with an error, the communicator
 * refuses new work, and the flag is then set so the stream drains. */
static void blocked_case(struct plx_comm *c, int me, int abort_ms, CUdeviceptr s, CUdeviceptr flag)
{
    void *stream = NULL;
    unsigned zero = 0, one = 1;
    CHECK(htod(flag, &zero, sizeof zero) == 0);
    CHECK(stream_create(&stream, 1 /* CU_STREAM_NON_BLOCKING */) == 0);
    CHECK(stream_wait_value(stream, flag, 1, 0 /* CU_STREAM_WAIT_VALUE_GEQ */) == 0);
    struct plx_op_options o = {.struct_size = sizeof o, .mem_kind = PLX_MEM_CUDA, .stream = stream,
                               .timeout_ms = abort_ms ? 60000 : 2000};
    struct aborter ab = {c, abort_ms};
    pthread_t t;
    if (abort_ms)
        pthread_create(&t, NULL, abort_later, &ab);
    double t0 = now_ms();
    struct plx_work *w = NULL;
    int rc = plx_iallreduce(c, (void *)s, (void *)s, 1024, PLX_F32, PLX_SUM, &o, &w);
    if (rc == 0) {
        rc = plx_work_wait(w, 30000);
        plx_work_free(w);
    }
    double ms = now_ms() - t0;
    if (abort_ms)
        pthread_join(t, NULL);
    fprintf(stderr, "rank %d: blocked allreduce (%s) ended after %.0f ms: %s\n", me, abort_ms ? "abort" : "timeout",
            ms, plx_err_name(rc));
    CHECK(rc == (abort_ms ? PLX_ERR_ABORTED : PLX_ERR_TIMEOUT));
    CHECK(ms < (abort_ms ? abort_ms : 2000) + 10000.0);
    CHECK(plx_allreduce(c, (void *)s, (void *)s, 1, PLX_F32, PLX_SUM) != 0); /* refused afterwards */
    CHECK(htod(flag, &one, sizeof one) == 0);
    stream_destroy(stream);
}

static struct plx_comm *open_comm_on(int me, const char *backend, const char *name, const char *const *overrides)
{
    struct plx_comm_options opt;
    plx_comm_options_init(&opt);
    opt.backend = backend;
    opt.overrides = overrides;
    opt.rank = me;
    opt.size = P;
    opt.local_rank = me;
    opt.init = world;
    opt.name = name;
    opt.timeout_ms = 20000;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&opt, &c))
        CHECK(0);
    return c;
}

static struct plx_comm *open_comm(int me, const char *name)
{
    return open_comm_on(me, "nccl", name, NULL);
}

/* CUDA buffers (found by the core through the driver, no mem_kind given) on
 * a host-only backend: refused without [core] cuda_staging, right with it. */
static void staging_case(int me, CUdeviceptr s, CUdeviceptr r)
{
    float h[1000], out[1000];
    for (int i = 0; i < 1000; i++)
        h[i] = (float)(me + 1) * (float)i;
    CHECK(htod(s, h, sizeof h) == 0);
    struct plx_comm *c = open_comm_on(me, "sim", "sim-plain", NULL);
    if (c) {
        CHECK(plx_allreduce(c, (void *)s, (void *)r, 1000, PLX_F32, PLX_SUM) == PLX_ERR_UNSUPPORTED);
        CHECK(strstr(plx_last_error(), "cannot take CUDA memory") != NULL);
        plx_comm_destroy(c);
    }
    const char *ov[] = {"core.cuda_staging=true", NULL};
    if ((c = open_comm_on(me, "sim", "sim-staged", ov))) {
        CHECK(plx_allreduce(c, (void *)s, (void *)r, 1000, PLX_F32, PLX_SUM) == 0);
        CHECK(dtoh(out, r, sizeof out) == 0);
        int bad = 0;
        for (int i = 0; i < 1000; i++)
            bad += out[i] != (float)(P * (P + 1) / 2) * (float)i;
        CHECK(bad == 0);
        plx_comm_destroy(c);
    }
}

static void *rank_main(void *arg)
{
    int me = (int)(long)arg;
    struct plx_comm *c = open_comm(me, "world");
    if (!c)
        return NULL;
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
    plx_comm_destroy(c);

    /* Faults, each on a fresh communicator (a failed one cannot be reused). */
    CUdeviceptr flag;
    CHECK(memalloc(&flag, 64) == 0);
    if ((c = open_comm(me, "timeout"))) {
        blocked_case(c, me, 0, s, flag);
        plx_comm_destroy(c);
    }
    if ((c = open_comm(me, "abort"))) {
        blocked_case(c, me, 500, s, flag);
        plx_comm_destroy(c);
    }
    if ((c = open_comm(me, "after"))) { /* the process still works */
        CHECK(run(c, PLX_COLL_ALLREDUCE, 1024, s, r) == 0);
        plx_comm_destroy(c);
    }
    staging_case(me, s, r);
    memfree(flag);
    memfree(s);
    memfree(r);
    free(h);
    free(out);
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
    stream_create = (CUresult(*)(void **, unsigned))dlsym(cuda, "cuStreamCreate");
    stream_destroy = (CUresult(*)(void *))dlsym(cuda, "cuStreamDestroy_v2");
    stream_wait_value = (CUresult(*)(void *, CUdeviceptr, unsigned, unsigned))dlsym(cuda, "cuStreamWaitValue32_v2");
    if (!memalloc || !memfree || !htod || !dtoh || !stream_create || !stream_destroy || !stream_wait_value) {
        printf("skip: the CUDA driver lacks a function the test needs (cuStreamWaitValue32_v2 needs CUDA 11.7+)\n");
        return 77;
    }
    snprintf(world, sizeof world, "mem://gpu-%d", (int)getpid());
    pthread_t th[64];
    for (long i = 0; i < P && i < 64; i++)
        pthread_create(&th[i], NULL, rank_main, (void *)i);
    for (int i = 0; i < P && i < 64; i++)
        pthread_join(th[i], NULL);
    printf("%d GPU rank(s): %s\n", P,
           failures ? "FAILED" : "every collective matches the host reference; timeout and abort end in bounded time");
    return failures != 0;
}
