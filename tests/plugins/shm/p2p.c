/* p2p.c - one rank of the shm point-to-point test (started by plexus-run):
 * every byte of every message checked.
 *
 *   exchange  every rank sends every other rank three tags at sizes 0, 1,
 *             odd, just below and above the ring (256 KiB), 4 MiB + 3;
 *             receives posted in another order than the sends, before them
 *             and after them; waits in yet another order.
 *   pingpong  rank 0 and rank P-1 bounce each size, blocking calls.
 *   any       rank 0 receives from PLX_ANY_SOURCE what the others send
 *             (each names itself in its first bytes).
 *   order     five messages on one (source, tag) arrive in order, also
 *             when received from any source.
 *   crossed   (two copies only) ranks 0 and 1 send each other 4 MiB and
 *             wait for their sends before posting the receives: the
 *             sends complete through the unexpected queue. (Single copy is
 *             a rendezvous: a send completes once its receive is posted.)
 *   truncate  a receive smaller than the message fails with
 *             PLX_ERR_INVALID_ARG saying "truncated" (eager and large),
 *             and the next message still arrives whole.
 * Single copy on or off comes from the environment ([shm] p2p_cma).
 *
 * usage: p2p BACKEND              the checks above
 *        p2p BACKEND bench        rank 0 <-> 1 ping-pong: latency and bandwidth */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/plexus.h"

static int me, P, failures;

#define FAIL(...)                                      \
    do {                                               \
        fprintf(stderr, "rank %d: ", me);              \
        fprintf(stderr, __VA_ARGS__);                  \
        fputc('\n', stderr);                           \
        failures++;                                    \
    } while (0)

static const size_t sizes[] = {0, 1, 7, 4093, (256 << 10) - 64, (256 << 10) - 1, (256 << 10) + 1, (4 << 20) + 3};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static unsigned char pat(int src, int dst, int tag, size_t i)
{
    return (unsigned char)(src * 131 + dst * 31 + tag * 7 + i * 13 + (i >> 9));
}

static void fill(unsigned char *b, size_t n, int src, int dst, int tag)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(src, dst, tag, i);
}

static void check(const unsigned char *b, size_t n, int src, int dst, int tag, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(src, dst, tag, i)) {
            FAIL("%s: %zu bytes from rank %d tag %d: byte %zu is %u, want %u", what, n, src, tag, i, b[i],
                 pat(src, dst, tag, i));
            return;
        }
}

static int waitfree(struct plx_work *w, const char *what)
{
    int rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
    if (rc)
        FAIL("%s: %s: %s", what, plx_err_name(rc), plx_last_error());
    plx_work_free(w);
    return rc;
}

enum { NTAGS = 3 };

/* Every rank to every other, NTAGS tags each; size index rotates. */
static void exchange(struct plx_comm *c, int recv_first, int round)
{
    int n = P * NTAGS;
    unsigned char **sb = calloc((size_t)n, sizeof *sb), **rb = calloc((size_t)n, sizeof *rb);
    struct plx_work **sw = calloc((size_t)n, sizeof *sw), **rw = calloc((size_t)n, sizeof *rw);
    size_t *len = calloc((size_t)n, sizeof *len);
    for (int q = 0; q < P; q++)
        for (int t = 0; t < NTAGS; t++) {
            int k = q * NTAGS + t;
            len[k] = sizes[(size_t)(me + q + t * 3 + round) % NSIZES]; /* what me sends q on tag t */
            sb[k] = malloc(len[k] + 1);
            fill(sb[k], len[k], me, q, t + 10);
        }
    /* What q sends me on tag t has the size q picks: (q + me + t*3 + round). */
    for (int pass = 0; pass < 2; pass++) {
        int doing_recv = (pass == 0) == recv_first;
        for (int j = n - 1; j >= 0; j--) { /* reverse order, tags reversed within */
            int q = j / NTAGS, t = NTAGS - 1 - j % NTAGS, k = q * NTAGS + t;
            if (q == me)
                continue;
            int rc;
            if (doing_recv) {
                size_t want = sizes[(size_t)(q + me + t * 3 + round) % NSIZES];
                rb[k] = malloc(want + 1);
                rc = plx_irecv(c, rb[k], want, PLX_U8, q, t + 10, NULL, &rw[k]);
            } else {
                rc = plx_isend(c, sb[k], len[k], PLX_U8, q, t + 10, NULL, &sw[k]);
            }
            if (rc)
                FAIL("exchange post: %s", plx_last_error());
        }
    }
    /* Wait: sends first (they need the peers to progress too), then receives. */
    for (int k = 0; k < n; k++)
        if (sw[k])
            waitfree(sw[k], "exchange send");
    for (int k = n - 1; k >= 0; k--)
        if (rw[k]) {
            int q = k / NTAGS, t = k % NTAGS;
            if (waitfree(rw[k], "exchange recv") == 0)
                check(rb[k], sizes[(size_t)(q + me + t * 3 + round) % NSIZES], q, me, t + 10, "exchange");
        }
    for (int k = 0; k < n; k++) {
        free(sb[k]);
        free(rb[k]);
    }
    free(sb);
    free(rb);
    free(sw);
    free(rw);
    free(len);
}

static void pingpong(struct plx_comm *c)
{
    int a = 0, b = P - 1;
    if (me != a && me != b)
        return;
    unsigned char *buf = malloc(sizes[NSIZES - 1] + 1);
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = sizes[s];
        int rc;
        if (me == a) {
            fill(buf, n, a, b, 3);
            if ((rc = plx_send(c, buf, n, PLX_U8, b, 3)) || (rc = plx_recv(c, buf, n, PLX_U8, b, 4)))
                FAIL("pingpong %zu: %s", n, plx_last_error());
            else
                check(buf, n, b, a, 4, "pingpong");
        } else {
            if ((rc = plx_recv(c, buf, n, PLX_U8, a, 3)))
                FAIL("pingpong %zu: %s", n, plx_last_error());
            check(buf, n, a, b, 3, "pingpong");
            fill(buf, n, b, a, 4);
            if ((rc = plx_send(c, buf, n, PLX_U8, a, 4)))
                FAIL("pingpong %zu: %s", n, plx_last_error());
        }
    }
    free(buf);
}

static size_t any_len(int src)
{
    return src % 2 ? (size_t)1000 * (size_t)src + 5 : (size_t)(512 << 10) + (size_t)src; /* eager and large */
}

static void any_source(struct plx_comm *c)
{
    if (me != 0) {
        size_t n = any_len(me);
        unsigned char *b = malloc(n);
        fill(b, n, me, 0, 99);
        b[0] = (unsigned char)me;
        if (plx_send(c, b, n, PLX_U8, 0, 99))
            FAIL("any send: %s", plx_last_error());
        free(b);
        return;
    }
    size_t cap = (size_t)(1 << 20);
    unsigned char *b = malloc(cap);
    int *seen = calloc((size_t)P, sizeof *seen);
    for (int k = 1; k < P; k++) {
        memset(b, 0, cap);
        if (plx_recv(c, b, cap, PLX_U8, PLX_ANY_SOURCE, 99)) {
            FAIL("any recv: %s", plx_last_error());
            break;
        }
        int src = b[0];
        if (src < 1 || src >= P || seen[src]++) {
            FAIL("any recv: message names rank %d (seen before: %d)", src, src > 0 && src < P ? seen[src] - 1 : -1);
            continue;
        }
        b[0] = pat(src, 0, 99, 0);
        check(b, any_len(src), src, 0, 99, "any");
    }
    free(seen);
    free(b);
}

static void order(struct plx_comm *c, int any)
{
    enum { N = 5 };
    if (me == 1) {
        for (int i = 0; i < N; i++) {
            size_t n = i % 2 ? 300000 : 40; /* large and small alternate: the order still holds */
            unsigned char *b = malloc(n);
            memset(b, i + 1, n);
            if (plx_send(c, b, n, PLX_U8, 0, 42))
                FAIL("order send %d: %s", i, plx_last_error());
            free(b);
        }
    } else if (me == 0) {
        unsigned char *b = malloc(300000);
        for (int i = 0; i < N; i++) {
            size_t n = i % 2 ? 300000 : 40;
            if (plx_recv(c, b, n, PLX_U8, any ? PLX_ANY_SOURCE : 1, 42)) {
                FAIL("order recv %d: %s", i, plx_last_error());
                break;
            }
            if (b[0] != i + 1 || b[n - 1] != i + 1)
                FAIL("order: message %d holds %u..%u", i, b[0], b[n - 1]);
        }
        free(b);
    }
}

static void crossed(struct plx_comm *c)
{
    const char *cma = getenv("PLEXUS_SHM_P2P_CMA");
    if (me > 1 || P < 2 || (cma && !strcmp(cma, "true")))
        return;
    size_t n = (4 << 20) + 5;
    unsigned char *s = malloc(n), *r = malloc(n);
    int peer = 1 - me;
    fill(s, n, me, peer, 21);
    struct plx_work *w;
    if (plx_isend(c, s, n, PLX_U8, peer, 21, NULL, &w) || waitfree(w, "crossed send"))
        FAIL("crossed send: %s", plx_last_error());
    else if (plx_recv(c, r, n, PLX_U8, peer, 21))
        FAIL("crossed recv: %s", plx_last_error());
    else
        check(r, n, peer, me, 21, "crossed");
    free(s);
    free(r);
}

static void truncate_case(struct plx_comm *c, size_t n)
{
    if (me > 1)
        return;
    unsigned char *b = malloc(n);
    if (me == 1) {
        fill(b, n, 1, 0, 7);
        if (plx_send(c, b, n, PLX_U8, 0, 7) || plx_send(c, b, n, PLX_U8, 0, 8))
            FAIL("truncate send %zu: %s", n, plx_last_error());
    } else {
        int rc = plx_recv(c, b, n / 2, PLX_U8, 1, 7);
        if (rc != PLX_ERR_INVALID_ARG || !strstr(plx_last_error(), "truncated") || !strstr(plx_last_error(), "rank 1"))
            FAIL("truncate %zu: got %s: %s (want INVALID_ARG naming rank 1, truncated)", n, plx_err_name(rc),
                 plx_last_error());
        else
            printf("rank 0: truncation (%zu bytes into %zu): %s\n", n, n / 2, plx_last_error());
        if ((rc = plx_recv(c, b, n, PLX_U8, 1, 8)) != 0)
            FAIL("after truncation: %s", plx_last_error());
        else
            check(b, n, 1, 0, 7, "after truncation");
    }
    free(b);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench(struct plx_comm *c)
{
    static const size_t bs[] = {8, 64 << 10, 1 << 20, 16 << 20};
    static const int iters[] = {2000, 300, 60, 8};
    char *buf = calloc(1, 16 << 20);
    for (size_t s = 0; s < 4; s++) {
        int peer = 1 - me, n = iters[s];
        double t0 = 0;
        for (int i = -n / 10 - 1; i < n; i++) {
            if (i == 0) {
                plx_barrier(c);
                t0 = now_s();
            }
            int rc = me == 0 ? (plx_send(c, buf, bs[s], PLX_U8, peer, 1) || plx_recv(c, buf, bs[s], PLX_U8, peer, 2))
                             : (plx_recv(c, buf, bs[s], PLX_U8, peer, 1) || plx_send(c, buf, bs[s], PLX_U8, peer, 2));
            if (rc) {
                FAIL("bench: %s", plx_last_error());
                return;
            }
        }
        double one_way = (now_s() - t0) / n / 2;
        if (me == 0)
            printf("%-4s %9zu B  one-way %9.2f us  %8.1f MB/s\n", plx_comm_backend(c), bs[s], one_way * 1e6,
                   bs[s] / one_way / 1e6);
    }
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: p2p BACKEND [bench]\n");
        return 2;
    }
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = argv[1];
    o.timeout_ms = 60000;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 1;
    }
    me = plx_comm_rank(c);
    P = plx_comm_size(c);
    if (argc > 2 && !strcmp(argv[2], "bench")) {
        if (P == 2)
            bench(c);
    } else {
        for (int round = 0; round < 3; round++) {
            exchange(c, 1, round);
            exchange(c, 0, round);
        }
        pingpong(c);
        any_source(c);
        order(c, 0);
        order(c, 1);
        crossed(c);
        truncate_case(c, 100);
        truncate_case(c, 3 << 20);
        if (plx_barrier(c))
            FAIL("barrier: %s", plx_last_error());
        if (me == 0)
            printf("%s P=%d: %s\n", plx_comm_backend(c), P, failures ? "FAILED" : "all bytes right");
    }
    plx_comm_destroy(c);
    return failures ? 1 : 0;
}
