/* store_lost.c - a rank whose wait fails after the store went away with
 * its host (rank 0, killed) still names the rank it was waiting for, with
 * that rank's last completed operation, as it last read it.
 *
 * Three tcp processes, timeout 4 s. All run operations #0-#4, wait 1.2 s
 * (so each rank's next completion publishes its position to the store),
 * run #5; then rank 2 stops itself with SIGSTOP. Ranks 0 and 1 start #6:
 * rank 1 waits for rank 2 (the fold of three ranks onto two) and, after
 * half a second, reads rank 2's position now and then. 1.5 s into #6 the
 * parent SIGKILLs rank 0, which hosts the store. Rank 1 must fail by its
 * deadline (rank 0's end alone does not fail it: a rank that leaves may
 * have done its part), naming rank 2, "last completed #5" and "never entered
 * #6": it cannot read the store any more, so it says what it read before.
 * Then the parent wakes rank 2 with SIGCONT and every process must end. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define N 3

struct shared {
    int port;
    int failures;
    int in6[N];
    double fail_s[N];
    char log[N][2048];
};

static int rank_main(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    struct plx_comm *c;
    if (procs_open(rank, N, sh->port, "tcp", 4000, log, sizeof sh->log[0], &sh->failures, &c) != 0)
        return 1;
    float y[256];
    double s;
    int rc = procs_stuck_at_6(c, rank, 2, &sh->in6[rank], y, &s, log, sizeof sh->log[0], &sh->failures);
    if (rc > 0)
        return 1;
    const char *msg = plx_last_error();
    if (rank == 1) {
        sh->fail_s[rank] = now_s();
        if (rc == 0 || !strstr(msg, "rank 2 last completed #5") || !strstr(msg, "never entered #6"))
            procs_report(log, sizeof sh->log[0], &sh->failures,
                         "rank 1: expected a failure naming rank 2, 'last completed #5' and 'never entered #6'\n");
        if (s < 3.5 || s > 7)
            procs_report(log, sizeof sh->log[0], &sh->failures,
                         "rank 1: failed after %.1f s, expected at its 4 s deadline\n", s);
    }
    plx_comm_destroy(c);
    return 0;
}

int main(void)
{
    struct shared *sh = shared_alloc(sizeof *sh);
    sh->port = free_port();
    struct procs p;
    if (sh->port < 0 || procs_start(&p, N, rank_main, sh) != 0)
        return 1;
    int bad = 0;
    double until = now_s() + 30;
    while (now_s() < until && !(sh->in6[0] && sh->in6[1]))
        usleep(10000);
    usleep(1500 * 1000);
    kill(p.pid[0], SIGKILL);
    until = now_s() + 20;
    while (now_s() < until && !sh->fail_s[1])
        usleep(10000);
    kill(p.pid[2], SIGCONT);
    procs_wait(&p, now_s() + 30);
    for (int r = 0; r < N; r++)
        printf("%s", sh->log[r]);
    if (!sh->fail_s[1]) {
        printf("FAIL: rank 1 had not failed 20 s after rank 0 was killed\n");
        bad = 1;
    }
    for (int r = 1; r < N; r++)
        if (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r])) {
            printf("FAIL: rank %d: %s\n", r, procs_describe(&p, r));
            bad = 1;
        }
    if (sh->failures || bad) {
        printf("FAIL: %d failure(s)\n", sh->failures);
        return 1;
    }
    printf("ok: with the store gone, the failed wait named the rank it waited for as last read\n");
    return 0;
}
