/* plexus-bench - collective benchmark in the style of nccl-tests.
 *
 * One process is one rank (started by plexus-run, torchrun or mpirun), or
 * with --ranks N this process runs N ranks as threads (for sim). Timing: a
 * barrier, then -n back-to-back blocking operations; a row's time is the
 * slowest rank's average per operation. algbw = size / time; busbw applies
 * the nccl-tests factor of the collective. --check fills the inputs with
 * rank-dependent values that every dtype holds exactly and verifies every
 * element of every rank's result against a serial reference.
 *
 * alltoallv and allgatherv use a deterministic uneven split of the row's
 * alltoall / allgather blocks of n elements: rank i sends rank j
 * n * ((i + j + 1) % 3) / 2 elements (0, n/2 or n; symmetric, so in place
 * works), and rank j contributes n * ((j + 1) % 3) / 2 to allgatherv. A row's size
 * is the bytes a rank receives on average.
 */
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "bench_output.h"
#include "cli_args.h"

#define TOOL "plexus-bench"
#define MAX_THREAD_RANKS 256 /* --ranks: threads of this process */

struct opts {
    size_t minb, maxb;
    double factor;
    int iters, warmup, dtype, op, check, root, ranks, inplace_only, memcpy_col, registered, prepared;
    int colls[PLX_COLL_COUNT], ncolls;
    const char *backend;
};

static struct opts O = {8, 64u << 20, 2.0, 20, 5, PLX_F32, PLX_SUM, 0, 0, 0, 0, 0, 0, 0, {PLX_COLL_ALLREDUCE}, 1, NULL};
static char world_name[64];

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

#include "check_values.h"

/* ---- one collective ----------------------------------------------------- */

struct bufs {
    char *send, *recv;
    size_t bytes; /* capacity of each */
};

/* Elements per rank (count) and buffer sizes for a row of `bytes`. */
static size_t count_for(int coll, size_t bytes, size_t es, int P)
{
    size_t n = bytes / es;
    if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_GATHER ||
        coll == PLX_COLL_SCATTER || coll == PLX_COLL_ALLTOALL || coll == PLX_COLL_ALLTOALLV ||
        coll == PLX_COLL_ALLGATHERV)
        n /= (size_t)P;
    return n;
}

/* ---- the uneven split of alltoallv / allgatherv -------------------------- */

static size_t vcount(int coll, size_t n, int from, int to)
{
    return coll == PLX_COLL_ALLTOALLV ? n * (size_t)((from + to + 1) % 3) / 2 : n * (size_t)((from + 1) % 3) / 2;
}

/* This rank's counts and packed displacements (send == receive layout),
 * kept per thread for the last (coll, n, P). */
struct vlayout {
    int coll, P, me;
    size_t n, *cnt, *dsp, total;
};
static __thread struct vlayout V = {-1, 0, 0, 0, NULL, NULL, 0};

static const struct vlayout *vlayout(int coll, size_t n, int P, int me)
{
    if (V.coll == coll && V.n == n && V.P == P && V.me == me)
        return &V;
    if (V.P != P) {
        free(V.cnt);
        V.cnt = malloc(2 * (size_t)P * sizeof *V.cnt);
        V.dsp = V.cnt + P;
    }
    V.coll = coll;
    V.n = n;
    V.P = P;
    V.me = me;
    V.total = 0;
    for (int j = 0; j < P; j++) {
        V.cnt[j] = vcount(coll, n, coll == PLX_COLL_ALLTOALLV ? me : j, coll == PLX_COLL_ALLTOALLV ? j : me);
        V.dsp[j] = V.total;
        V.total += V.cnt[j];
    }
    return &V;
}

/* Elements a rank receives on average in a row of n per block. */
static size_t v_row_elems(int coll, size_t n, int P)
{
    size_t sum = 0;
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++)
            sum += coll == PLX_COLL_ALLTOALLV ? vcount(coll, n, i, j) : i == 0 ? vcount(coll, n, j, 0) * P : 0;
    return sum / (size_t)P;
}

/* --prepared: this rank's last (collective, buffers, count), prepared once
 * and run until the row changes. */
static __thread struct prep {
    struct plx_prepared *p;
    struct plx_comm *c;
    int coll;
    const void *s;
    void *r;
    size_t n;
} PR;

static void prepared_drop(void)
{
    plx_prepared_free(PR.p);
    PR.p = NULL;
}

static int run_prepared(struct plx_comm *c, int coll, const void *s, void *r, size_t n)
{
    if (!PR.p || PR.c != c || PR.coll != coll || PR.s != s || PR.r != r || PR.n != n) {
        prepared_drop();
        int rc = plx_coll_prepare(c, coll, s, r, n, O.dtype, O.op, O.root, NULL, &PR.p);
        if (rc)
            return rc;
        PR = (struct prep){PR.p, c, coll, s, r, n};
    }
    return plx_prepared_run(PR.p);
}

static int run_op(struct plx_comm *c, int coll, const void *s, void *r, size_t n)
{
    if (O.prepared && coll != PLX_COLL_ALLTOALLV && coll != PLX_COLL_ALLGATHERV)
        return run_prepared(c, coll, s, r, n);
    switch (coll) {
    case PLX_COLL_ALLREDUCE: return plx_allreduce(c, s, r, n, O.dtype, O.op);
    case PLX_COLL_BROADCAST: return plx_broadcast(c, r, n, O.dtype, O.root);
    case PLX_COLL_REDUCE: return plx_reduce(c, s, r, n, O.dtype, O.op, O.root);
    case PLX_COLL_ALLGATHER: return plx_allgather(c, s, r, n, O.dtype);
    case PLX_COLL_REDUCE_SCATTER: return plx_reduce_scatter(c, s, r, n, O.dtype, O.op);
    case PLX_COLL_GATHER: return plx_gather(c, s, r, n, O.dtype, O.root);
    case PLX_COLL_SCATTER: return plx_scatter(c, s, r, n, O.dtype, O.root);
    case PLX_COLL_ALLTOALL: return plx_alltoall(c, s, r, n, O.dtype);
    case PLX_COLL_ALLTOALLV: {
        const struct vlayout *v = vlayout(coll, n, plx_comm_size(c), plx_comm_rank(c));
        return plx_alltoallv(c, s, v->cnt, v->dsp, r, v->cnt, v->dsp, O.dtype);
    }
    case PLX_COLL_ALLGATHERV: {
        const struct vlayout *v = vlayout(coll, n, plx_comm_size(c), plx_comm_rank(c));
        return plx_allgatherv(c, s, v->cnt[plx_comm_rank(c)], r, v->cnt, v->dsp, O.dtype);
    }
    default: return plx_barrier(c);
    }
}

/* Send and receive pointers; in place as plexus.h defines it per collective. */
static void place(int coll, int inplace, struct bufs *b, size_t n, size_t es, int rank, const void **s, void **r)
{
    *s = b->send;
    *r = b->recv;
    if (!inplace)
        return;
    if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_GATHER)
        *s = b->recv + (size_t)rank * n * es;
    else if (coll == PLX_COLL_ALLGATHERV)
        *s = b->recv + V.dsp[rank] * es; /* run_op's layout: vlayout() ran for this row before */
    else if (coll == PLX_COLL_REDUCE_SCATTER)
        *r = b->send + (size_t)rank * n * es;
    else if (coll == PLX_COLL_SCATTER)
        *r = b->send + (size_t)rank * n * es;
    else
        *s = *r = b->recv;
}

/* check_once for alltoallv / allgatherv: rank i's input element k is
 * val(i, k); block j of the result holds rank j's block for this rank. */
static long check_v(struct plx_comm *c, int coll, int inplace, struct bufs *b, size_t n, int *rc)
{
    int P = plx_comm_size(c), me = plx_comm_rank(c), dt = O.dtype, op = O.op;
    const struct vlayout *v = vlayout(coll, n, P, me);
    size_t es = plx_dtype_size(dt);
    const void *s;
    void *r;
    place(coll, inplace, b, n, es, me, &s, &r);
    memset(b->recv, 0xee, b->bytes);
    size_t in_elems = coll == PLX_COLL_ALLTOALLV ? v->total : v->cnt[me];
    for (size_t i = 0; i < in_elems; i++)
        put((void *)s, i, dt, val(me, i, op, P));
    if ((*rc = run_op(c, coll, s, r, n)) != 0)
        return -1;
    long wrong = 0;
    for (int j = 0; j < P; j++) {
        size_t off = 0; /* where rank j's block for me starts in j's input */
        for (int t = 0; coll == PLX_COLL_ALLTOALLV && t < me; t++)
            off += vcount(coll, n, j, t);
        for (size_t k = 0; k < v->cnt[j]; k++)
            if (get(r, v->dsp[j] + k, dt) != val(j, off + k, op, P))
                wrong++;
    }
    return wrong;
}

/* Fill inputs, run once, count wrong elements on this rank. */
static long check_once(struct plx_comm *c, int coll, int inplace, struct bufs *b, size_t n, int *rc)
{
    int P = plx_comm_size(c), me = plx_comm_rank(c), dt = O.dtype, op = O.op;
    size_t es = plx_dtype_size(dt), total = n * (size_t)P;
    const void *s;
    void *r;
    if (coll == PLX_COLL_ALLTOALLV || coll == PLX_COLL_ALLGATHERV)
        return check_v(c, coll, inplace, b, n, rc);
    place(coll, inplace, b, n, es, me, &s, &r);
    /* Inputs live where the send pointer points (which may be inside recv). */
    size_t in_elems = (coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_SCATTER || coll == PLX_COLL_ALLTOALL) ? total : n;
    memset(b->recv, 0xee, b->bytes);
    for (size_t i = 0; i < in_elems; i++)
        put((void *)s, i, dt, val(me, i, op, P));
    if (coll == PLX_COLL_BROADCAST)
        for (size_t i = 0; i < n; i++)
            put(r, i, dt, me == O.root ? val(O.root, i, op, P) : 0);
    *rc = run_op(c, coll, s, r, n);
    if (*rc)
        return -1;
    long wrong = 0;
    size_t out_elems = 0;
    switch (coll) {
    case PLX_COLL_ALLREDUCE: case PLX_COLL_BROADCAST: out_elems = n; break;
    case PLX_COLL_REDUCE: out_elems = me == O.root ? n : 0; break;
    case PLX_COLL_ALLGATHER: case PLX_COLL_ALLTOALL: out_elems = total; break;
    case PLX_COLL_GATHER: out_elems = me == O.root ? total : 0; break;
    case PLX_COLL_REDUCE_SCATTER: case PLX_COLL_SCATTER: out_elems = n; break;
    default: break;
    }
    for (size_t i = 0; i < out_elems; i++) {
        double want;
        switch (coll) {
        case PLX_COLL_ALLREDUCE: case PLX_COLL_REDUCE: want = reduce_ref(i, op, dt, P); break;
        case PLX_COLL_BROADCAST: want = val(O.root, i, op, P); break;
        case PLX_COLL_ALLGATHER: case PLX_COLL_GATHER: want = val((int)(i / n), i % n, op, P); break;
        case PLX_COLL_REDUCE_SCATTER: want = reduce_ref((size_t)me * n + i, op, dt, P); break;
        case PLX_COLL_SCATTER: want = val(O.root, (size_t)me * n + i, op, P); break;
        default: want = val((int)(i / n), (size_t)me * n + i % n, op, P); break; /* alltoall */
        }
        if (get(r, i, dt) != want)
            wrong++;
    }
    return wrong;
}

static double busbw_factor(int coll, int P)
{
    switch (coll) {
    case PLX_COLL_ALLREDUCE: return 2.0 * (P - 1) / P;
    case PLX_COLL_BROADCAST: case PLX_COLL_REDUCE: return 1.0;
    default: return (double)(P - 1) / P;
    }
}

/* The physical reference: page-aligned buffers, so glibc's memcpy runs
 * its fast case (from malloc, two buffers may sit 16 bytes apart modulo 32,
 * where rep movsb crawls on some x86 cores: see plx_plugin_copy). */
static double memcpy_gbs(size_t bytes)
{
    void *pa = NULL, *pb = NULL;
    if (posix_memalign(&pa, 4096, bytes ? bytes : 1) || posix_memalign(&pb, 4096, bytes ? bytes : 1)) {
        free(pa);
        return 0;
    }
    char *a = pa, *b = pb;
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    int reps = (int)(256u * 1024 * 1024 / (bytes + 1)) + 3;
    if (reps > 10000)
        reps = 10000;
    double t0 = now_us();
    for (int i = 0; i < reps; i++) {
        memcpy(b, a, bytes);
        __asm__ volatile("" ::"r"(b) : "memory");
    }
    double t = (now_us() - t0) / reps;
    free(a);
    free(b);
    return t > 0 ? (double)bytes / t / 1e3 : 0;
}

/* Time one (coll, size, placement); returns 0 or an error. */
static int measure(struct plx_comm *c, int coll, int inplace, struct bufs *b, size_t n, double *us, long *wrong)
{
    size_t es = plx_dtype_size(O.dtype);
    const void *s;
    void *r;
    vlayout(coll, n, plx_comm_size(c), plx_comm_rank(c)); /* place() reads it for allgatherv */
    place(coll, inplace, b, n, es, plx_comm_rank(c), &s, &r);
    int rc = 0;
    for (int i = 0; i < O.warmup && !rc; i++)
        rc = run_op(c, coll, s, r, n);
    if (!rc)
        rc = plx_barrier(c);
    double t0 = now_us();
    for (int i = 0; i < O.iters && !rc; i++)
        rc = run_op(c, coll, s, r, n);
    double t = (now_us() - t0) / O.iters;
    if (!rc)
        rc = plx_allreduce(c, &t, us, 1, PLX_F64, PLX_MAX);
    *wrong = 0;
    if (!rc && O.check) {
        long w = check_once(c, coll, inplace, b, n, &rc);
        if (!rc)
            rc = plx_allreduce(c, &w, wrong, 1, PLX_I64, PLX_SUM);
    }
    return rc;
}

/* The hosts of the job (ranks' host names, gathered) and the run's context
 * for the result file; rank 0 opens it. Collective: every rank calls it. */
static int output_begin(struct plx_comm *c, int P, int me)
{
    char name[64] = {0};
    char *all = calloc((size_t)P, sizeof name);
    if (!all)
        return 1;
    gethostname(name, sizeof name - 1);
    int rc = plx_allgather(c, name, all, sizeof name, PLX_U8);
    if (rc) {
        fprintf(stderr, "plexus-bench: rank %d: gathering host names failed: %s\n", me, plx_last_error());
        free(all);
        return 1;
    }
    int hosts = 0;
    for (int i = 0; i < P; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strncmp(all + (size_t)i * sizeof name, all + (size_t)j * sizeof name, sizeof name);
        hosts += !seen;
    }
    free(all);
    if (me == 0) {
        struct bench_context ctx = {.backend = plx_comm_backend(c), .dtype = plx_dtype_name(O.dtype),
                                    .op = plx_redop_name(O.op), .ranks = P, .hosts = hosts, .iters = O.iters,
                                    .warmup = O.warmup, .checked = O.check};
        bench_output_begin(&ctx);
    }
    return 0;
}

static void free_buf(struct plx_comm *c, void *p)
{
    if (O.registered)
        plx_mem_free(c, p);
    else
        free(p);
}

/* Send and receive buffers of b->bytes each, from plx_mem_alloc with
 * --registered (memory every rank of the host maps), else from malloc. */
static int alloc_bufs(struct plx_comm *c, struct bufs *b)
{
    if (O.registered) {
        void *sp = NULL, *rp = NULL;
        int rc = plx_mem_alloc(c, b->bytes, &sp);
        if (rc || (rc = plx_mem_alloc(c, b->bytes, &rp)) != 0) {
            fprintf(stderr, "plexus-bench: plx_mem_alloc: %s: %s\n", plx_err_name(rc), plx_last_error());
            return 1;
        }
        b->send = sp;
        b->recv = rp;
    } else {
        b->send = malloc(b->bytes);
        b->recv = malloc(b->bytes);
    }
    if (!b->send || !b->recv) {
        fprintf(stderr, "plexus-bench: out of memory\n");
        return 1;
    }
    memset(b->send, 1, b->bytes);
    memset(b->recv, 1, b->bytes);
    return 0;
}

static void print_header(struct plx_comm *c, int P)
{
    printf("# plexus-bench: backend %s, %d ranks, dtype %s, op %s, %d iterations (+%d warm-up)%s%s\n",
           plx_comm_backend(c), P, plx_dtype_name(O.dtype), plx_redop_name(O.op), O.iters, O.warmup,
           O.check ? ", checked" : "", O.prepared ? ", prepared" : "");
    printf("#\n# %10s %12s %6s %6s %5s", "size", "count", "type", "redop", "root");
    if (!O.inplace_only)
        printf(" %10s %8s %8s %7s", "time", "algbw", "busbw", "#wrong");
    printf(" %10s %8s %8s %7s%s\n", "time", "algbw", "busbw", "#wrong", O.memcpy_col ? "   memcpy" : "");
    printf("# %10s %12s %6s %6s %5s", "(B)", "(elements)", "", "", "");
    if (!O.inplace_only)
        printf(" %10s %8s %8s %7s", "(us)", "(GB/s)", "(GB/s)", "");
    printf(" %10s %8s %8s %7s%s\n", "(us)", "(GB/s)", "(GB/s)", "", O.memcpy_col ? "   (GB/s)" : "");
    fflush(stdout); /* seen at once through a pipe (| head), before a long first row */
}

/* One row of the table, and its records in the result file (rank 0):
 * times t and wrong-element counts w per column (out of place, in place). */
static void report_row(int coll, int P, size_t row_bytes, size_t n, const double t[2], const long w[2])
{
    double f = busbw_factor(coll, P);
    const char *redop = (coll == PLX_COLL_ALLREDUCE || coll == PLX_COLL_REDUCE || coll == PLX_COLL_REDUCE_SCATTER)
                            ? plx_redop_name(O.op) : "none";
    int root = (coll == PLX_COLL_BROADCAST || coll == PLX_COLL_REDUCE || coll == PLX_COLL_GATHER ||
                coll == PLX_COLL_SCATTER) ? O.root : -1;
    printf("  %10zu %12zu %6s %6s %5d", row_bytes, n, plx_dtype_name(O.dtype), redop, root);
    for (int ip = O.inplace_only; ip < 2; ip++) {
        double algbw = t[ip] > 0 ? (double)row_bytes / t[ip] / 1e3 : 0;
        printf(" %10.2f %8.3f %8.3f", t[ip], algbw, algbw * f);
        if (O.check)
            printf(" %7ld", w[ip]);
        else
            printf(" %7s", "N/A");
    }
    double mc = O.memcpy_col ? memcpy_gbs(row_bytes) : -1;
    if (O.memcpy_col)
        printf(" %8.2f", mc);
    printf("\n");
    fflush(stdout);
    for (int ip = O.inplace_only; ip < 2; ip++) {
        double algbw = t[ip] > 0 ? (double)row_bytes / t[ip] / 1e3 : 0;
        struct bench_record r = {.coll = plx_coll_name(coll), .redop = redop, .root = root, .inplace = ip,
                                 .bytes = row_bytes, .count = n, .time_us = t[ip], .algbw_gbs = algbw,
                                 .busbw_gbs = algbw * f, .memcpy_gbs = mc, .wrong = O.check ? w[ip] : -1};
        bench_output_record(&r);
    }
}

/* The next row's size: times the step factor, at least one byte more. */
static size_t next_size(size_t bytes)
{
    size_t grown = (size_t)((double)bytes * O.factor);
    return grown > bytes ? grown : bytes + 1;
}

/* Every row of one collective, adding its wrong elements to *wrong.
 * Returns 0, or 1 when an operation failed (said on stderr). */
static int bench_coll(struct plx_comm *c, int coll, struct bufs *b, long *wrong)
{
    int P = plx_comm_size(c), me = plx_comm_rank(c);
    size_t es = plx_dtype_size(O.dtype);
    if (me == 0 && O.ncolls > 1)
        printf("# %s\n", plx_coll_name(coll)), fflush(stdout);
    for (size_t bytes = O.minb; bytes <= O.maxb; bytes = next_size(bytes)) {
        size_t n = coll == PLX_COLL_BARRIER ? 0 : count_for(coll, bytes, es, P);
        int per_rank = coll == PLX_COLL_ALLREDUCE || coll == PLX_COLL_BROADCAST || coll == PLX_COLL_REDUCE;
        size_t row_bytes = n * es * (per_rank ? 1 : (size_t)P);
        if (coll == PLX_COLL_ALLTOALLV || coll == PLX_COLL_ALLGATHERV)
            row_bytes = v_row_elems(coll, n, P) * es;
        double t[2] = {0, 0};
        long w[2] = {0, 0};
        for (int ip = O.inplace_only; ip < 2; ip++) {
            int rc = measure(c, coll, ip, b, n, &t[ip], &w[ip]);
            if (rc) {
                fprintf(stderr, "plexus-bench: rank %d: %s of %zu bytes failed: %s: %s\n", me, plx_coll_name(coll),
                        row_bytes, plx_err_name(rc), plx_last_error());
                return 1;
            }
            *wrong += w[ip];
        }
        if (me == 0)
            report_row(coll, P, row_bytes, n, t, w);
        if (coll == PLX_COLL_BARRIER)
            break;
    }
    return 0;
}

static int bench(struct plx_comm *c)
{
    int P = plx_comm_size(c), me = plx_comm_rank(c), failed = 0;
    struct bufs b;
    b.bytes = O.maxb + (size_t)P * plx_dtype_size(O.dtype); /* room for rounding up to whole elements per rank */
    if (alloc_bufs(c, &b) != 0)
        return 1;
    if (bench_output_enabled() && output_begin(c, P, me) != 0) {
        prepared_drop();
        free_buf(c, b.send);
        free_buf(c, b.recv);
        return 1;
    }
    if (me == 0)
        print_header(c, P);
    long total_wrong = 0;
    for (int k = 0; k < O.ncolls && !failed; k++)
        failed = bench_coll(c, O.colls[k], &b, &total_wrong);
    if (failed) {
        prepared_drop();
        free_buf(c, b.send);
        free_buf(c, b.recv);
        return 1;
    }
    if (me == 0 && O.check)
        printf("# total wrong elements: %ld\n", total_wrong);
    failed = total_wrong != 0;
    if (me == 0 && bench_output_close() != 0)
        failed = 1;
    prepared_drop();
    free_buf(c, b.send);
    free_buf(c, b.recv);
    free(V.cnt); /* this thread's v-collective layout */
    V = (struct vlayout){.coll = -1};
    return failed;
}

struct thread_arg {
    int rank;
    int status;
};

static void *rank_main(void *p)
{
    struct thread_arg *t = p;
    struct plx_comm_options opt;
    plx_comm_options_init(&opt);
    opt.backend = O.backend ? O.backend : "sim";
    opt.rank = t->rank;
    opt.size = O.ranks;
    opt.init = world_name;
    struct plx_comm *c;
    int rc = plx_comm_init(&opt, &c);
    if (rc) {
        fprintf(stderr, "plexus-bench: rank %d: %s: %s\n", t->rank, plx_err_name(rc), plx_last_error());
        t->status = 2;
        return NULL;
    }
    t->status = bench(c);
    plx_comm_destroy(c);
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: plexus-bench [options]\n"
            "  -b, --minbytes SIZE   smallest size (default 8; K, M, G suffixes)\n"
            "  -e, --maxbytes SIZE   largest size (default 64M)\n"
            "  -f, --stepfactor F    size multiplier per row (default 2)\n"
            "  -n, --iters N         timed operations per row (default 20)\n"
            "  -w, --warmup N        untimed operations first (default 5)\n"
            "  -d, --datatype T      i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64 (default f32)\n"
            "  -o, --op OP           sum prod min max avg, or band bor bxor (integer types only;\n"
            "                        default sum)\n"
            "  -r, --root R          root of broadcast/reduce/gather/scatter (default 0)\n"
            "  -c, --check [0|1]     verify every element of every result (exit 1 if any is wrong)\n"
            "      --coll NAME       allreduce broadcast reduce allgather reduce_scatter gather\n"
            "                        scatter alltoall barrier alltoallv allgatherv, a comma-separated\n"
            "                        list, or all (all but the v-collectives; default allreduce)\n"
            "      --inplace         in-place columns only (default: out-of-place and in-place)\n"
            "      --backend NAME    backend (default: the configured one; sim with --ranks)\n"
            "      --ranks N         run N ranks as threads of this process (mem:// store)\n"
            "      --memcpy          add a column with single-thread memcpy GB/s for the size\n"
            "      --registered      buffers from plx_mem_alloc (memory the host's ranks share)\n"
            "      --prepared        each row's collective prepared once (plx_coll_prepare) and run\n"
            "                        from there (the v-collectives run as plain calls)\n"
            "      --output csv|json FILE  also write every row (with backend, ranks, hosts, host name, CPU)\n"
            "                        to FILE, one record per collective, size and in/out of place\n"
            "  -h, --help\n"
            "Without --ranks, each process is one rank of a job started by plexus-run, torchrun or mpirun.\n");
}

/* --coll's comma-separated list into O.colls ("all": every collective
 * below the v-collectives). Returns 0, or 2 for a name it does not know. */
static int parse_colls(char *list)
{
    O.ncolls = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int k = 0; k < PLX_COLL_COUNT; k++) {
            if (k == PLX_COLL_SEND || k == PLX_COLL_RECV || O.ncolls == PLX_COLL_COUNT)
                continue;
            if ((!strcmp(name, "all") && k < PLX_COLL_SEND) || !strcmp(name, plx_coll_name(k))) {
                O.colls[O.ncolls++] = k;
                found = 1;
            }
        }
        if (!found) {
            fprintf(stderr, "plexus-bench: unknown collective '%s'\n", name);
            return 2;
        }
    }
    return 0;
}

/* A numeric option's value into O: 0, 2 when refused (it said why), -1
 * when ch is no such option. */
static int number_option(int ch, const char *arg)
{
    switch (ch) {
    case 'b': return cli_size(TOOL, "-b/--minbytes", arg, &O.minb) ? 2 : 0;
    case 'e': return cli_size(TOOL, "-e/--maxbytes", arg, &O.maxb) ? 2 : 0;
    case 'f': return cli_double_above(TOOL, "-f/--stepfactor", arg, 1.0, &O.factor) ? 2 : 0;
    case 'n': return cli_int(TOOL, "-n/--iters", arg, 1, INT_MAX, &O.iters) ? 2 : 0;
    case 'w': return cli_int(TOOL, "-w/--warmup", arg, 0, INT_MAX, &O.warmup) ? 2 : 0;
    case 'r': return cli_int(TOOL, "-r/--root", arg, 0, INT_MAX, &O.root) ? 2 : 0;
    case 'R': return cli_int(TOOL, "--ranks", arg, 1, MAX_THREAD_RANKS, &O.ranks) ? 2 : 0;
    default: return -1;
    }
}

/* The command line into O. Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv)
{
    static const struct option longs[] = {
        {"minbytes", 1, 0, 'b'}, {"maxbytes", 1, 0, 'e'}, {"stepfactor", 1, 0, 'f'}, {"iters", 1, 0, 'n'},
        {"warmup", 1, 0, 'w'},   {"datatype", 1, 0, 'd'}, {"op", 1, 0, 'o'},         {"root", 1, 0, 'r'},
        {"check", 2, 0, 'c'},    {"coll", 1, 0, 'C'},     {"inplace", 0, 0, 'I'},    {"backend", 1, 0, 'B'},
        {"ranks", 1, 0, 'R'},    {"memcpy", 0, 0, 'M'},   {"help", 0, 0, 'h'},       {"output", 1, 0, 'U'},
        {"registered", 0, 0, 'G'}, {"prepared", 0, 0, 'P'}, {0, 0, 0, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "b:e:f:n:w:d:o:r:c::h", longs, NULL)) != -1) {
        int number = number_option(ch, optarg);
        if (number >= 0) {
            if (number)
                return number;
            continue;
        }
        switch (ch) {
        case 'd':
            if ((O.dtype = plx_dtype_from_name(optarg)) < 0) {
                fprintf(stderr, "plexus-bench: unknown datatype '%s'\n", optarg);
                return 2;
            }
            break;
        case 'o':
            if ((O.op = plx_redop_from_name(optarg)) < 0) {
                fprintf(stderr, "plexus-bench: unknown op '%s'\n", optarg);
                return 2;
            }
            break;
        case 'c':
            if (!optarg && optind < argc && (!strcmp(argv[optind], "0") || !strcmp(argv[optind], "1")))
                optarg = argv[optind++];
            O.check = 1;
            if (optarg && cli_int(TOOL, "-c/--check", optarg, 0, 1, &O.check))
                return 2;
            break;
        case 'C':
            if (parse_colls(optarg) != 0)
                return 2;
            break;
        case 'I': O.inplace_only = 1; break;
        case 'B': O.backend = optarg; break;
        case 'M': O.memcpy_col = 1; break;
        case 'G': O.registered = 1; break;
        case 'P': O.prepared = 1; break;
        case 'U':
            if (optind >= argc) {
                fprintf(stderr, "plexus-bench: --output %s needs a file name after it\n", optarg);
                return 2;
            }
            if (bench_output_open(optarg, argv[optind++]) != 0)
                return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "plexus-bench: unexpected argument '%s' (--check takes 0 or 1; options come with a dash)\n",
                argv[optind]);
        return 2;
    }
    if (O.iters < 1 || O.factor <= 1.0 || O.minb > O.maxb) {
        fprintf(stderr, "plexus-bench: need -n >= 1, -f > 1 and -b <= -e\n");
        return 2;
    }
    return -1;
}

/* --ranks: O.ranks ranks as threads of this process, on a mem:// store;
 * the exit status is the worst rank's. */
static int run_threads(void)
{
    snprintf(world_name, sizeof world_name, "mem://plexus-bench-%d", (int)getpid());
    pthread_t th[MAX_THREAD_RANKS];
    struct thread_arg args[MAX_THREAD_RANKS];
    for (int i = 0; i < O.ranks; i++) {
        args[i] = (struct thread_arg){i, 0};
        pthread_create(&th[i], NULL, rank_main, &args[i]);
    }
    int status = 0;
    for (int i = 0; i < O.ranks; i++) {
        pthread_join(th[i], NULL);
        if (args[i].status > status)
            status = args[i].status;
    }
    return status;
}

int main(int argc, char **argv)
{
    int status = parse_args(argc, argv);
    if (status >= 0)
        return status;
    if (O.ranks > 0)
        return run_threads();
    struct plx_comm_options opt;
    plx_comm_options_init(&opt);
    opt.backend = O.backend;
    struct plx_comm *c;
    int rc = plx_comm_init(&opt, &c);
    if (rc) {
        fprintf(stderr, "plexus-bench: %s: %s\n", plx_err_name(rc), plx_last_error());
        return 2;
    }
    status = bench(c);
    plx_comm_destroy(c);
    plx_finalize(); /* e.g. MPI_Finalize when plexus initialised MPI */
    return status;
}
