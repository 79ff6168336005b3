/* churn.c [ROUNDS] - nothing left behind: 4 tcp processes create, split,
 * use and destroy a communicator ROUNDS times (1600 by default) on one
 * store, the way a job that re-creates its groups does. A destroyed
 * communicator's keys must leave the store, so every rank's resident
 * memory (rank 0's holds the store) must stay within 1 MB of its value at
 * round 100, and no rank may hold a descriptor more than it did then.
 * Rank 0's store outlives its communicators (store_tcp_hosted.c) and drops
 * a peer's connection when it reads the peer's close, a moment later; so
 * the counts are taken with every rank between rounds and after that
 * server has settled. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define RANKS 4
#define WARM_ROUND 100
#define SLACK_BYTES (1024 * 1024)

struct shared {
    int port, rounds;
    long rss_warm[RANKS], rss_end[RANKS];
    int fds_warm[RANKS], fds_end[RANKS];
    int done; /* ranks through their rounds: rank 0 hosts the store, so it stays until all are */
    int paused[2], resumed[2]; /* the two counts' meeting points: at WARM_ROUND and at the end */
    int failures;
    char log[RANKS][2048];
};

static long resident_bytes(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * sysconf(_SC_PAGESIZE);
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n - 1; /* the one opendir holds */
}

/* The fewest descriptors seen once the count has held still for 300 ms
 * (at most 5 s): the store server closes its dropped peers' sockets. */
static int settled_fds(void)
{
    int least = open_fds(), last = least;
    double still_since = now_s(), until = still_since + 5;
    while (now_s() - still_since < 0.3 && now_s() < until) {
        usleep(10000);
        int n = open_fds();
        if (n != last)
            still_since = now_s();
        last = n;
        least = n < least ? n : least;
    }
    return least;
}

/* Count this rank in and wait (at most 60 s) until all RANKS are. */
static void meet_all(int *arrived)
{
    __atomic_add_fetch(arrived, 1, __ATOMIC_ACQ_REL);
    for (double until = now_s() + 60; __atomic_load_n(arrived, __ATOMIC_ACQUIRE) < RANKS && now_s() < until;)
        usleep(1000);
}

/* Every rank waits here between rounds, counts once the store is quiet,
 * and goes on only when all have counted (a next round would connect). */
static void count_between_rounds(struct shared *sh, int at, long *rss, int *fds)
{
    meet_all(&sh->paused[at]);
    *rss = resident_bytes();
    *fds = settled_fds();
    meet_all(&sh->resumed[at]);
}

static int one_round(int rank, struct shared *sh, char *log)
{
    struct plx_comm *world = NULL, *half = NULL;
    if (procs_open(rank, RANKS, sh->port, "tcp", 20000, log, sizeof sh->log[0], &sh->failures, &world) != 0)
        return 1;
    int v = rank + 1, sum = 0, rc = plx_comm_split(world, rank % 2, rank, &half);
    if (rc == 0)
        rc = plx_allreduce(half, &v, &sum, 1, PLX_I32, PLX_SUM);
    if (rc == 0 && sum != (rank % 2 ? 2 + 4 : 1 + 3))
        procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d: allreduce gave %d\n", rank, sum);
    if (rc != 0)
        procs_report(log, sizeof sh->log[0], &sh->failures, "rank %d: %s\n", rank, plx_last_error());
    if (half)
        plx_comm_destroy(half);
    plx_comm_destroy(world);
    return rc != 0;
}

static int rank_main(int rank, void *arg)
{
    struct shared *sh = arg;
    for (int i = 1; i <= sh->rounds; i++) {
        if (one_round(rank, sh, sh->log[rank]) != 0) {
            procs_report(sh->log[rank], sizeof sh->log[0], NULL, "rank %d: round %d failed\n", rank, i);
            for (int at = 0; at < 2; at++) { /* no one waits for this rank */
                __atomic_add_fetch(&sh->paused[at], RANKS, __ATOMIC_ACQ_REL);
                __atomic_add_fetch(&sh->resumed[at], RANKS, __ATOMIC_ACQ_REL);
            }
            __atomic_add_fetch(&sh->done, RANKS, __ATOMIC_ACQ_REL);
            return 1;
        }
        if (i == WARM_ROUND)
            count_between_rounds(sh, 0, &sh->rss_warm[rank], &sh->fds_warm[rank]);
    }
    count_between_rounds(sh, 1, &sh->rss_end[rank], &sh->fds_end[rank]);
    meet_all(&sh->done);
    return 0;
}

int main(int argc, char **argv)
{
    struct shared *sh = shared_alloc(sizeof *sh);
    sh->rounds = argc > 1 ? atoi(argv[1]) : 1600;
    if (sh->rounds <= WARM_ROUND) {
        fprintf(stderr, "usage: churn [ROUNDS > %d]\n", WARM_ROUND);
        return 2;
    }
    if ((sh->port = free_port()) < 0) {
        fprintf(stderr, "no free port\n");
        return 1;
    }
    struct procs p;
    double t0 = now_s();
    if (procs_start(&p, RANKS, rank_main, sh) != 0)
        return 1;
    procs_wait(&p, t0 + 600);
    int ended_badly = procs_bad_ends(&p, stdout, "FAILED: "), bad = ended_badly;
    for (int r = 0; r < RANKS; r++)
        fputs(sh->log[r], stdout);
    printf("%d rounds of init, split, allreduce, destroy on 4 tcp ranks in %.1f s\n", sh->rounds, now_s() - t0);
    for (int r = 0; r < RANKS && !ended_badly; r++) {
        long grew = sh->rss_end[r] - sh->rss_warm[r];
        printf("rank %d: resident %.2f MB at round %d, %.2f MB at round %d (%+ld KB); descriptors %d, then %d\n", r,
               sh->rss_warm[r] / 1048576.0, WARM_ROUND, sh->rss_end[r] / 1048576.0, sh->rounds, grew / 1024,
               sh->fds_warm[r], sh->fds_end[r]);
        if (grew > SLACK_BYTES) {
            printf("FAILED: rank %d grew by %ld KB (more than 1 MB)\n", r, grew / 1024);
            bad++;
        }
        if (sh->fds_end[r] > sh->fds_warm[r]) {
            printf("FAILED: rank %d holds %d descriptor(s) more\n", r, sh->fds_end[r] - sh->fds_warm[r]);
            bad++;
        }
    }
    if (!bad)
        printf("ok\n");
    return bad ? 1 : 0;
}
