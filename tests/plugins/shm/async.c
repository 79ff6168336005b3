/* async.c - nonblocking collectives on shm (and on the hierarchy shm+tcp)
 * return once posted, before the peers have arrived, and complete right
 * and in issue order in the wait. Run with plexus-run -n P (P >= 2, ranks
 * of one host), argument: the backend ("shm" or "shm+tcp").
 *
 *   1. Rank 0 issues plx_iallreduce (small, then 4 MiB) while rank 1 has
 *      not joined: rank 1 joins only once rank 0 says, through a file, that
 *      its issue returned (then sleeps 200 ms first). A call that ran the
 *      collective to completion inside the issue never returns to say so:
 *      rank 1 gives up after WAIT_S, says so, and joins, and the test fails.
 *      Before it says so, rank 0's plx_work_test must report not done.
 *   2. Several operations outstanding at once (allreduce of several sizes
 *      and ops, broadcast, allgather, then a blocking allreduce behind
 *      them), rank 1 late again, waited for in reverse order: every result
 *      right.
 *   3. (shm only) A failure inside a queued collective reaches the waiter
 *      with its message: a second communicator whose rank 1 writes a
 *      corrupt slot header in collective seq 3 ([shm] corrupt_rank and
 *      corrupt_at as options); a nonblocking allreduce fails on every rank,
 *      and the message says what shm saw, not a blank or a generic one. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plexus/plexus.h"

#define WAIT_S 30

static int me, P;
static char dir[128];

static void flag_path(char *p, size_t n, int step)
{
    snprintf(p, n, "%s/issued-%d", dir, step);
}

static void say_issued(int step)
{
    char p[200];
    flag_path(p, sizeof p, step);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
}

/* Rank 1: wait (at most WAIT_S) for rank 0's word; 0 if it came. */
static int await_issued(int step)
{
    char p[200];
    flag_path(p, sizeof p, step);
    for (int i = 0; i < WAIT_S * 100; i++) {
        if (access(p, F_OK) == 0)
            return 0;
        usleep(10000);
    }
    printf("rank %d: step %d: rank 0's nonblocking call did not return within %d s while this rank had not "
           "joined: it ran to completion inside the call\n", me, step, WAIT_S);
    return 1;
}

static void rm_tree(const char *d)
{
    DIR *dd = opendir(d);
    struct dirent *e;
    char p[512];
    while (dd && (e = readdir(dd)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", d, e->d_name);
            unlink(p);
        }
    if (dd)
        closedir(dd);
    rmdir(d);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static float value(int rank, size_t k)
{
    return (float)((rank + 1) * 3 + (int)(k % 101));
}

/* One allreduce issued while rank 1 is away. */
static int before_peer(struct plx_comm *c, size_t n, int step)
{
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    int bad = 0, rc;
    if (!a || !b)
        return 1;
    for (size_t k = 0; k < n; k++)
        a[k] = value(me, k);
    if (me == 1) {
        bad |= await_issued(step);
        sleep_ms(200);
    }
    struct plx_work *w = NULL;
    if ((rc = plx_iallreduce(c, a, b, n, PLX_F32, PLX_SUM, NULL, &w)) != 0) {
        printf("rank %d: iallreduce: %s\n", me, plx_last_error());
        return 1;
    }
    if (me == 0) {
        int done = -1;
        if ((rc = plx_work_test(w, &done)) != 0 || done != 0) {
            printf("rank %d: step %d: plx_work_test says done=%d (%s) while rank 1 has not joined\n", me, step, done,
                   rc ? plx_last_error() : "ok");
            bad = 1;
        }
        say_issued(step);
    }
    if ((rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT)) != 0) {
        printf("rank %d: step %d: wait: %s\n", me, step, plx_last_error());
        bad = 1;
    }
    plx_work_free(w);
    for (size_t k = 0; k < n && !rc; k++) {
        float want = 0;
        for (int r = 0; r < P; r++)
            want += value(r, k);
        if (b[k] != want) {
            printf("rank %d: step %d: element %zu is %g, want %g\n", me, step, k, (double)b[k], (double)want);
            bad = 1;
            break;
        }
    }
    free(a);
    free(b);
    return bad;
}

enum { NOPS = 6 };

/* Several outstanding, waited for in reverse order. */
static int outstanding(struct plx_comm *c)
{
    static const size_t sizes[4] = {7, 4096, 300000, 1u << 20};
    static const int ops[4] = {PLX_SUM, PLX_MAX, PLX_AVG, PLX_SUM};
    float *in[4], *out[4];
    size_t nb = 100003;
    double *bc = malloc(nb * sizeof *bc);
    int32_t *ag = malloc((size_t)P * 5 * sizeof *ag), mine[5];
    int bad = 0, rc;
    for (int i = 0; i < 4; i++) {
        in[i] = malloc(sizes[i] * sizeof(float));
        out[i] = malloc(sizes[i] * sizeof(float));
        if (!in[i] || !out[i])
            return 1;
        for (size_t k = 0; k < sizes[i]; k++)
            in[i][k] = value(me, k + (size_t)i);
    }
    if (!bc || !ag)
        return 1;
    for (size_t k = 0; k < nb; k++)
        bc[k] = me == P - 1 ? (double)k * 0.5 : -1.0;
    for (int k = 0; k < 5; k++)
        mine[k] = me * 10 + k;
    if (me == 1)
        sleep_ms(200);
    struct plx_work *w[NOPS] = {0};
    for (int i = 0; i < 4; i++)
        if ((rc = plx_iallreduce(c, in[i], out[i], sizes[i], PLX_F32, ops[i], NULL, &w[i])) != 0) {
            printf("rank %d: iallreduce %d: %s\n", me, i, plx_last_error());
            return 1;
        }
    if ((rc = plx_ibroadcast(c, bc, nb, PLX_F64, P - 1, NULL, &w[4])) != 0 ||
        (rc = plx_iallgather(c, mine, ag, 5, PLX_I32, NULL, &w[5])) != 0) {
        printf("rank %d: ibroadcast/iallgather: %s\n", me, plx_last_error());
        return 1;
    }
    /* A blocking call behind them runs after them. */
    int32_t one = me + 1, sum = 0;
    if ((rc = plx_allreduce(c, &one, &sum, 1, PLX_I32, PLX_SUM)) != 0 || sum != P * (P + 1) / 2) {
        printf("rank %d: blocking allreduce behind nonblocking ones: rc %d sum %d (%s)\n", me, rc, (int)sum,
               rc ? plx_last_error() : "wrong sum");
        bad = 1;
    }
    for (int i = NOPS - 1; i >= 0; i--) {
        if ((rc = plx_work_wait(w[i], PLX_TIMEOUT_DEFAULT)) != 0) {
            printf("rank %d: wait %d: %s\n", me, i, plx_last_error());
            bad = 1;
        }
        plx_work_free(w[i]);
    }
    for (int i = 0; i < 4; i++)
        for (size_t k = 0; k < sizes[i]; k++) {
            float want = ops[i] == PLX_MAX ? value(P - 1, k + (size_t)i) : 0;
            if (ops[i] != PLX_MAX) {
                for (int r = 0; r < P; r++)
                    want += value(r, k + (size_t)i);
                if (ops[i] == PLX_AVG)
                    want /= (float)P;
            }
            float d = out[i][k] - want;
            if (d > 1e-3f * want || d < -1e-3f * want) {
                printf("rank %d: allreduce %d (count %zu) element %zu is %g, want %g\n", me, i, sizes[i], k,
                       (double)out[i][k], (double)want);
                bad = 1;
                break;
            }
        }
    for (size_t k = 0; k < nb; k++)
        if (bc[k] != (double)k * 0.5) {
            printf("rank %d: broadcast element %zu is %g\n", me, k, bc[k]);
            bad = 1;
            break;
        }
    for (int r = 0; r < P; r++)
        for (int k = 0; k < 5; k++)
            if (ag[r * 5 + k] != r * 10 + k) {
                printf("rank %d: allgather block %d element %d is %d\n", me, r, k, (int)ag[r * 5 + k]);
                bad = 1;
            }
    for (int i = 0; i < 4; i++) {
        free(in[i]);
        free(out[i]);
    }
    free(bc);
    free(ag);
    return bad;
}

/* Part 3: a fault in a collective the progress thread runs. */
static int failure_reaches_waiter(const char *url_dir)
{
    char url[200];
    snprintf(url, sizeof url, "file://%s/store", url_dir);
    static const char *const faulty[] = {"shm.corrupt_rank=1", "shm.corrupt_at=3", NULL};
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "shm";
    o.init = url;
    o.name = "async-faulty";
    o.timeout_ms = 20000;
    o.overrides = faulty;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        printf("rank %d: faulty communicator: init: %s\n", me, plx_last_error());
        return 1;
    }
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8];
    int rc = 0, i;
    for (i = 0; i < 10 && !rc; i++) {
        struct plx_work *w = NULL;
        if ((rc = plx_iallreduce(c, a, b, 8, PLX_F32, PLX_SUM, NULL, &w)) != 0)
            break;
        rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
        plx_work_free(w);
    }
    int bad = 0;
    const char *msg = plx_last_error();
    if (!rc) {
        printf("rank %d: no allreduce failed though rank 1 wrote a corrupt header\n", me);
        bad = 1;
    } else if (!msg[0] || strstr(msg, "shm: collective failed") || !strstr(msg, "shm")) {
        printf("rank %d: allreduce %d failed (%s) without shm's message: '%s'\n", me, i, plx_err_name(rc), msg);
        bad = 1;
    } else {
        printf("rank %d: allreduce %d failed as it should: %s: %.200s\n", me, i, plx_err_name(rc), msg);
    }
    plx_comm_destroy(c);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: async BACKEND (shm or shm+tcp)\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "/tmp/plexus-shm-async-%d", (int)getppid()); /* plexus-run's pid: shared by the ranks */
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        perror(dir);
        return 1;
    }
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = argv[1];
    o.timeout_ms = 60000;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 1;
    }
    me = plx_comm_rank(c);
    P = plx_comm_size(c);
    if (P < 2) {
        printf("needs at least 2 ranks\n");
        plx_comm_destroy(c);
        return 77;
    }
    int bad = before_peer(c, 8, 1);
    bad |= before_peer(c, 1u << 20, 2);
    for (int round = 0; round < 3; round++)
        bad |= outstanding(c);
    if (!strcmp(argv[1], "shm"))
        bad |= failure_reaches_waiter(dir);
    if (plx_barrier(c) != 0) {
        printf("rank %d: final barrier: %s\n", me, plx_last_error());
        bad = 1;
    }
    if (me == 0) {
        char p[200];
        for (int s = 1; s <= 2; s++) {
            flag_path(p, sizeof p, s);
            unlink(p);
        }
        char store[200];
        snprintf(store, sizeof store, "%s/store", dir);
        rm_tree(store);
        rmdir(dir);
    }
    plx_comm_destroy(c);
    printf("rank %d: %s\n", me, bad ? "FAILED" : "ok");
    return bad;
}
