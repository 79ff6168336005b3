/* peer_abort.c - plx_comm_abort on one rank reaches the others as "rank N
 * aborted", promptly, not as a lost connection or a timeout.
 *
 * Three processes on backend argv[1] (tcp, shm), timeout 60 s. Ranks 1 and
 * 2 call an allreduce that rank 0 never joins; 500 ms in, rank 0 calls
 * plx_comm_abort. Ranks 1 and 2 must fail within 5 s of the abort, with a
 * message that says rank 0 aborted (and not "lost"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define NRANK 3
#define TIMEOUT_MS 60000
#define COUNT 4096

struct shared {
    int port;
    char backend[32];
    volatile int joined;
    volatile double abort_at;
    volatile int others_done;
    int failures;
    char log[NRANK][2048];
};

static int run_rank(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    struct plx_comm *c = NULL;
    if (procs_open(rank, NRANK, sh->port, sh->backend, TIMEOUT_MS, log, cap, &sh->failures, &c) != 0)
        return 1;
    __atomic_add_fetch(&sh->joined, 1, __ATOMIC_ACQ_REL);
    double until = now_s() + 30;
    while (__atomic_load_n(&sh->joined, __ATOMIC_ACQUIRE) < NRANK && now_s() < until)
        usleep(1000);
    if (rank == 0) {
        usleep(500000);
        sh->abort_at = now_s();
        plx_comm_abort(c);
        until = now_s() + 40;
        while (__atomic_load_n(&sh->others_done, __ATOMIC_ACQUIRE) < NRANK - 1 && now_s() < until)
            usleep(10000);
    } else {
        static float in[COUNT], out[COUNT];
        int rc = plx_allreduce(c, in, out, COUNT, PLX_F32, PLX_SUM);
        double dt = now_s() - sh->abort_at;
        const char *msg = plx_last_error();
        procs_report(log, cap, NULL, "rank %d: allreduce: %s after %.2f s: %s\n", rank, plx_err_name(rc), dt,
                     rc ? msg : "");
        if (rc == 0)
            procs_report(log, cap, &sh->failures, "rank %d: success although rank 0 aborted\n", rank);
        else if (!strstr(msg, "rank 0 aborted"))
            procs_report(log, cap, &sh->failures, "rank %d: the error does not say that rank 0 aborted\n", rank);
        else if (strstr(msg, "lost"))
            procs_report(log, cap, &sh->failures, "rank %d: the error calls the abort a loss\n", rank);
        if (dt > 5.0)
            procs_report(log, cap, &sh->failures, "rank %d: took %.2f s after the abort\n", rank, dt);
        __atomic_add_fetch(&sh->others_done, 1, __ATOMIC_ACQ_REL);
    }
    plx_comm_destroy(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s tcp|shm\n", argv[0]);
        return 2;
    }
    struct shared *sh = shared_alloc(sizeof *sh);
    if (!sh)
        return 1;
    snprintf(sh->backend, sizeof sh->backend, "%s", argv[1]);
    sh->abort_at = 1e300; /* until rank 0 aborts, no wait counts as late */
    if ((sh->port = free_port()) < 0)
        return 1;
    struct procs p;
    if (procs_start(&p, NRANK, run_rank, sh) != 0)
        return 1;
    procs_wait(&p, now_s() + 80);
    for (int r = 0; r < NRANK; r++)
        fputs(sh->log[r], stdout);
    int bad = procs_bad_ends(&p, stdout, "") != 0;
    if (bad || sh->failures) {
        printf("FAIL: %s: %d failure(s)\n", sh->backend, sh->failures);
        return 1;
    }
    printf("ok: %s: the others failed promptly, saying rank 0 aborted\n", sh->backend);
    return 0;
}
