/* pipe_fault.c - one stage of a pipeline fault test on tcp processes
 * (started by pipe_fault.sh with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT;
 * the world is the pipeline).
 *   pipe_fault kill|fail STAGE MB TIMEOUT_MS SCHEDULE
 * Three training steps of the schedule (4 micro-batches per stage and
 * chunk, callbacks of 2 ms); in step 1, STAGE's forward of micro-batch MB
 * SIGKILLs its process (kill) or returns an error (fail). Every stage that
 * is left must get an error from plx_pipe_run naming "stage STAGE" (fail:
 * also the micro-batch) within TIMEOUT_MS + 3 s of the fault; exit 0 then. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/parallel.h"

static int victim, victim_mb, kill_mode, step;
static double fault_at;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void work(void)
{
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

static int me;

static int fwd(void *user, int chunk, int mb, const void *in, void *out)
{
    (void)user, (void)chunk;
    if (out)
        memcpy(out, in ? in : &mb, sizeof(int));
    work();
    if (step == 1 && me == victim && mb == victim_mb && chunk == 0) {
        printf("stage %d: %s at micro-batch %d\n", me, kill_mode ? "killing myself" : "failing", mb);
        fflush(stdout);
        if (kill_mode)
            raise(SIGKILL);
        return PLX_ERR_INTERNAL;
    }
    return 0;
}

static int bwd(void *user, int chunk, int mb, const void *grad_out, void *grad_in)
{
    (void)user, (void)chunk, (void)mb;
    if (grad_in)
        memcpy(grad_in, grad_out ? grad_out : &mb, sizeof(int));
    work();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: pipe_fault kill|fail STAGE MB TIMEOUT_MS SCHEDULE\n");
        return 2;
    }
    kill_mode = !strcmp(argv[1], "kill");
    victim = atoi(argv[2]);
    victim_mb = atoi(argv[3]);
    int64_t tmo = atoll(argv[4]);
    int kind = plx_pipe_kind_from_name(argv[5]);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "tcp";
    o.timeout_ms = tmo;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 1;
    }
    me = plx_comm_rank(c);
    int S = plx_comm_size(c), V = kind == PLX_PIPE_INTERLEAVED ? 2 : 1;
    struct plx_pipe_schedule *s;
    if (plx_pipe_schedule_create(kind, S, S * 2, V, &s)) {
        fprintf(stderr, "schedule: %s\n", plx_last_error());
        return 1;
    }
    struct plx_pipe_callbacks cb = {sizeof cb, NULL, fwd, bwd};
    struct plx_pipe_options po;
    plx_pipe_options_init(&po);
    po.act_count = 1;
    po.dtype = PLX_I32;
    po.timeout_ms = tmo;
    int status = 1;
    for (step = 0; step < 3; step++) {
        double t0 = now_s();
        int rc = plx_pipe_run(c, s, &cb, &po, NULL);
        if (!rc)
            continue;
        fault_at = t0;
        double dt = now_s() - t0;
        char want[32], want_mb[32];
        snprintf(want, sizeof want, "stage %d", victim);
        snprintf(want_mb, sizeof want_mb, "micro-batch %d", victim_mb);
        const char *msg = plx_last_error();
        int named = strstr(msg, want) && (kill_mode || strstr(msg, want_mb));
        printf("stage %d: step %d failed after %.2f s: %s: %s\n", me, step, dt, plx_err_name(rc), msg);
        status = step == 1 && named && dt < tmo / 1000.0 + 3 ? 0 : 1;
        if (!named)
            printf("stage %d: the error does not name %s\n", me, want);
        break;
    }
    if (step == 3)
        printf("stage %d: no error although stage %d %s\n", me, victim, kill_mode ? "died" : "failed");
    plx_pipe_schedule_destroy(s);
    plx_comm_destroy(c);
    plx_finalize();
    return status;
}
