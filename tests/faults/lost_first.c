/* lost_first.c - a rank that died first is named even when the connection
 * that breaks the communicator is another rank's. Three processes on tcp:
 * rank 1 is killed (SIGKILL) while nothing is pending; then rank 2 leaves
 * abruptly (its process ends without plx_comm_destroy, as a rank that
 * failed because of rank 1 would); then rank 0 receives from rank 2. Its
 * PLX_ERR_PEER_LOST must name rank 2 (the connection it waited on) and
 * rank 1 (gone before it). That is how a survivor that meets a rank which
 * failed because of the dead one still learns who died. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define TIMEOUT_MS 20000

struct shared {
    int port;
    int gone[3];
    int failures;
    char log[3][2048];
};

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Wait until flag is set (by another process), at most ms. */
static int wait_flag(const int *flag, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (__atomic_load_n(flag, __ATOMIC_ACQUIRE))
            return 1;
        nap_ms(10);
    }
    return 0;
}

static int run_rank(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    struct plx_comm *c = NULL;
    if (procs_open(rank, 3, sh->port, "tcp", TIMEOUT_MS, log, sizeof sh->log[0], &sh->failures, &c) != 0)
        return 1;
    float x = 1, y = 0;
    int rc = plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM);
    if (rc != 0 || y != 3) {
        procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d: allreduce: %s (%g)\n", rank, plx_err_name(rc), y);
        return 1;
    }
    if (rank == 1) {
        __atomic_store_n(&sh->gone[1], 1, __ATOMIC_RELEASE);
        kill(getpid(), SIGKILL);
    }
    if (rank == 2) {
        wait_flag(&sh->gone[1], 10000);
        nap_ms(200); /* rank 1's end has reached every connection */
        __atomic_store_n(&sh->gone[2], 1, __ATOMIC_RELEASE);
        _exit(0); /* no destroy: its connections close as the process ends */
    }
    wait_flag(&sh->gone[2], 20000);
    nap_ms(200);
    float z = 0;
    rc = plx_recv(c, &z, 1, PLX_F32, 2, 7);
    const char *msg = plx_last_error();
    procs_report(log, sizeof sh->log[0], NULL, "rank 0: recv from rank 2: %s: %s\n", plx_err_name(rc), msg);
    if (rc != PLX_ERR_PEER_LOST)
        procs_report(log, sizeof sh->log[0], &sh->failures, "rank 0: expected PLX_ERR_PEER_LOST\n");
    if (!strstr(msg, "rank 2"))
        procs_report(log, sizeof sh->log[0], &sh->failures, "rank 0: the error does not name rank 2\n");
    if (!strstr(msg, "rank 1"))
        procs_report(log, sizeof sh->log[0], &sh->failures, "rank 0: the error does not name rank 1, which died "
                     "first\n");
    plx_comm_destroy(c);
    return 0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct shared *sh = shared_alloc(sizeof *sh);
    sh->port = free_port();
    struct procs p;
    if (!sh || sh->port < 0 || procs_start(&p, 3, run_rank, sh) != 0) {
        printf("FAIL: cannot start the ranks\n");
        return 1;
    }
    procs_wait(&p, now_s() + 60);
    for (int r = 0; r < 3; r++) {
        fputs(sh->log[r], stdout);
        if (p.hung[r])
            printf("FAIL: rank %d hung\n", r), sh->failures++;
    }
    if (p.status[0] != 0)
        printf("FAIL: rank 0 ended with %s\n", procs_describe(&p, 0)), sh->failures++;
    printf("%s\n", sh->failures ? "FAILED" : "ok");
    return sh->failures ? 1 : 0;
}
