/* stopped.c - a rank stopped with SIGSTOP is named, with its last completed
 * operation, by the others' timeout errors and by plexus-top run meanwhile.
 *
 * Three tcp processes, timeout 3 s, ledgers in a fresh folder. All run
 * operations #0-#4, wait 1.2 s (so each rank's next completion publishes its
 * position to the store), run #5; then rank 2 stops itself with SIGSTOP.
 * Ranks 0 and 1 start #6 and must fail within 3-8 s with a message naming
 * rank 2, "last completed #5" and "never entered #6". While they wait, the
 * parent runs plexus-top --once: it must show rank 2 stopped, its last
 * completed #5, and that it has not entered #6. Once ranks 0 and 1 have
 * exited, the parent sends SIGCONT: rank 2's #6 then ends without hanging
 * and every process exits; the ledger folder is left empty. It fails (its
 * peers are gone), or, when everything it needs already sits in its socket
 * buffers (a small allreduce where each peer sends it its whole input),
 * succeeds with the right sum: which one depends on whether the peers'
 * goodbye is read before their data, so either is accepted, a wrong sum not.
 *
 * Usage: stopped PLEXUS_TOP */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define N 3

struct shared {
    char url[96];
    char dir[128];
    int failures;
    int in6[N];
    double fail_s[N];
    char log[N][2048];
};

#define FAIL(...) procs_report(log, sizeof sh->log[0], &sh->failures, __VA_ARGS__)

static int rank_main(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    char dirkey[200];
    snprintf(dirkey, sizeof dirkey, "core.ledger_dir=%s", sh->dir);
    const char *ov[] = {dirkey, NULL};
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "tcp";
    o.init = sh->url;
    o.rank = o.local_rank = rank;
    o.size = o.local_size = N;
    o.timeout_ms = 3000;
    o.overrides = ov;
    struct plx_comm *c;
    if (plx_comm_init(&o, &c) != 0) {
        FAIL("rank %d: init: %s\n", rank, plx_last_error());
        return 1;
    }
    float y[256];
    double s;
    int rc = procs_stuck_at_6(c, rank, 2, &sh->in6[rank], y, &s, log, sizeof sh->log[0], &sh->failures);
    if (rc > 0)
        return 1;
    const char *msg = plx_last_error();
    if (rank != 2) {
        sh->fail_s[rank] = now_s();
        if (rc != PLX_ERR_TIMEOUT || !strstr(msg, "rank 2 last completed #5") || !strstr(msg, "never entered #6"))
            FAIL("rank %d: expected a timeout naming rank 2, 'last completed #5' and 'never entered #6'\n", rank);
        if (s < 2.5 || s > 8)
            FAIL("rank %d: failed after %.1f s, expected about 3 s\n", rank, s);
    } else if (rc == 0) {
        for (int i = 0; i < 256; i++)
            if (y[i] != (i == 0 ? 3.0f : 0.0f)) {
                FAIL("rank 2: #6 succeeded after SIGCONT without its peers, element %d is %g\n", i, (double)y[i]);
                break;
            }
    }
    plx_comm_destroy(c);
    return 0;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: stopped PLEXUS_TOP\n");
        return 2;
    }
    struct shared *sh = shared_alloc(sizeof *sh);
    snprintf(sh->url, sizeof sh->url, "tcp://127.0.0.1:%d", free_port());
    snprintf(sh->dir, sizeof sh->dir, "/tmp/plexus-stopped-%d", (int)getpid());
    struct procs p;
    if (procs_start(&p, N, rank_main, sh) != 0)
        return 1;
    int bad = 0;
    /* Ranks 0 and 1 in #6, rank 2 stopped: look with plexus-top. */
    double until = now_s() + 30;
    while (now_s() < until && !(sh->in6[0] && sh->in6[1]))
        usleep(10000);
    usleep(1000 * 1000);
    char cmd[512], out[8192] = "";
    snprintf(cmd, sizeof cmd, "%s --once --dir %s", argv[1], sh->dir);
    FILE *f = popen(cmd, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = '\0';
    if (f)
        pclose(f);
    printf("plexus-top while rank 2 is stopped:\n%s", out);
    if (!strstr(out, "stopped") || !strstr(out, "rank 2 (stopped, last completed #5) has not entered #6")) {
        printf("FAIL: plexus-top does not show rank 2 stopped behind #6\n");
        bad = 1;
    }
    /* Wait for ranks 0 and 1 to fail and exit, then wake rank 2. */
    until = now_s() + 20;
    while (now_s() < until && !(sh->fail_s[0] && sh->fail_s[1]))
        usleep(10000);
    usleep(300 * 1000);
    double cont_s = now_s();
    kill(p.pid[2], SIGCONT);
    procs_wait(&p, now_s() + 30);
    for (int r = 0; r < N; r++) {
        printf("%s", sh->log[r]);
        if (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r])) {
            printf("rank %d: %s\n", r, procs_describe(&p, r));
            bad = 1;
        }
    }
    for (int r = 0; r < 2; r++)
        if (!sh->fail_s[r] || sh->fail_s[r] > cont_s) {
            printf("FAIL: rank %d had not failed before SIGCONT\n", r);
            bad = 1;
        }
    int left = count_files(sh->dir);
    if (left) {
        printf("FAIL: %d ledger file(s) left in %s after every rank exited\n", left, sh->dir);
        bad = 1;
    }
    rmdir(sh->dir);
    if (sh->failures || bad) {
        printf("FAIL: %d failure(s)\n", sh->failures);
        return 1;
    }
    printf("ok: the stopped rank was named with its last completed operation, by the errors and plexus-top\n");
    return 0;
}
