/* calib_pingpong - point-to-point ping-pong between ranks 0 and 1 of a job
 * (plexus-run -n 2), for bench/calibrate.py: per size, rank 0 prints the
 * bytes and the one-way time in microseconds (half the mean round trip of
 * `iters` round trips after a warm-up). Sizes go from -b to -e by factors
 * of -f; both ranks derive the same iteration count from the size.
 * --pairs S: every rank at once, rank r with r + S where r / S is even (and
 * so with r - S where it is odd; the size a multiple of 2 S), all on one
 * communicator; rank 0 prints the mean of their one-way times: what a
 * message costs while every rank exchanges them (bench/cluster_table.sh:
 * S ranks a host, so each pair crosses hosts).
 *
 *   plexus-run -n 2 calib_pingpong --backend tcp -b 8 -e 16M -f 8
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/plexus.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    case 'M': case 'm': v *= 1024.0 * 1024; break;
    case 'K': case 'k': v *= 1024.0; break;
    default: break;
    }
    return v > 0 ? (size_t)v : 0;
}

/* Enough round trips that a size takes tens of milliseconds at memory speed. */
static int iters_for(size_t bytes)
{
    size_t n = ((size_t)64 << 20) / (bytes + 1024);
    return n < 10 ? 10 : n > 2000 ? 2000 : (int)n;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"backend", 1, 0, 'B'}, {"minbytes", 1, 0, 'b'}, {"maxbytes", 1, 0, 'e'}, {"stepfactor", 1, 0, 'f'},
        {"pairs", 1, 0, 'p'}, {0, 0, 0, 0},
    };
    const char *backend = NULL;
    int stride = 0;
    size_t minb = 8, maxb = (size_t)16 << 20;
    double factor = 8;
    int ch;
    while ((ch = getopt_long(argc, argv, "b:e:f:", longs, NULL)) != -1) {
        switch (ch) {
        case 'B': backend = optarg; break;
        case 'b': minb = parse_size(optarg); break;
        case 'e': maxb = parse_size(optarg); break;
        case 'f': factor = atof(optarg); break;
        case 'p': {
            char *end;
            long v = strtol(optarg, &end, 10);
            stride = end == optarg || *end || v < 0 || v > 1 << 20 ? -1 : (int)v; /* -1: refused below */
            break;
        }
        default:
            fprintf(stderr, "usage: calib_pingpong [--backend B] [-b MIN] [-e MAX] [-f FACTOR] [--pairs S]\n");
            return 2;
        }
    }
    if (minb < 1 || minb > maxb || factor <= 1 || stride < 0) {
        fprintf(stderr, "calib_pingpong: need 1 <= -b <= -e, -f > 1 and --pairs a whole number >= 0\n");
        return 2;
    }
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend;
    struct plx_comm *c;
    int rc = plx_comm_init(&o, &c);
    if (rc) {
        fprintf(stderr, "calib_pingpong: %s: %s\n", plx_err_name(rc), plx_last_error());
        return 1;
    }
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    char *buf = malloc(maxb);
    if (P < 2 || !buf || (stride > 0 && P % (2 * stride))) {
        fprintf(stderr, "calib_pingpong: needs 2 ranks (with --pairs S, a multiple of 2 S) and %zu bytes\n", maxb);
        plx_comm_destroy(c);
        return 1;
    }
    /* Who pings (sends first) and whom; -1: this rank sits out. */
    int pinger = stride ? (me / stride) % 2 == 0 : me == 0;
    int peer = stride ? (pinger ? me + stride : me - stride) : me < 2 ? 1 - me : -1;
    memset(buf, me, maxb);
    if (me == 0)
        printf("# calib_pingpong: backend %s%s; bytes, one-way us\n", plx_comm_backend(c),
               stride ? ", every rank in pairs at once (the mean)" : "");
    for (size_t bytes = minb; bytes <= maxb && !rc; bytes = (size_t)((double)bytes * factor)) {
        int iters = iters_for(bytes), warm = iters / 10 + 1;
        double t0 = 0;
        for (int i = -warm; i < iters && !rc && peer >= 0; i++) {
            if (i == 0)
                t0 = now_us();
            rc = pinger ? plx_send(c, buf, bytes, PLX_U8, peer, 7) : plx_recv(c, buf, bytes, PLX_U8, peer, 7);
            if (!rc)
                rc = pinger ? plx_recv(c, buf, bytes, PLX_U8, peer, 7) : plx_send(c, buf, bytes, PLX_U8, peer, 7);
        }
        double us = peer >= 0 ? (now_us() - t0) / iters / 2 : 0;
        if (!rc && stride) { /* the mean over the ranks */
            rc = plx_allreduce(c, &us, &us, 1, PLX_F64, PLX_SUM);
            us /= P;
        }
        if (!rc && me == 0)
            printf("%zu %.4f\n", bytes, us);
        fflush(stdout);
    }
    if (!rc) /* ranks that sat out keep their connections open until the pairs are done */
        rc = plx_barrier(c);
    if (rc)
        fprintf(stderr, "calib_pingpong: rank %d: %s: %s\n", me, plx_err_name(rc), plx_last_error());
    free(buf);
    plx_comm_destroy(c);
    return rc ? 1 : 0;
}
