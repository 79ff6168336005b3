/* fault.c - one rank of a fault test on the shm backend (started by fault.sh
 * with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT).
 *   kill K T_MS:    allreduce 1 MiB in a loop; rank K SIGKILLs itself at
 *                   iteration 20; every other rank must fail within T_MS + 3 s
 *                   with PLX_ERR_PEER_LOST naming "rank K".
 *   late K T_MS:    rank K joins but never calls the allreduce (it sleeps
 *                   T_MS + 1.5 s); the others must fail with PLX_ERR_TIMEOUT
 *                   naming "rank K" within T_MS + 3 s.
 *   init K T_MS:    rank K never starts (fault.sh); init must fail naming it.
 *   abort K T_MS:   rank 0 blocks in an allreduce that rank K never joins;
 *                   another thread aborts 300 ms in; the allreduce must end
 *                   with PLX_ERR_ABORTED within 2 s, new work be refused.
 *   corrupt K T_MS BYTES: rank K's slot header is corrupt in collective seq 3
 *                   ([shm] corrupt_rank/corrupt_at, set by fault.sh); the
 *                   others must fail with PLX_ERR_PROTOCOL naming rank K's
 *                   header, and nobody may crash.
 *   corrupt_addr K T_MS BYTES: the same, but only the buffer addresses that
 *                   single copy reads are bad: every rank must fail in time
 *                   (the read of the bad address, or a peer that gave up
 *                   first), nobody crash. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plexus/plexus.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct blocked {
    struct plx_comm *c;
    float *a, *b;
    size_t n;
    int rc;
    double end;
};

static void *blocked_main(void *p)
{
    struct blocked *x = p;
    x->rc = plx_allreduce(x->c, x->a, x->b, x->n, PLX_F32, PLX_SUM);
    x->end = now_s();
    return NULL;
}

static int fail_ok(int me, int i, int rc, int want, const char *name, double dt, double limit)
{
    printf("rank %d: allreduce %d: %s after %.2f s: %s\n", me, i, plx_err_name(rc), dt, plx_last_error());
    if (want && rc != want) {
        printf("rank %d: expected %s\n", me, plx_err_name(want));
        return 1;
    }
    if (name && !strstr(plx_last_error(), name)) {
        printf("rank %d: the message does not name %s\n", me, name);
        return 1;
    }
    return dt < limit ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: fault kill|late|init|abort|corrupt RANK TIMEOUT_MS [BYTES]\n");
        return 2;
    }
    const char *mode = argv[1];
    int victim = atoi(argv[2]);
    int64_t tmo = atoll(argv[3]);
    size_t n = (argc > 4 ? (size_t)atoll(argv[4]) : (size_t)1 << 20) / 4;
    double limit = tmo / 1000.0 + 3;
    char name[32];
    snprintf(name, sizeof name, "rank %d", victim);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "shm";
    o.timeout_ms = tmo;
    struct plx_comm *c = NULL;
    double t0 = now_s();
    int rc = plx_comm_init(&o, &c);
    if (!strcmp(mode, "init")) {
        printf("init returned %s after %.2f s: %s\n", plx_err_name(rc), now_s() - t0, plx_last_error());
        if (rc == 0) {
            plx_comm_destroy(c);
            return 1;
        }
        return now_s() - t0 < limit && strstr(plx_last_error(), name) ? 0 : 1;
    }
    if (rc) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 1;
    }
    int me = plx_comm_rank(c), bad = 0;
    float *a = calloc(n ? n : 1, 4), *b = calloc(n ? n : 1, 4);
    if (!strcmp(mode, "abort") || !strcmp(mode, "late")) {
        if (me == victim) {
            usleep((useconds_t)(!strcmp(mode, "abort") ? 1500 : tmo + 1500) * 1000);
        } else if (!strcmp(mode, "late")) {
            rc = plx_allreduce(c, a, b, n, PLX_F32, PLX_SUM);
            bad = fail_ok(me, 0, rc, PLX_ERR_TIMEOUT, name, now_s() - t0, limit);
        } else if (me == 0) {
            struct blocked x = {c, a, b, n, 0, 0};
            pthread_t t;
            pthread_create(&t, NULL, blocked_main, &x);
            usleep(300000);
            double ta = now_s();
            plx_comm_abort(c);
            pthread_join(t, NULL);
            bad = fail_ok(me, 0, x.rc, PLX_ERR_ABORTED, NULL, x.end - ta, 2.0);
            rc = plx_allreduce(c, a, b, n, PLX_F32, PLX_SUM);
            printf("rank %d: after the abort: %s: %s\n", me, plx_err_name(rc), plx_last_error());
            bad |= rc == 0 || !strstr(plx_last_error(), "abort");
        }
        plx_comm_destroy(c);
        free(a);
        free(b);
        return bad;
    }
    double last = now_s();
    for (int i = 0; i < 100000; i++) {
        if (!strcmp(mode, "kill") && me == victim && i == 20) {
            printf("rank %d: killing myself at iteration %d\n", me, i);
            fflush(stdout);
            raise(SIGKILL);
        }
        rc = plx_allreduce(c, a, b, n, PLX_F32, PLX_SUM);
        if (rc) {
            double dt = now_s() - last;
            if (!strcmp(mode, "kill"))
                bad = fail_ok(me, i, rc, PLX_ERR_PEER_LOST, name, dt, limit);
            else if (me == victim) /* its peers walked away: any error, in time */
                bad = fail_ok(me, i, rc, 0, NULL, dt, limit);
            else {
                char hdr[48];
                snprintf(hdr, sizeof hdr, "rank %d's slot header", victim);
                if (!strcmp(mode, "corrupt_addr")) /* a read fails, here or at a peer that gave up first */
                    bad = fail_ok(me, i, rc, 0, NULL, dt, limit);
                else
                    bad = fail_ok(me, i, rc, PLX_ERR_PROTOCOL, hdr, dt, limit);
            }
            plx_comm_abort(c);
            plx_comm_destroy(c);
            free(a);
            free(b);
            return bad;
        }
        last = now_s();
        if (!strncmp(mode, "corrupt", 7) && i > 10)
            break;
    }
    printf("rank %d: no error although rank %d failed\n", me, victim);
    free(a);
    free(b);
    plx_comm_destroy(c);
    return 1;
}
