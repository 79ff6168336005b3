/* recreate.c - communicators created, used and destroyed again and again
 * over env://, as a restart loop or torch's destroy_process_group and
 * init_process_group do, with the ranks leaving in every order.
 *
 * N processes (argv[2]) on backend argv[1] run max(3, N) rounds of init,
 * allreduce, destroy on the same MASTER_ADDR:MASTER_PORT. In round k rank
 * k mod N sleeps 1 s before its destroy, so it leaves last while the
 * others already wait in the next round's rendezvous: when that rank is
 * rank 0, which hosts the store, the others joined the next rendezvous on
 * the store of the communicator it is about to destroy. Every round must
 * succeed on every rank, on the backend asked for, with the right sum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define TIMEOUT_MS 20000
#define COUNT 4096

struct shared {
    int port, size, rounds;
    char backend[32];
    int failures;
    char log[PROCS_MAX][2048];
};

static int run_rank(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank], v[32];
    snprintf(v, sizeof v, "%d", sh->port);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", v, 1);
    snprintf(v, sizeof v, "%d", rank);
    setenv("RANK", v, 1);
    snprintf(v, sizeof v, "%d", sh->size);
    setenv("WORLD_SIZE", v, 1);
    int *in = malloc(COUNT * sizeof *in), *out = malloc(COUNT * sizeof *out);
    if (!in || !out)
        return 1;
    for (int round = 0; round < sh->rounds; round++) {
        struct plx_comm_options o;
        plx_comm_options_init(&o);
        o.init = "env://";
        o.backend = sh->backend;
        o.timeout_ms = TIMEOUT_MS;
        struct plx_comm *c = NULL;
        int rc = plx_comm_init(&o, &c);
        if (rc != 0) {
            procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d round %d: init: %s: %s\n", rank, round,
                         plx_err_name(rc), plx_last_error());
            return 1;
        }
        if (strcmp(plx_comm_backend(c), sh->backend))
            procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d round %d: backend %s, not %s\n", rank,
                         round, plx_comm_backend(c), sh->backend);
        for (int i = 0; i < COUNT; i++)
            in[i] = (rank + 1) * (round + 1) + i;
        rc = plx_allreduce(c, in, out, COUNT, PLX_I32, PLX_SUM);
        if (rc != 0)
            procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d round %d: allreduce: %s: %s\n", rank,
                         round, plx_err_name(rc), plx_last_error());
        int n = sh->size, bad = 0;
        for (int i = 0; rc == 0 && i < COUNT; i++)
            bad += out[i] != (round + 1) * n * (n + 1) / 2 + n * i;
        if (bad)
            procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d round %d: %d wrong sums\n", rank, round,
                         bad);
        if (round % n == rank)
            sleep(1);
        rc = plx_comm_destroy(c);
        if (rc != 0)
            procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d round %d: destroy: %s: %s\n", rank,
                         round, plx_err_name(rc), plx_last_error());
    }
    free(in);
    free(out);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s BACKEND NPROCS\n", argv[0]);
        return 2;
    }
    struct shared *sh = shared_alloc(sizeof *sh);
    snprintf(sh->backend, sizeof sh->backend, "%s", argv[1]);
    sh->size = atoi(argv[2]);
    if (sh->size < 2 || sh->size > PROCS_MAX) {
        fprintf(stderr, "recreate: NPROCS must be 2..%d\n", PROCS_MAX);
        return 2;
    }
    sh->rounds = sh->size > 3 ? sh->size : 3;
    if ((sh->port = free_port()) < 0) {
        fprintf(stderr, "recreate: no free port\n");
        return 1;
    }
    struct procs p;
    if (procs_start(&p, sh->size, run_rank, sh) != 0)
        return 1;
    procs_wait(&p, now_s() + 120);
    int bad = 0;
    for (int r = 0; r < sh->size; r++) {
        fputs(sh->log[r], stdout);
        if (!WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r]) != 0 || p.hung[r]) {
            printf("rank %d: %s\n", r, procs_describe(&p, r));
            bad = 1;
        }
    }
    if (bad || sh->failures) {
        printf("FAIL: %s, %d processes, %d rounds: %d failures\n", sh->backend, sh->size, sh->rounds, sh->failures);
        return 1;
    }
    printf("ok: %s, %d processes, %d rounds of init/allreduce/destroy, each rank leaving last once\n", sh->backend,
           sh->size, sh->rounds);
    return 0;
}
