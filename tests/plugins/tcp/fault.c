/* fault.c - one rank of a fault test on the tcp backend (started by fault.sh
 * with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT).
 *   fault kill K T_MS: allreduce 1 MiB in a loop; rank K SIGKILLs itself at
 *     iteration 20; every other rank must get an error within T_MS + 3 s.
 *   fault init T_MS: just join the world (a rank is missing): must fail
 *     within T_MS + 3 s, and the message must name the missing rank (argv[3]). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/plexus.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: fault kill RANK TIMEOUT_MS | fault init TIMEOUT_MS MISSING_RANK\n");
        return 2;
    }
    int kill_mode = !strcmp(argv[1], "kill");
    int64_t tmo = atoll(argv[kill_mode ? 3 : 2]);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "tcp";
    o.timeout_ms = tmo;
    struct plx_comm *c = NULL;
    double t0 = now_s();
    int rc = plx_comm_init(&o, &c);
    if (!kill_mode) {
        double dt = now_s() - t0;
        char want[32];
        snprintf(want, sizeof want, "rank %s", argv[3]);
        printf("init returned %s after %.2f s: %s\n", plx_err_name(rc), dt, plx_last_error());
        if (rc == 0) {
            plx_comm_destroy(c);
            return 1;
        }
        return dt < tmo / 1000.0 + 3 && strstr(plx_last_error(), want) ? 0 : 1;
    }
    if (rc) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 1;
    }
    int me = plx_comm_rank(c), victim = atoi(argv[2]);
    size_t n = (1 << 20) / 4;
    float *a = calloc(n, 4), *b = calloc(n, 4);
    double last = now_s();
    for (int i = 0; i < 100000; i++) {
        if (me == victim && i == 20) {
            printf("rank %d: killing myself at iteration %d\n", me, i);
            fflush(stdout);
            raise(SIGKILL);
        }
        rc = plx_allreduce(c, a, b, n, PLX_F32, PLX_SUM);
        if (rc) {
            double dt = now_s() - last;
            printf("rank %d: allreduce %d failed %.2f s after the last success: %s: %s\n", me, i, dt,
                   plx_err_name(rc), plx_last_error());
            plx_comm_abort(c);
            plx_comm_destroy(c);
            free(a);
            free(b);
            return dt < tmo / 1000.0 + 3 ? 0 : 1;
        }
        last = now_s();
    }
    printf("rank %d: no error although rank %d died\n", me, victim);
    free(a);
    free(b);
    plx_comm_destroy(c);
    return 1;
}
