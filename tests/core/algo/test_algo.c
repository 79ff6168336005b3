/* test_algo.c - the core's generic collectives (core/algo) over an in-test
 * point-to-point transport: P ranks are threads of this process, messages
 * are matched per (src, dst, tag) in FIFO order under one mutex.
 *
 * The transport is strict on purpose, so that it finds what a real one
 * would only hit sometimes:
 *  - rendezvous mode (default): a send completes only once the receiver has
 *    posted the matching receive (like Gloo's notify protocol), so an
 *    algorithm that waits for a send before posting the receive its peer
 *    needs deadlocks here (and fails by timeout instead of hanging);
 *    eager mode: sends complete at once, so messages of the next step or the
 *    next collective arrive early and must be kept apart by their tags;
 *  - a send and its receive must agree on the size, tags must be in the
 *    core's tag space (bit 63), nobody sends to itself;
 *  - every request must be waited for or discarded exactly once, also on
 *    error paths (a live count must drop back to 0), and no message may be
 *    left unmatched when a collective ends.
 * Buffers have guard bytes around them and send buffers are checked
 * unchanged afterwards; receive buffers start as garbage.
 *
 * Matrix: every collective x dtypes x ops x P in {1,2,3,4,5,8} x counts
 * {0, 1, P-1, a non-multiple of P, ~1 Mi elements} x in place / out of place
 * x every allreduce algorithm, with tiny pipeline segments (many segments
 * per step) and with the default ones. Faults: a rank that never arrives
 * (the others must return PLX_ERR_TIMEOUT by the deadline), and a send that
 * fails mid-collective (everyone returns an error, nothing leaks).
 *
 * Float tolerance. The algorithms add the P contributions in different
 * orders (ring: rotated per block; recursive doubling: pairwise; tree:
 * binomial), so float sums are not bitwise equal to a serial sum. For any
 * order, recursive summation of P terms satisfies
 *     |fl(sum) - sum| <= (P-1) u sum_q |x_q|        (Higham, ASNA 2nd ed. 4.2)
 * to first order, with u the unit roundoff (2^-24 for f32, 2^-53 for f64);
 * a product of P factors is within (P-1) u |prod|; avg adds one rounding,
 * u |avg|. We allow 1.01x those bounds (for the second-order terms) plus the
 * smallest normal. The reference is computed in long double. min and max
 * are exact. f16/bf16 inputs are small integers (|x| <= 8; products of +-1,
 * +-2) whose partial sums and products are exactly representable, so every
 * order gives the same result and those compare bitwise; their avg is
 * round(f32(sum) / P), computed the same way here. Integer sum/prod wrap
 * (arithmetic mod 2^n is order-free), so integers compare exactly.
 * All ranks of one allreduce must hold bitwise identical results. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/algo.h"
#include "error.h"
#include "plexus/backend.h"
#include "plexus/plexus.h"
#include "reduce.h"

enum { MAXP = 8, GUARD = 64 /* bytes */ };

static int failures;
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    pthread_mutex_lock(&fail_mu);
    if (failures++ < 40) {
        va_list ap;
        va_start(ap, fmt);
        fputs("FAIL: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    pthread_mutex_unlock(&fail_mu);
}

static uint64_t now_ns(void)
{ /* the plx clock: CLOCK_MONOTONIC */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ===== the in-test transport ============================================== */

struct req {
    struct req *next, *prev; /* in its channel while unmatched */
    int is_send, src, dst;
    uint64_t tag;
    void *buf; /* receive: user buffer; eager send message: its own copy */
    size_t bytes;
    int queued, done, status;
    int is_msg; /* eager message (no waiter; freed when matched) */
};

struct world {
    int P, eager;
    pthread_mutex_t mu;
    pthread_cond_t cv[MAXP]; /* per rank: only the owners of a match wake */
    struct req *head[MAXP * MAXP], *tail[MAXP * MAXP]; /* channel src*P+dst */
    long live;          /* requests handed out and not yet released */
    int fail_rank;      /* this rank's isend number fail_after fails */
    long fail_after, nsend[MAXP];
    int violations;
};

struct endpoint {
    struct world *w;
    int rank;
};

static void world_init(struct world *w, int P, int eager)
{
    memset(w, 0, sizeof *w);
    w->P = P;
    w->eager = eager;
    w->fail_rank = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    for (int r = 0; r < MAXP; r++)
        pthread_cond_init(&w->cv[r], &ca);
    pthread_condattr_destroy(&ca);
}

/* Unmatched entries left in the channels (and frees eager messages). */
static int world_drain(struct world *w)
{
    int left = 0;
    for (int c = 0; c < w->P * w->P; c++) {
        while (w->head[c]) {
            struct req *r = w->head[c];
            w->head[c] = r->next;
            left++;
            if (r->is_msg) {
                free(r->buf);
                free(r);
            } else {
                r->queued = 0; /* owned by a waiter that already failed: no */
            }
        }
        w->tail[c] = NULL;
    }
    return left;
}

static void world_destroy(struct world *w)
{
    world_drain(w);
    pthread_mutex_destroy(&w->mu);
    for (int r = 0; r < MAXP; r++)
        pthread_cond_destroy(&w->cv[r]);
}

static void unlink_req(struct world *w, struct req *r)
{
    int c = r->src * w->P + r->dst;
    if (r->prev) r->prev->next = r->next; else w->head[c] = r->next;
    if (r->next) r->next->prev = r->prev; else w->tail[c] = r->prev;
    r->next = r->prev = NULL;
    r->queued = 0;
}

static void violation(struct world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(struct world *w, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    w->violations++;
    fail("transport: %s", msg);
}

/* Match r against the oldest opposite entry of its channel with the same
 * tag, else queue it. Called with the lock held. */
static void post(struct world *w, struct req *r)
{
    int c = r->src * w->P + r->dst;
    for (struct req *o = w->head[c]; o; o = o->next) {
        if (o->is_send == r->is_send || o->tag != r->tag)
            continue;
        struct req *s = r->is_send ? r : o, *d = r->is_send ? o : r;
        unlink_req(w, o);
        int st = 0;
        if (s->bytes != d->bytes) {
            violation(w, "%d->%d tag %#" PRIx64 ": send of %zu bytes met a receive of %zu", s->src, s->dst, s->tag,
                      s->bytes, d->bytes);
            st = PLX_ERR_INTERNAL;
        } else if (s->bytes) {
            memcpy(d->buf, s->buf, s->bytes);
        }
        d->done = s->done = 1;
        d->status = s->status = st;
        pthread_cond_signal(&w->cv[s->src]);
        pthread_cond_signal(&w->cv[d->dst]);
        if (s->is_msg) {
            free(s->buf);
            free(s);
        }
        return;
    }
    r->queued = 1;
    r->prev = w->tail[c];
    r->next = NULL;
    if (w->tail[c]) w->tail[c]->next = r; else w->head[c] = r;
    w->tail[c] = r;
}

static int t_post(void *ctx, int is_send, int peer, void *buf, size_t bytes, uint64_t tag, void **out)
{
    struct endpoint *e = ctx;
    struct world *w = e->w;
    *out = NULL;
    pthread_mutex_lock(&w->mu);
    if (peer < 0 || peer >= w->P || peer == e->rank)
        violation(w, "rank %d: %s with peer %d", e->rank, is_send ? "send" : "recv", peer);
    if (!(tag & PLX_TAG_CORE_BIT))
        violation(w, "rank %d: tag %#" PRIx64 " outside the core's tag space", e->rank, tag);
    if (bytes && !buf)
        violation(w, "rank %d: NULL buffer for %zu bytes", e->rank, bytes);
    if (is_send && e->rank == w->fail_rank && ++w->nsend[e->rank] >= w->fail_after) {
        pthread_mutex_unlock(&w->mu);
        return plx__err(PLX_ERR_PEER_LOST, "injected failure: rank %d's send to rank %d", e->rank, peer);
    }
    struct req *r = calloc(1, sizeof *r);
    r->is_send = is_send;
    r->src = is_send ? e->rank : peer;
    r->dst = is_send ? peer : e->rank;
    r->tag = tag;
    r->buf = buf;
    r->bytes = bytes;
    if (is_send && w->eager) { /* copy out, complete now, queue the copy */
        struct req *m = calloc(1, sizeof *m);
        *m = *r;
        m->is_msg = 1;
        m->buf = bytes ? malloc(bytes) : NULL;
        if (bytes)
            memcpy(m->buf, buf, bytes);
        r->done = 1;
        post(w, m);
    } else {
        post(w, r);
    }
    w->live++;
    pthread_mutex_unlock(&w->mu);
    *out = r;
    return 0;
}

static int t_isend(void *ctx, int peer, const void *buf, size_t bytes, uint64_t tag, void **req)
{
    return t_post(ctx, 1, peer, (void *)buf, bytes, tag, req);
}

static int t_irecv(void *ctx, int peer, void *buf, size_t bytes, uint64_t tag, void **req)
{
    return t_post(ctx, 0, peer, buf, bytes, tag, req);
}

static void release(struct world *w, struct req *r)
{
    if (r->queued)
        unlink_req(w, r);
    w->live--;
    free(r);
}

static int t_wait(void *ctx, void *req, uint64_t deadline_ns)
{
    struct endpoint *e = ctx;
    struct world *w = e->w;
    struct req *r = req;
    pthread_mutex_lock(&w->mu);
    while (!r->done) {
        if (deadline_ns && now_ns() >= deadline_ns) {
            int peer = r->is_send ? r->dst : r->src;
            int send = r->is_send;
            uint64_t tag = r->tag;
            release(w, r);
            pthread_mutex_unlock(&w->mu);
            return plx__err(PLX_ERR_TIMEOUT, "rank %d waited for rank %d (%s, tag %#" PRIx64 "): timeout", e->rank,
                            peer, send ? "send" : "recv", tag);
        }
        if (deadline_ns) {
            struct timespec ts = {(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
            pthread_cond_timedwait(&w->cv[e->rank], &w->mu, &ts);
        } else {
            pthread_cond_wait(&w->cv[e->rank], &w->mu);
        }
    }
    int st = r->status;
    release(w, r);
    pthread_mutex_unlock(&w->mu);
    return st ? plx__err(st, "rank %d: transfer failed", e->rank) : 0;
}

static void t_discard(void *ctx, void *req)
{
    struct endpoint *e = ctx;
    pthread_mutex_lock(&e->w->mu);
    release(e->w, req);
    pthread_mutex_unlock(&e->w->mu);
}

/* ===== values and references ============================================== */

static uint64_t mix(uint64_t x)
{ /* splitmix64 */
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

static uint64_t case_seed;

/* Input element i of rank r (see the tolerance note at the top). */
static void gen(void *dst, int dt, int op, int r, size_t i)
{
    uint64_t h = mix(case_seed ^ ((uint64_t)r << 48) ^ i);
    double unit = (double)(h >> 11) / 9007199254740992.0; /* [0, 1) */
    double real = op == PLX_PROD ? (0.5 + 1.5 * unit) * ((h & 1) ? -1 : 1) : unit * 2 - 1;
    double small = op == PLX_PROD ? (double)(((h >> 1) & 1) + 1) * ((h & 1) ? -1 : 1) : (double)((int)(h % 17) - 8);
    switch (dt) {
    case PLX_I8: case PLX_U8: *(uint8_t *)dst = (uint8_t)h; break;
    case PLX_I32: case PLX_U32: *(uint32_t *)dst = (uint32_t)h; break;
    case PLX_I64: case PLX_U64: *(uint64_t *)dst = h; break;
    case PLX_F16: *(uint16_t *)dst = plx__f32_to_f16((float)small); break;
    case PLX_BF16: *(uint16_t *)dst = plx__f32_to_bf16((float)small); break;
    case PLX_F32: *(float *)dst = (float)real; break;
    default: *(double *)dst = real; break;
    }
}

static void gen_fill(char *buf, size_t n, int dt, int op, int r, size_t first)
{
    size_t es = plx_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        gen(buf + i * es, dt, op, r, first + i);
}

/* 1 if buf[0..n) holds rank r's inputs first..first+n. */
static int gen_equal(const char *buf, size_t n, int dt, int op, int r, size_t first)
{
    size_t es = plx_dtype_size(dt);
    char v[8];
    for (size_t i = 0; i < n; i++) {
        gen(v, dt, op, r, first + i);
        if (memcmp(buf + i * es, v, es))
            return 0;
    }
    return 1;
}

static long double as_ld(const void *p, int dt)
{
    switch (dt) {
    case PLX_F16: return plx__f16_to_f32(*(const uint16_t *)p);
    case PLX_BF16: return plx__bf16_to_f32(*(const uint16_t *)p);
    case PLX_F32: return *(const float *)p;
    default: return *(const double *)p;
    }
}

static int is_signed(int dt)
{
    return dt == PLX_I8 || dt == PLX_I32 || dt == PLX_I64;
}

static int64_t as_i64(const void *p, int dt)
{
    switch (dt) {
    case PLX_I8: return *(const int8_t *)p;
    case PLX_U8: return *(const uint8_t *)p;
    case PLX_I32: return *(const int32_t *)p;
    case PLX_U32: return *(const uint32_t *)p;
    default: return *(const int64_t *)p; /* u64 compared through uint64_t below */
    }
}

/* Check got = op over ranks 0..P-1 of element idx; 0 on mismatch. */
static int check_reduced(const void *got, int dt, int op, int P, size_t idx)
{
    char v[8];
    if (dt == PLX_F32 || dt == PLX_F64 || dt == PLX_F16 || dt == PLX_BF16) {
        long double acc = 0, abs_sum = 0, g = as_ld(got, dt);
        for (int q = 0; q < P; q++) {
            gen(v, dt, op, q, idx);
            long double x = as_ld(v, dt);
            if (q == 0)
                acc = x;
            else if (op == PLX_SUM || op == PLX_AVG)
                acc += x;
            else if (op == PLX_PROD)
                acc *= x;
            else if (op == PLX_MIN)
                acc = x < acc ? x : acc;
            else
                acc = x > acc ? x : acc;
            abs_sum += fabsl(x);
        }
        if (dt == PLX_F16 || dt == PLX_BF16) { /* exact: see the top */
            float want = (float)acc;
            if (op == PLX_AVG)
                want = want / (float)P;
            uint16_t w = dt == PLX_F16 ? plx__f32_to_f16(want) : plx__f32_to_bf16(want);
            return memcmp(got, &w, 2) == 0;
        }
        if (op == PLX_MIN || op == PLX_MAX)
            return g == acc;
        long double u = dt == PLX_F32 ? FLT_EPSILON / 2 : DBL_EPSILON / 2, tol;
        if (op == PLX_SUM)
            tol = (P - 1) * u * abs_sum;
        else if (op == PLX_PROD)
            tol = (P - 1) * u * fabsl(acc);
        else
            tol = (P - 1) * u * abs_sum / P + u * fabsl(acc / P);
        if (op == PLX_AVG)
            acc /= P;
        tol = tol * 1.01L + (dt == PLX_F32 ? FLT_MIN : DBL_MIN);
        return fabsl(g - acc) <= tol;
    }
    /* integers: wrap in 64 bits, truncate to the type */
    uint64_t s = 0, p = 1, band = ~0ull, bor = 0, bxor = 0;
    int64_t mn = 0, mx = 0;
    uint64_t umn = 0, umx = 0;
    for (int q = 0; q < P; q++) {
        gen(v, dt, op, q, idx);
        int64_t x = as_i64(v, dt);
        uint64_t ux = dt == PLX_U64 ? *(uint64_t *)v : (uint64_t)x;
        s += ux;
        p *= ux;
        band &= ux;
        bor |= ux;
        bxor ^= ux;
        if (q == 0 || x < mn) mn = x;
        if (q == 0 || x > mx) mx = x;
        if (q == 0 || ux < umn) umn = ux;
        if (q == 0 || ux > umx) umx = ux;
    }
    uint64_t want;
    int sg = is_signed(dt);
    switch (op) {
    case PLX_SUM: want = s; break;
    case PLX_PROD: want = p; break;
    case PLX_MIN: want = sg ? (uint64_t)mn : umn; break;
    case PLX_MAX: want = sg ? (uint64_t)mx : umx; break;
    case PLX_BAND: want = band; break;
    case PLX_BOR: want = bor; break;
    case PLX_BXOR: want = bxor; break;
    default: /* avg: the wrapped sum in the type, divided, truncating */
        switch (dt) {
        case PLX_I8: want = (uint64_t)(int64_t)((int8_t)s / P); break;
        case PLX_U8: want = (uint8_t)s / (unsigned)P; break;
        case PLX_I32: want = (uint64_t)(int64_t)((int32_t)s / P); break;
        case PLX_U32: want = (uint32_t)s / (unsigned)P; break;
        case PLX_I64: want = (uint64_t)((int64_t)s / P); break;
        default: want = s / (uint64_t)P; break;
        }
    }
    size_t es = plx_dtype_size(dt);
    uint64_t g = 0;
    memcpy(&g, got, es); /* little-endian: the low es bytes */
    uint64_t mask = es == 8 ? ~UINT64_C(0) : (UINT64_C(1) << (8 * es)) - 1;
    return (g & mask) == (want & mask);
}

/* ===== running one collective on P threads ================================ */

struct rank_job {
    const struct plx__p2p *p;
    const struct plx__algo_tuning *t;
    struct plx__scratch *scratch;
    struct plx_coll_args a;
    uint64_t deadline;
    int rc;
    uint64_t elapsed_ns;
    char err[512];
    int skip;         /* this rank never arrives */
    int repeat;       /* back-to-back test: number of collectives */
};

static void *rank_main(void *arg)
{
    struct rank_job *j = arg;
    uint64_t t0 = now_ns();
    j->rc = plx__algo_run(j->p, j->t, j->scratch, &j->a, j->deadline);
    j->elapsed_ns = now_ns() - t0;
    if (j->rc)
        snprintf(j->err, sizeof j->err, "%s", plx_last_error());
    return NULL;
}

static struct plx__scratch scratch[MAXP]; /* kept across cases, like a communicator's */

struct casedef {
    int P, coll, dt, op, root, inplace, eager;
    size_t n;
    struct plx__algo_tuning t;
};

static const char *coll_name(int c)
{
    static const char *n[] = {"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter",
                              "gather", "scatter", "alltoall", "barrier"};
    return c >= 0 && c < 9 ? n[c] : "?";
}

static void describe(char *s, size_t len, const struct casedef *c)
{
    snprintf(s, len, "%s P=%d dtype=%d op=%d n=%zu root=%d %s %s algo=%d seg=%zu", coll_name(c->coll), c->P, c->dt,
             c->op, c->n, c->root, c->inplace ? "in-place" : "out-of-place", c->eager ? "eager" : "rendezvous",
             c->t.allreduce_algo, c->t.segment_bytes);
}

/* Elements of the send and receive sides of coll for n per block. */
static void sizes(int coll, size_t n, int P, size_t *s, size_t *r)
{
    *s = *r = n;
    if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_GATHER || coll == PLX_COLL_ALLTOALL)
        *r = n * (size_t)P;
    if (coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_SCATTER || coll == PLX_COLL_ALLTOALL)
        *s = n * (size_t)P;
    if (coll == PLX_COLL_BARRIER)
        *s = *r = 0;
}

struct guarded {
    char *base; /* GUARD bytes, data, GUARD bytes */
    size_t bytes;
};

static char *galloc(struct guarded *g, size_t bytes)
{
    g->bytes = bytes;
    g->base = malloc(bytes + 2 * GUARD);
    memset(g->base, 0xcd, GUARD);
    memset(g->base + GUARD, 0xee, bytes); /* garbage where results go */
    memset(g->base + GUARD + bytes, 0xcd, GUARD);
    return g->base + GUARD;
}

static int gcheck(const struct guarded *g)
{
    if (!g->base)
        return 1;
    for (size_t i = 0; i < GUARD; i++)
        if ((unsigned char)g->base[i] != 0xcd || (unsigned char)g->base[GUARD + g->bytes + i] != 0xcd)
            return 0;
    return 1;
}

static uint64_t seq_counter = 1;

/* What each rank's op_footprint heard in the case: its calls, the first and the last bytes. */
static int fp_calls[MAXP];
static size_t fp_first[MAXP], fp_last[MAXP];

static void t_footprint(void *ctx, size_t bytes)
{
    const struct endpoint *e = ctx;
    if (fp_calls[e->rank]++ == 0)
        fp_first[e->rank] = bytes;
    fp_last[e->rank] = bytes;
}

/* The footprint an allreduce or allgather must report (others: not checked, SIZE_MAX). */
static size_t footprint_want(const struct casedef *c, size_t es)
{
    size_t n = c->n * es, P = (size_t)c->P;
    switch (c->coll) {
    case PLX_COLL_ALLREDUCE: return c->inplace ? n : 2 * n;
    case PLX_COLL_ALLGATHER: return c->inplace ? P * n : n + P * n;
    case PLX_COLL_BARRIER: return 0;
    default: return SIZE_MAX;
    }
}

/* Runs one case; returns the number of new failures. */
static int run_case(const struct casedef *c)
{
    int P = c->P, before = failures;
    size_t es = plx_dtype_size(c->dt), n = c->n, se, re;
    sizes(c->coll, n, P, &se, &re);
    size_t be = se > re ? se : re;
    char what[256];
    describe(what, sizeof what, c);
    case_seed = mix(seq_counter * 7919);

    struct world w;
    world_init(&w, P, c->eager);
    struct endpoint ep[MAXP];
    struct plx__p2p p2p[MAXP];
    struct rank_job job[MAXP];
    struct guarded sg[MAXP], rg[MAXP];
    memset(sg, 0, sizeof sg);
    memset(rg, 0, sizeof rg);
    uint64_t seq = seq_counter++;
    int coll = c->coll, root = c->root;
    for (int r = 0; r < P; r++) {
        ep[r] = (struct endpoint){&w, r};
        p2p[r] = (struct plx__p2p){&ep[r], r, P, t_isend, t_irecv, t_wait, t_discard, 0, NULL, t_footprint};
        fp_calls[r] = 0;
        struct plx_coll_args *a = &job[r].a;
        memset(&job[r], 0, sizeof job[r]);
        job[r].p = &p2p[r];
        job[r].t = &c->t;
        job[r].scratch = &scratch[r];
        job[r].deadline = now_ns() + 20ull * 1000000000u;
        *a = (struct plx_coll_args){.struct_size = sizeof *a, .coll = coll, .count = n, .dtype = c->dt,
                                    .op = c->op, .root = root, .mem_kind = PLX_MEM_HOST, .seq = seq};
        char *send = NULL, *recv = NULL;
        int is_root = r == root;
        if (c->inplace || coll == PLX_COLL_BROADCAST) {
            char *b = galloc(&rg[r], be * es);
            switch (coll) {
            case PLX_COLL_ALLGATHER: send = b + (size_t)r * n * es; recv = b; break;
            case PLX_COLL_REDUCE_SCATTER: send = b; recv = b + (size_t)r * n * es; break;
            case PLX_COLL_GATHER: send = is_root ? b + (size_t)r * n * es : b; recv = is_root ? b : NULL; break;
            case PLX_COLL_SCATTER: send = is_root ? b : NULL; recv = is_root ? b + (size_t)r * n * es : b; break;
            case PLX_COLL_BARRIER: break;
            default: send = recv = b; break;
            }
            if (coll == PLX_COLL_BROADCAST && !is_root)
                send = NULL; /* garbage in buf */
        } else {
            if (!(coll == PLX_COLL_SCATTER && !is_root))
                send = galloc(&sg[r], se * es);
            if (!((coll == PLX_COLL_REDUCE || coll == PLX_COLL_GATHER) && !is_root))
                recv = galloc(&rg[r], re * es);
        }
        if (send)
            gen_fill(send, se, c->dt, c->op, r, 0);
        a->send = coll == PLX_COLL_BROADCAST ? recv : send;
        a->recv = recv;
    }
    pthread_t th[MAXP];
    for (int r = 0; r < P; r++)
        pthread_create(&th[r], NULL, rank_main, &job[r]);
    for (int r = 0; r < P; r++)
        pthread_join(th[r], NULL);

    for (int r = 0; r < P; r++)
        if (job[r].rc)
            fail("%s: rank %d returned %d: %s", what, r, job[r].rc, job[r].err);
    pthread_mutex_lock(&w.mu);
    int left = world_drain(&w);
    pthread_mutex_unlock(&w.mu);
    if (left || w.live)
        fail("%s: %d unmatched message(s), %ld request(s) never released", what, left, w.live);
    /* The operation tells its buffers' bytes as it begins, and 0 as it ends. */
    for (int r = 0; r < P; r++) {
        size_t want = footprint_want(c, es);
        if (fp_calls[r] != 2 || fp_last[r] != 0 || (want != SIZE_MAX && fp_first[r] != want))
            fail("%s: rank %d's op_footprint heard %d call(s), first %zu B (want %zu), last %zu B (want 0)", what, r,
                 fp_calls[r], fp_first[r], want == SIZE_MAX ? fp_first[r] : want, fp_last[r]);
    }
    if (failures > before)
        goto out;

    /* results */
    for (int r = 0; r < P && failures == before; r++) {
        const struct plx_coll_args *a = &job[r].a;
        const char *g = a->recv;
        int bad = -1;
        size_t i = 0;
        switch (coll) {
        case PLX_COLL_ALLREDUCE:
            if (r == 0) {
                for (i = 0; i < n && bad < 0; i++)
                    if (!check_reduced(g + i * es, c->dt, c->op, P, i))
                        bad = (int)i;
            } else if (n && memcmp(g, job[0].a.recv, n * es)) {
                fail("%s: rank %d's result differs from rank 0's", what, r);
            }
            break;
        case PLX_COLL_REDUCE:
            if (r == root)
                for (i = 0; i < n && bad < 0; i++)
                    if (!check_reduced(g + i * es, c->dt, c->op, P, i))
                        bad = (int)i;
            break;
        case PLX_COLL_REDUCE_SCATTER:
            for (i = 0; i < n && bad < 0; i++)
                if (!check_reduced(g + i * es, c->dt, c->op, P, (size_t)r * n + i))
                    bad = (int)i;
            break;
        case PLX_COLL_BROADCAST:
            if (!gen_equal(g, n, c->dt, c->op, root, 0))
                bad = 0;
            break;
        case PLX_COLL_ALLGATHER:
        case PLX_COLL_GATHER:
            if (coll == PLX_COLL_GATHER && r != root)
                break;
            for (int q = 0; q < P; q++)
                if (!gen_equal(g + (size_t)q * n * es, n, c->dt, c->op, q, 0))
                    bad = q;
            break;
        case PLX_COLL_SCATTER:
            if (!gen_equal(g, n, c->dt, c->op, root, (size_t)r * n))
                bad = 0;
            break;
        case PLX_COLL_ALLTOALL:
            for (int q = 0; q < P; q++)
                if (!gen_equal(g + (size_t)q * n * es, n, c->dt, c->op, q, (size_t)r * n))
                    bad = q;
            break;
        default:
            break;
        }
        if (bad >= 0)
            fail("%s: rank %d: wrong result at element/block %d", what, r, bad);
        /* buffers the collective must not write */
        if (!gcheck(&rg[r]) || !gcheck(&sg[r]))
            fail("%s: rank %d: guard bytes around a buffer were overwritten", what, r);
        if (sg[r].base && !gen_equal(a->send, se, c->dt, c->op, r, 0))
            fail("%s: rank %d: the send buffer was written", what, r);
        int in_unchanged = c->inplace && r != root &&
                           (coll == PLX_COLL_REDUCE || coll == PLX_COLL_GATHER); /* recv unused there */
        if (c->inplace && coll == PLX_COLL_SCATTER && r == root)
            in_unchanged = 1; /* root's send, its own block included */
        if (in_unchanged && !gen_equal(a->send, se, c->dt, c->op, r, 0))
            fail("%s: rank %d: a buffer only read was written", what, r);
    }
out:
    for (int r = 0; r < P; r++) {
        free(sg[r].base);
        free(rg[r].base);
    }
    world_destroy(&w);
    if (failures > before)
        fprintf(stderr, "  in case: %s\n", what);
    return failures - before;
}

/* ===== the matrix ========================================================= */

static const int Ps[] = {1, 2, 3, 4, 5, 8};
static long ncases;

static int is_red(int coll)
{
    return coll == PLX_COLL_ALLREDUCE || coll == PLX_COLL_REDUCE || coll == PLX_COLL_REDUCE_SCATTER;
}

/* One (P, coll, dtype, op, n) cell over in/out of place, roots and, for
 * allreduce, every algorithm. */
static void run_cell(struct casedef c, const int *algos, int nalgos)
{
    int roots[2] = {0, c.P - 1}, nroots = c.coll == PLX_COLL_BROADCAST || c.coll == PLX_COLL_REDUCE ||
                                                   c.coll == PLX_COLL_GATHER || c.coll == PLX_COLL_SCATTER
                                               ? (c.P > 1 ? 2 : 1)
                                               : 1;
    if (c.coll != PLX_COLL_ALLREDUCE)
        nalgos = 1;
    for (int ip = 0; ip < 2; ip++) {
        if (ip && (c.coll == PLX_COLL_BROADCAST || c.coll == PLX_COLL_BARRIER))
            continue; /* in place only */
        for (int ri = 0; ri < nroots; ri++)
            for (int ai = 0; ai < nalgos; ai++) {
                c.inplace = ip;
                c.root = roots[ri];
                c.t.allreduce_algo = algos[ai];
                ncases++;
                if (run_case(&c) && failures > 40)
                    exit(1);
            }
    }
}

static void small_matrix(int eager, size_t seg_bytes, size_t small_bytes, int all_dtypes)
{
    static const int all_algos[] = {PLX__AR_RING, PLX__AR_RECDBL, PLX__AR_TREE, PLX__AR_RABENSEIFNER, PLX__AR_AUTO};
    /* data movers do not look at values: one dtype per element size */
    static const int mover_dts[] = {PLX_I8, PLX_F16, PLX_F32, PLX_F64};
    for (size_t pi = 0; pi < sizeof Ps / sizeof Ps[0]; pi++) {
        int P = Ps[pi];
        size_t counts[] = {0, 1, (size_t)(P - 1), (size_t)(7 * P + 3), 300};
        for (int coll = 0; coll <= PLX_COLL_BARRIER; coll++) {
            for (int di = 0; di < PLX_DTYPE_COUNT; di++) {
                int dt = is_red(coll) ? di : mover_dts[di % 4];
                if (!is_red(coll) && di >= 4)
                    break;
                if (!all_dtypes && dt != PLX_F32 && dt != PLX_I32 && dt != PLX_BF16)
                    continue;
                for (int op = 0; op < (is_red(coll) ? PLX_REDOP_COUNT : 1); op++) {
                    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
                        if (coll == PLX_COLL_BARRIER && (ci || di))
                            continue;
                        /* bitwise: integers only (floats refused: test_reduce); the
                         * algorithms treat every op alike and test_reduce checks each
                         * integer kernel, so one narrow and one wide dtype here */
                        if (op >= PLX_BAND && dt != PLX_U8 && dt != PLX_I64)
                            continue;
                        if (ci == 2 && P == 2)
                            continue; /* P-1 == 1: done */
                        struct casedef c = {.P = P, .coll = coll, .dt = dt, .op = op, .n = counts[ci],
                                            .eager = eager};
                        c.t.segment_bytes = seg_bytes;
                        c.t.small_bytes = small_bytes;
                        run_cell(c, all_algos, 5);
                    }
                }
            }
        }
    }
}

/* >= 1 Mi elements: allreduce/broadcast/reduce move n; the block
 * collectives n per rank with n*P >= 1 Mi. */
static void big_matrix(void)
{
    static const int algos[] = {PLX__AR_RING, PLX__AR_RECDBL, PLX__AR_TREE, PLX__AR_RABENSEIFNER};
    for (size_t pi = 0; pi < sizeof Ps / sizeof Ps[0]; pi++) {
        int P = Ps[pi];
        for (int coll = 0; coll < PLX_COLL_BARRIER; coll++) {
            size_t n = coll <= PLX_COLL_REDUCE ? (1u << 20) + 5 : (1u << 20) / (size_t)P + 3;
            struct casedef c = {.P = P, .coll = coll, .dt = PLX_F32, .op = PLX_SUM, .n = n};
            c.t.segment_bytes = 64 << 10; /* many pipeline segments */
            c.t.small_bytes = 64 << 10;
            run_cell(c, algos, 4); /* auto picks ring or rabenseifner here: covered */
            if (coll == PLX_COLL_ALLREDUCE) {
                /* 1-byte segments: the 4096-segments-per-step cap must kick in */
                c.t.segment_bytes = 1;
                c.dt = PLX_BF16;
                run_cell(c, algos, 1);
                run_cell(c, algos + 3, 1); /* rabenseifner's halves */
                c.t.segment_bytes = 1 << 20;
                c.dt = PLX_I64;
                c.op = PLX_MAX;
                c.eager = 1;
                run_cell(c, algos, 1);
            }
        }
    }
}

/* ===== back to back: one world, many collectives, no sync between ======== */

struct b2b_arg {
    const struct plx__p2p *p;
    const struct plx__algo_tuning *t;
    int rank, P, iters, rc;
    char err[512];
};

static void *b2b_main(void *arg)
{
    struct b2b_arg *b = arg;
    enum { N = 37 };
    int32_t in[N], out[N];
    for (int k = 0; k < b->iters && !b->rc; k++) {
        for (int i = 0; i < N; i++)
            in[i] = (k + 1) * (b->rank + 1) + i;
        int coll = k % 3 == 2 ? PLX_COLL_BARRIER : PLX_COLL_ALLREDUCE;
        struct plx_coll_args a = {.struct_size = sizeof a, .coll = coll, .send = in, .recv = out, .count = N,
                                  .dtype = PLX_I32, .op = PLX_SUM, .seq = (uint64_t)k + 1};
        struct plx__algo_tuning t = *b->t;
        t.allreduce_algo = 1 + k % 3;
        b->rc = plx__algo_run(b->p, &t, &scratch[b->rank], &a, now_ns() + 30ull * 1000000000u);
        if (b->rc) {
            snprintf(b->err, sizeof b->err, "%s", plx_last_error());
            break;
        }
        if (coll == PLX_COLL_ALLREDUCE)
            for (int i = 0; i < N; i++)
                if (out[i] != (k + 1) * b->P * (b->P + 1) / 2 + b->P * i) {
                    b->rc = -1;
                    snprintf(b->err, sizeof b->err, "iteration %d: element %d is %d", k, i, out[i]);
                    break;
                }
    }
    return NULL;
}

static void back_to_back(int P, int eager)
{
    struct world w;
    world_init(&w, P, eager);
    struct plx__algo_tuning t = {.segment_bytes = 8, .small_bytes = 64};
    struct endpoint ep[MAXP];
    struct plx__p2p p2p[MAXP];
    struct b2b_arg b[MAXP];
    pthread_t th[MAXP];
    for (int r = 0; r < P; r++) {
        ep[r] = (struct endpoint){&w, r};
        p2p[r] = (struct plx__p2p){&ep[r], r, P, t_isend, t_irecv, t_wait, t_discard, 0, NULL, NULL};
        b[r] = (struct b2b_arg){.p = &p2p[r], .t = &t, .rank = r, .P = P, .iters = 60};
        pthread_create(&th[r], NULL, b2b_main, &b[r]);
    }
    for (int r = 0; r < P; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < P; r++)
        if (b[r].rc)
            fail("back-to-back P=%d %s: rank %d: %d %s", P, eager ? "eager" : "rendezvous", r, b[r].rc, b[r].err);
    if (w.live || world_drain(&w))
        fail("back-to-back P=%d: requests or messages left over", P);
    world_destroy(&w);
}

/* ===== faults ============================================================= */

/* Rank `absent` never arrives (or rank fail_rank's fail_after-th send
 * fails). Every participant must return by the deadline (plus slack for a
 * loaded machine), with 0 or the expected error; those that need the
 * missing rank's data must fail; nothing may leak. */
static void fault_case(int P, int coll, int algo, int absent, int fail_rank, long fail_after)
{
    const uint64_t budget = 300ull * 1000000; /* 300 ms */
    struct world w;
    world_init(&w, P, 0);
    w.fail_rank = fail_rank;
    w.fail_after = fail_after;
    struct plx__algo_tuning t = {.allreduce_algo = algo, .segment_bytes = 64, .small_bytes = 64};
    struct endpoint ep[MAXP];
    struct plx__p2p p2p[MAXP];
    struct rank_job job[MAXP];
    pthread_t th[MAXP];
    size_t n = 1000;
    float *bufs[MAXP];
    uint64_t seq = seq_counter++, t0 = now_ns(), deadline = t0 + budget;
    for (int r = 0; r < P; r++) {
        bufs[r] = calloc(n * (size_t)P, sizeof(float));
        ep[r] = (struct endpoint){&w, r};
        p2p[r] = (struct plx__p2p){&ep[r], r, P, t_isend, t_irecv, t_wait, t_discard, 0, NULL, NULL};
        memset(&job[r], 0, sizeof job[r]);
        job[r] = (struct rank_job){.p = &p2p[r], .t = &t, .scratch = &scratch[r], .deadline = deadline,
                                   .skip = r == absent};
        job[r].a = (struct plx_coll_args){.struct_size = sizeof job[r].a, .coll = coll, .send = bufs[r],
                                          .recv = bufs[r], .count = n, .dtype = PLX_F32, .op = PLX_SUM,
                                          .root = 0, .seq = seq};
        if (!job[r].skip)
            pthread_create(&th[r], NULL, rank_main, &job[r]);
    }
    for (int r = 0; r < P; r++)
        if (!job[r].skip)
            pthread_join(th[r], NULL);
    uint64_t total = now_ns() - t0;
    char what[128];
    snprintf(what, sizeof what, "fault %s P=%d algo=%d absent=%d fail_rank=%d", coll_name(coll), P, algo, absent,
             fail_rank);
    int all_need = coll == PLX_COLL_ALLREDUCE || coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_ALLTOALL ||
                   coll == PLX_COLL_BARRIER || coll == PLX_COLL_REDUCE_SCATTER;
    int nerr = 0;
    for (int r = 0; r < P; r++) {
        if (job[r].skip)
            continue;
        int rc = job[r].rc;
        int want_err = r == fail_rank ? PLX_ERR_PEER_LOST : PLX_ERR_TIMEOUT;
        if (rc)
            nerr++;
        if (rc && rc != want_err)
            fail("%s: rank %d returned %d (%s), want %d", what, r, rc, job[r].err, want_err);
        if (rc && !job[r].err[0])
            fail("%s: rank %d failed without a message", what, r);
        int root_needs = coll == PLX_COLL_REDUCE || coll == PLX_COLL_GATHER || coll == PLX_COLL_SCATTER;
        if (absent >= 0 && !rc && (all_need || (r == 0 && root_needs)))
            fail("%s: rank %d succeeded without rank %d", what, r, absent);
        if (fail_rank >= 0 && r == fail_rank && rc != PLX_ERR_PEER_LOST)
            fail("%s: rank %d's failed send was not reported (rc %d)", what, r, rc);
        if (job[r].elapsed_ns > budget + 2000000000ull)
            fail("%s: rank %d took %.0f ms for a %.0f ms deadline", what, r, job[r].elapsed_ns / 1e6, budget / 1e6);
    }
    if (!nerr)
        fail("%s: nobody noticed", what);
    if (total > budget + 3000000000ull)
        fail("%s: the round took %.0f ms", what, total / 1e6);
    if (w.live)
        fail("%s: %ld request(s) never released", what, w.live);
    for (int r = 0; r < P; r++)
        free(bufs[r]);
    world_destroy(&w);
}

static void faults(void)
{
    for (int coll = 0; coll <= PLX_COLL_BARRIER; coll++) {
        int algos = coll == PLX_COLL_ALLREDUCE ? 4 : 1; /* ring, recdbl, tree, rabenseifner */
        for (int ai = 0; ai < algos; ai++) {
            int algo = coll == PLX_COLL_ALLREDUCE ? PLX__AR_RING + ai : 0;
            fault_case(4, coll, algo, 3, -1, 0);       /* the last rank never comes */
            fault_case(5, coll, algo, 2, -1, 0);       /* a middle one, odd P */
            if (coll != PLX_COLL_BARRIER && coll != PLX_COLL_GATHER && coll != PLX_COLL_REDUCE)
                fault_case(4, coll, algo, -1, 0, algo == PLX__AR_RECDBL ? 2 : 3); /* rank 0's last/third send fails */
            if (coll != PLX_COLL_SCATTER) /* a non-root's first send fails (rank 2 forwards a broadcast) */
                fault_case(4, coll, algo, -1, coll == PLX_COLL_BROADCAST ? 2 : 1, 1);
        }
    }
}

static void bad_input(void)
{
    struct world w;
    world_init(&w, 1, 0);
    struct endpoint ep = {&w, 0};
    struct plx__p2p p = {&ep, 0, 1, t_isend, t_irecv, t_wait, t_discard, 0, NULL, NULL};
    struct plx__algo_tuning t = {0};
    struct plx_coll_args a = {.struct_size = sizeof a, .coll = PLX_COLL_SEND, .count = 1, .dtype = PLX_F32};
    if (plx__algo_run(&p, &t, &scratch[0], &a, 0) != PLX_ERR_INVALID_ARG)
        fail("collective SEND is not refused");
    a.coll = 99;
    if (plx__algo_run(&p, &t, &scratch[0], &a, 0) != PLX_ERR_INVALID_ARG)
        fail("collective 99 is not refused");
    world_destroy(&w);
    /* scratch grows and keeps its memory */
    struct plx__scratch s = {0};
    void *a1 = plx__scratch_get(&s, 100), *a2 = plx__scratch_get(&s, 50);
    if (!a1 || a1 != a2 || s.bytes < 100)
        fail("scratch: a smaller request must reuse the buffer");
    if (!plx__scratch_get(&s, 1 << 20) || s.bytes < (1 << 20))
        fail("scratch: growing failed");
    plx__scratch_free(&s);
    if (s.buf || s.bytes)
        fail("scratch_free leaves state");
    /* tags: core bit set, seq and step separate */
    if (!(plx__algo_tag(5, 1) & PLX_TAG_CORE_BIT) || plx__algo_tag(5, 1) == plx__algo_tag(6, 1) ||
        plx__algo_tag(5, 1) == plx__algo_tag(5, 2))
        fail("plx__algo_tag does not separate seq and step");
}

int main(int argc, char **argv)
{
    /* usage: test_algo [small|big|faults|b2b]... (default: all) */
    int want_all = argc < 2;
    uint64_t t0 = now_ns();
    for (int k = 0; k < (want_all ? 1 : argc - 1); k++) {
        const char *part = want_all ? "all" : argv[k + 1];
        int all = !strcmp(part, "all");
        if (all || !strcmp(part, "input"))
            bad_input();
        if (all || !strcmp(part, "small")) {
            small_matrix(0, 8, 64, 1);              /* tiny segments, rendezvous */
            small_matrix(1, 1 << 20, 64 << 10, 0);  /* default tuning, eager */
        }
        if (all || !strcmp(part, "b2b"))
            for (size_t pi = 0; pi < sizeof Ps / sizeof Ps[0]; pi++) {
                back_to_back(Ps[pi], 0);
                back_to_back(Ps[pi], 1);
            }
        if (all || !strcmp(part, "faults"))
            faults();
        if (all || !strcmp(part, "big"))
            big_matrix();
    }
    for (int r = 0; r < MAXP; r++)
        plx__scratch_free(&scratch[r]);
    printf("test_algo: %ld cases, %d failure(s), %.1f s\n", ncases, failures, (now_ns() - t0) / 1e9);
    return failures ? 1 : 0;
}
