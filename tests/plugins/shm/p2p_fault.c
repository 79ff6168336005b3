/* p2p_fault.c - one rank of a point-to-point fault test on the shm backend
 * (started by fault.sh with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; the
 * communicator's timeout is T_MS). Rank K is the one at fault.
 *   p2p_kill K T_MS BYTES:  every other rank waits in a receive from K; K
 *                   SIGKILLs itself 300 ms in: each must fail within
 *                   T_MS + 3 s with PLX_ERR_PEER_LOST naming "rank K".
 *   p2p_late K T_MS BYTES:  K never sends (it sleeps T_MS + 1.5 s): each
 *                   other rank's receive fails with PLX_ERR_TIMEOUT naming
 *                   "rank K" within T_MS + 3 s.
 *   p2p_abort K T_MS BYTES: rank 0 waits in a receive from K (who never
 *                   sends); another thread aborts 300 ms in: the receive
 *                   ends with PLX_ERR_ABORTED within 2 s, a new send is
 *                   refused.
 *   p2p_corrupt K T_MS BYTES: K's third message to rank 0 has a corrupt
 *                   frame header ([shm] p2p_corrupt_rank/p2p_corrupt_at,
 *                   set by fault.sh): rank 0 gets its first two whole, then
 *                   PLX_ERR_PROTOCOL naming rank K's ring; nobody crashes or
 *                   hangs. */
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

static void *aborter(void *p)
{
    usleep(300 * 1000);
    plx_comm_abort(p);
    return NULL;
}

/* rc must be want and the message must name "rank K", within limit s. */
static int expect(int me, const char *what, int rc, int want, int K, double dt, double limit)
{
    char name[32];
    snprintf(name, sizeof name, "rank %d", K);
    printf("rank %d: %s: %s after %.2f s: %s\n", me, what, plx_err_name(rc), dt, plx_last_error());
    if (rc != want) {
        printf("rank %d: expected %s\n", me, plx_err_name(want));
        return 1;
    }
    if (want != PLX_ERR_ABORTED && !strstr(plx_last_error(), name)) {
        printf("rank %d: the message does not name %s\n", me, name);
        return 1;
    }
    if (dt > limit) {
        printf("rank %d: took %.2f s, limit %.2f s\n", me, dt, limit);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: p2p_fault MODE K T_MS BYTES\n");
        return 2;
    }
    const char *mode = argv[1];
    int K = atoi(argv[2]);
    long tmo = atol(argv[3]);
    size_t bytes = (size_t)atol(argv[4]);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "shm";
    o.timeout_ms = tmo;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 1;
    }
    int me = plx_comm_rank(c), bad = 0;
    char *buf = calloc(1, bytes + 1);
    double t0 = now_s();
    if (!strcmp(mode, "p2p_kill")) {
        if (me == K) {
            usleep(300 * 1000);
            raise(SIGKILL);
        }
        int rc = plx_recv(c, buf, bytes, PLX_U8, K, 1);
        bad = expect(me, "recv", rc, PLX_ERR_PEER_LOST, K, now_s() - t0, tmo / 1000.0 + 3);
    } else if (!strcmp(mode, "p2p_late")) {
        if (me == K) {
            usleep((useconds_t)(tmo + 1500) * 1000);
        } else {
            int rc = plx_recv(c, buf, bytes, PLX_U8, K, 1);
            bad = expect(me, "recv", rc, PLX_ERR_TIMEOUT, K, now_s() - t0, tmo / 1000.0 + 3);
        }
    } else if (!strcmp(mode, "p2p_abort")) {
        if (me == 0) {
            pthread_t th;
            pthread_create(&th, NULL, aborter, c);
            int rc = plx_recv(c, buf, bytes, PLX_U8, K, 1);
            pthread_join(th, NULL);
            bad = expect(me, "recv", rc, PLX_ERR_ABORTED, K, now_s() - t0, 2);
            struct plx_work *w = NULL;
            rc = plx_isend(c, buf, 1, PLX_U8, K, 2, NULL, &w);
            if (rc == 0) {
                printf("rank 0: an isend after the abort was accepted\n");
                plx_work_free(w);
                bad = 1;
            }
        } else {
            usleep(1500 * 1000);
        }
    } else if (!strcmp(mode, "p2p_corrupt")) {
        if (me == K) {
            for (int i = 0; i < 4; i++) {
                int rc = plx_send(c, buf, bytes, PLX_U8, 0, 5);
                printf("rank %d: send %d: %s%s%s\n", me, i, plx_err_name(rc), rc ? ": " : "", rc ? plx_last_error() : "");
                if (rc)
                    break;
            }
        } else if (me == 0) {
            /* Messages before the corrupt one come whole or (when the frame
             * was seen while draining ahead) fail with the same error. */
            int rc = 0, i;
            for (i = 0; i < 3 && rc == 0; i++) {
                memset(buf, 0xee, bytes);
                rc = plx_recv(c, buf, bytes, PLX_U8, K, 5);
                if (rc == 0 && (i == 2 || buf[0] != 0 || buf[bytes - 1] != 0)) {
                    printf("rank 0: message %d came %s\n", i, i == 2 ? "in spite of its corrupt frame" : "with bad bytes");
                    bad = 1;
                }
            }
            bad |= expect(me, "recv", rc, PLX_ERR_PROTOCOL, K, now_s() - t0, tmo / 1000.0 + 3);
            if (!strstr(plx_last_error(), "corrupt frame")) {
                printf("rank 0: the message does not say the frame is corrupt\n");
                bad = 1;
            }
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        bad = 2;
    }
    free(buf);
    plx_comm_destroy(c);
    printf("rank %d: %s\n", me, bad ? "FAILED" : "ok");
    return bad;
}
