/* late.c - once a rank fails an operation, no rank reports success for it;
 * and the timeout says where every rank is, and as of when.
 *
 * Two processes on backend argv[1] (tcp, shm), or two threads on sim (sim:
 * its native collectives; sim-generic: the core's algorithms on sim's
 * point-to-point), timeout 2 s. Both run one
 * allreduce; then rank 0 calls a second one and times out, and rank 1 calls
 * it 4 s late, while rank 0 still holds its communicator (it waits for rank
 * 1's verdict before destroying). Rank 0 must get PLX_ERR_TIMEOUT, and its
 * message must place both ranks, each with an age ("... ago"); rank 1 must
 * not get 0 (rank 0's caller already saw the operation fail) and its
 * message must name rank 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define TIMEOUT_MS 2000
#define COUNT 1024

struct shared {
    int port;
    char backend[32];
    char url[96];
    int late_done;
    int failures;
    char log[2][2048];
};

/* msg says where rank r is, and how old that is: after "where the ranks
 * are", "rank r" (or a range "ranks a-b" holding it) with "ago" before the
 * next rank's entry. */
static int placed(const char *msg, int r)
{
    const char *where = strstr(msg, "where the ranks are");
    if (!where)
        return 0;
    char one[16];
    snprintf(one, sizeof one, "rank %d ", r);
    for (const char *at = where; (at = strstr(at, "rank")); at++) {
        int a, b;
        int hit = !strncmp(at, one, strlen(one)) ||
                  (sscanf(at, "ranks %d-%d", &a, &b) == 2 && a <= r && r <= b);
        if (!hit)
            continue;
        const char *end = strpbrk(at, ";]"), *ago = strstr(at, " ago");
        return ago && (!end || ago < end);
    }
    return 0;
}

static int run_rank(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank], url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", sh->port);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    static const char *const generic[] = {"sim.native_collectives=false", NULL};
    o.init = sh->url[0] ? sh->url : url;
    o.backend = sh->backend;
    if (!strcmp(sh->backend, "sim-generic")) {
        o.backend = "sim";
        o.overrides = generic;
    }
    o.rank = o.local_rank = rank;
    o.size = o.local_size = 2;
    o.timeout_ms = TIMEOUT_MS;
    struct plx_comm *c = NULL;
    int rc = plx_comm_init(&o, &c);
    if (rc != 0) {
        procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d: init: %s\n", rank, plx_last_error());
        return 1;
    }
    /* One pair of buffers per rank: sim's ranks are threads of one process. */
    static float bufs[2][2][COUNT];
    float *in = bufs[rank][0], *out = bufs[rank][1];
    rc = plx_allreduce(c, in, out, COUNT, PLX_F32, PLX_SUM);
    if (rc != 0) {
        procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d: first allreduce: %s\n", rank, plx_last_error());
        plx_comm_destroy(c);
        return 1;
    }
    if (rank == 1)
        sleep(4);
    rc = plx_allreduce(c, in, out, COUNT, PLX_F32, PLX_SUM);
    procs_report(log, sizeof sh->log[0], NULL, "rank %d: allreduce: %s: %s\n", rank, plx_err_name(rc),
                 rc ? plx_last_error() : "");
    if (rank == 0) {
        if (rc != PLX_ERR_TIMEOUT)
            procs_report(log, sizeof sh->log[0], &sh->failures, "rank 0: expected PLX_ERR_TIMEOUT\n");
        else if (!placed(plx_last_error(), 0) || !placed(plx_last_error(), 1))
            procs_report(log, sizeof sh->log[0], &sh->failures,
                         "rank 0: the timeout does not place both ranks, each with its age\n");
        double until = now_s() + 30;
        while (!__atomic_load_n(&sh->late_done, __ATOMIC_ACQUIRE) && now_s() < until)
            usleep(10000);
    } else {
        if (rc == 0)
            procs_report(log, sizeof sh->log[0], &sh->failures,
                         "rank 1: the late rank got success for the allreduce rank 0 failed\n");
        else if (!strstr(plx_last_error(), "rank 0"))
            procs_report(log, sizeof sh->log[0], &sh->failures, "rank 1: the error does not name rank 0\n");
        __atomic_store_n(&sh->late_done, 1, __ATOMIC_RELEASE);
    }
    plx_comm_destroy(c);
    return 0;
}

static struct shared *the_shared;

static void *thread_main(void *r)
{
    run_rank((int)(intptr_t)r, the_shared);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s BACKEND\n", argv[0]);
        return 2;
    }
    struct shared *sh = the_shared = shared_alloc(sizeof *sh);
    snprintf(sh->backend, sizeof sh->backend, "%s", argv[1]);
    if ((sh->port = free_port()) < 0)
        return 1;
    int threads = !strncmp(sh->backend, "sim", 3), bad = 0;
    struct procs p = {0};
    if (threads) { /* sim's ranks share one process */
        snprintf(sh->url, sizeof sh->url, "mem://late-%d", (int)getpid());
        pthread_t th[2];
        for (int r = 0; r < 2; r++)
            pthread_create(&th[r], NULL, thread_main, (void *)(intptr_t)r);
        for (int r = 0; r < 2; r++)
            pthread_join(th[r], NULL);
    } else {
        if (procs_start(&p, 2, run_rank, sh) != 0)
            return 1;
        procs_wait(&p, now_s() + 60);
    }
    for (int r = 0; r < 2; r++) {
        fputs(sh->log[r], stdout);
        if (!threads && (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r]))) {
            printf("rank %d: %s\n", r, procs_describe(&p, r));
            bad = 1;
        }
    }
    if (bad || sh->failures) {
        printf("FAIL: %s: %d failure(s)\n", sh->backend, sh->failures);
        return 1;
    }
    printf("ok: %s: the late rank failed too, naming rank 0\n", sh->backend);
    return 0;
}
