/* mismatch.c - ranks that call different collectives fail, every one of
 * them, with PLX_ERR_MISMATCH and a message naming both calls; nothing
 * hangs, nothing returns wrong data.
 *
 * Six cases, each on a fresh communicator where the last rank differs from
 * the others: count (8 against 6), kind (broadcast against allreduce), dtype
 * (f32 against i32), op (sum against max), root (0 against 1), and a large
 * count (4096 against 3072: first messages over 8 KiB, which carry the
 * fingerprint as their head on tcp, so one side's message overflows the
 * other's receive). Every rank
 * must see PLX_ERR_MISMATCH within 5 s (the timeout is 30 s) with both calls
 * in the message: from the collective itself or, for a rank that only sent
 * in it (the broadcast's root on the generic path cannot learn of the
 * mismatch before it returns), from its next operation. After that the
 * communicator refuses new work, naming the mismatch.
 *
 * The hierarchy (backend shm+tcp) runs steps that are not the user's calls
 * (8 against 6 elements on 3 ranks of one host run the same reduce_scatter):
 * hier is 3 processes on one host (the ranks' calls compared inside it);
 * hier-hosts is 4 processes as 2 "hosts" of 2 (each host its own UTS
 * namespace, which tells hosts apart for shm and the hierarchy; loopback
 * tcp between them), where both ranks of the second host differ, so only
 * the comparison across hosts sees it (exit 77 where no UTS namespace can
 * be made); hier-hosts-one is the same with the last rank alone differing,
 * so only its host's ranks can see it, while the first host's go on into
 * the step across hosts.
 *
 * Usage: mismatch sim|sim-generic|tcp|shm|hier   (3 ranks: threads, or processes)
 *        mismatch hier-hosts|hier-hosts-one      (4 processes, 2 "hosts")
 *        mismatch mpi BACKEND            (under mpirun, 2 ranks or more:
 *                                         [core] fingerprint_native = every)
 *
 * (The default mode, timeout, is not tested under MPI: the mpi plugin runs
 * a blocking collective as a blocking MPI call, so a mismatch wedges inside
 * MPI and no core timeout fires; plexus-top still shows where each rank
 * is.) */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define NCASE 6
#define LARGE 4096
#define NRANK 4 /* at most */
#define TIMEOUT_MS 30000

static const char *const case_name[NCASE] = {"count", "kind", "dtype", "op", "root", "large"};
/* What the others call, what the last rank calls (seq 0 of a fresh comm). */
static const char *const call_others[NCASE] = {
    "allreduce(seq 0, f32, sum, count 8)", "broadcast(seq 0, f32, count 8, root 0)",
    "allreduce(seq 0, f32, sum, count 8)", "allreduce(seq 0, f32, sum, count 8)",
    "broadcast(seq 0, f32, count 8, root 0)", "allreduce(seq 0, f32, sum, count 4096)"};
static const char *const call_last[NCASE] = {
    "allreduce(seq 0, f32, sum, count 6)", "allreduce(seq 0, f32, sum, count 8)",
    "allreduce(seq 0, i32, sum, count 8)", "allreduce(seq 0, f32, max, count 8)",
    "broadcast(seq 0, f32, count 8, root 1)", "allreduce(seq 0, f32, sum, count 3072)"};

struct shared {
    const char *mode;
    int nrank, first_odd; /* ranks first_odd.. call the other collective */
    char url[NCASE][96];
    int failures;
    int arrived[NCASE];
    char log[NRANK][4096];
};

#define FAIL(...) procs_report(log, cap, failures, __VA_ARGS__)

/* The hierarchy's set-up runs collectives on the communicator (host ids,
 * the splits), so the user's first call there is not seq 0: in hier modes a
 * call matches whatever its seq, the same on both sides of the message. */
static int any_seq;

/* Does msg name call ("kind(seq 0, rest")? */
static int names(const char *msg, const char *call)
{
    if (!any_seq)
        return strstr(msg, call) != NULL;
    const char *zero = strstr(call, "seq 0");
    size_t head = (size_t)(zero - call) + 4; /* "kind(seq " */
    for (const char *at = msg; *at; at++) {
        if (strncmp(at, call, head))
            continue;
        const char *p = at + head;
        if (*p < '0' || *p > '9')
            continue;
        while (*p >= '0' && *p <= '9')
            p++;
        if (!strncmp(p, zero + 5, strlen(zero + 5)))
            return 1;
    }
    return 0;
}

static const char *mpi_backend = "mpi";

static int call(struct plx_comm *c, int cs, int last)
{
    float f[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g[8];
    int32_t i[8] = {1, 2, 3, 4, 5, 6, 7, 8}, j[8];
    static _Thread_local float big[LARGE], big_out[LARGE];
    switch (cs) {
    case 0: return plx_allreduce(c, f, g, last ? 6 : 8, PLX_F32, PLX_SUM);
    case 1: return last ? plx_allreduce(c, f, g, 8, PLX_F32, PLX_SUM) : plx_broadcast(c, f, 8, PLX_F32, 0);
    case 2: return last ? plx_allreduce(c, i, j, 8, PLX_I32, PLX_SUM) : plx_allreduce(c, f, g, 8, PLX_F32, PLX_SUM);
    case 3: return plx_allreduce(c, f, g, 8, PLX_F32, last ? PLX_MAX : PLX_SUM);
    case 5: return plx_allreduce(c, big, big_out, last ? LARGE * 3 / 4 : LARGE, PLX_F32, PLX_SUM);
    default: return plx_broadcast(c, f, 8, PLX_F32, last ? 1 : 0);
    }
}

/* One case on communicator c; returns after checking this rank. */
static void check_case(struct plx_comm *c, int cs, int rank, int first_odd, char *log, size_t cap, int *failures)
{
    int last = rank >= first_odd;
    double t0 = now_s();
    int rc = call(c, cs, last), in_op = 1;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", plx_last_error());
    if (rc == 0) { /* only sent: the next operation must say it */
        in_op = 0;
        rc = plx_barrier(c);
        snprintf(msg, sizeof msg, "%s", plx_last_error());
    }
    double s = now_s() - t0;
    procs_report(log, cap, NULL, "rank %d %-5s: %s after %.2f s%s: %s\n", rank, case_name[cs], plx_err_name(rc), s,
                 in_op ? "" : " (in the next op)", msg);
    if (rc != PLX_ERR_MISMATCH || !strstr(msg, "does not match") || !names(msg, call_others[cs]) ||
        !names(msg, call_last[cs]))
        FAIL("rank %d %s: expected PLX_ERR_MISMATCH naming '%s' and '%s'\n", rank, case_name[cs], call_others[cs],
             call_last[cs]);
    if (s > 5)
        FAIL("rank %d %s: took %.1f s (more than 5 s)\n", rank, case_name[cs], s);
    float x = 1, y;
    rc = plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM);
    if (rc == 0 || !strstr(plx_last_error(), "does not match"))
        FAIL("rank %d %s: new work after the mismatch: %s: %s\n", rank, case_name[cs], plx_err_name(rc),
             plx_last_error());
}


static int open_comm(const char *mode, const char *url, const char *name, int rank, int size, struct plx_comm **c)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    static const char *const generic[] = {"sim.native_collectives=false", NULL};
    static const char *const every[] = {"core.fingerprint_native=every", NULL};
    o.name = name;
    o.timeout_ms = TIMEOUT_MS;
    if (!strcmp(mode, "mpi")) {
        o.backend = mpi_backend;
        o.overrides = every;
    } else {
        o.backend = !strcmp(mode, "tcp") || !strcmp(mode, "shm") ? mode : !strncmp(mode, "hier", 4) ? "shm+tcp" : "sim";
        o.init = url;
        o.rank = o.local_rank = rank;
        o.size = o.local_size = size;
        if (!strncmp(mode, "hier-hosts", 10)) { /* 2 "hosts" of size / 2 */
            o.local_rank = rank % (size / 2);
            o.local_size = size / 2;
        }
        if (!strcmp(mode, "sim-generic"))
            o.overrides = generic;
    }
    return plx_comm_init(&o, c);
}

static void wait_all(struct shared *sh, int cs, int size)
{
    __atomic_add_fetch(&sh->arrived[cs], 1, __ATOMIC_ACQ_REL);
    double until = now_s() + 20;
    while (__atomic_load_n(&sh->arrived[cs], __ATOMIC_ACQUIRE) < size && now_s() < until)
        usleep(2000);
}

/* This process on "host" host: a UTS namespace of its own named after it
 * (as root, or in a user namespace that maps this uid to itself). */
static int become_host(int host)
{
    if (unshare(CLONE_NEWUTS) != 0) {
        char map[64];
        int uid = (int)getuid(), gid = (int)getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWUTS) != 0)
            return -1;
        const char *files[3] = {"/proc/self/setgroups", "/proc/self/uid_map", "/proc/self/gid_map"};
        for (int i = 0; i < 3; i++) {
            if (i == 0)
                snprintf(map, sizeof map, "deny");
            else
                snprintf(map, sizeof map, "%d %d 1", i == 1 ? uid : gid, i == 1 ? uid : gid);
            int fd = open(files[i], O_WRONLY);
            if (fd < 0 || write(fd, map, strlen(map)) < 0) {
                if (fd >= 0)
                    close(fd);
                return -1;
            }
            close(fd);
        }
    }
    char name[32];
    snprintf(name, sizeof name, "plexus-test-host-%d", host);
    return sethostname(name, strlen(name));
}

static int rank_main(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    int *failures = &sh->failures;
    if (!strncmp(sh->mode, "hier-hosts", 10) && become_host(rank / (sh->nrank / 2)) != 0) {
        FAIL("rank %d: cannot make a UTS namespace\n", rank);
        return 1;
    }
    for (int cs = 0; cs < NCASE; cs++) {
        struct plx_comm *c = NULL;
        if (open_comm(sh->mode, sh->url[cs], case_name[cs], rank, sh->nrank, &c) != 0) {
            FAIL("rank %d %s: init: %s\n", rank, case_name[cs], plx_last_error());
            return 1;
        }
        check_case(c, cs, rank, sh->first_odd, log, cap, failures);
        wait_all(sh, cs, sh->nrank); /* rank 0 hosts the store the others may still read */
        plx_comm_destroy(c);
    }
    return 0;
}

static void *thread_main(void *p)
{
    struct shared *sh = ((void **)p)[0];
    rank_main((int)(intptr_t)((void **)p)[1], sh);
    return NULL;
}

/* Under mpirun: this process is one rank of 2. */
static int mpi_main(void)
{
    static char log[8192];
    size_t cap = sizeof log;
    int fails = 0, *failures = &fails;
    for (int cs = 0; cs < NCASE; cs++) {
        struct plx_comm *c = NULL;
        if (open_comm("mpi", NULL, case_name[cs], 0, 0, &c) != 0) {
            printf("init: %s\n", plx_last_error());
            return 1;
        }
        check_case(c, cs, plx_comm_rank(c), plx_comm_size(c) - 1, log, cap, failures);
        plx_comm_destroy(c);
    }
    printf("%s", log);
    plx_finalize();
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc >= 2 ? argv[1] : "";
    if (!strcmp(mode, "mpi")) {
        if (argc == 3)
            mpi_backend = argv[2];
        return mpi_main();
    }
    int hosts = !strcmp(mode, "hier-hosts") || !strcmp(mode, "hier-hosts-one");
    int procs_mode = !strcmp(mode, "tcp") || !strcmp(mode, "shm") || !strcmp(mode, "hier") || hosts;
    if (!procs_mode && strcmp(mode, "sim") && strcmp(mode, "sim-generic")) {
        fprintf(stderr, "usage: mismatch sim|sim-generic|tcp|shm|hier|hier-hosts|hier-hosts-one|mpi\n");
        return 2;
    }
    if (hosts) { /* can a child make a UTS namespace? */
        pid_t pid = fork();
        if (pid == 0)
            _exit(become_host(0) != 0);
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
            printf("SKIP: no UTS namespace can be made here (needs root or unprivileged user namespaces)\n");
            return 77;
        }
    }
    struct shared *sh = shared_alloc(sizeof *sh);
    if (!sh)
        return 1;
    sh->mode = mode;
    any_seq = !strncmp(mode, "hier", 4);
    sh->nrank = hosts ? 4 : 3;
    sh->first_odd = hosts && strcmp(mode, "hier-hosts-one") ? 2 : sh->nrank - 1;
    int bad = 0;
    if (procs_mode) {
        for (int cs = 0; cs < NCASE; cs++)
            snprintf(sh->url[cs], sizeof sh->url[cs], "tcp://127.0.0.1:%d", free_port());
        struct procs p;
        if (procs_start(&p, sh->nrank, rank_main, sh) != 0)
            return 1;
        procs_wait(&p, now_s() + 100);
        for (int r = 0; r < sh->nrank; r++)
            if (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r])) {
                printf("rank %d: %s\n", r, procs_describe(&p, r));
                bad = 1;
            }
    } else {
        for (int cs = 0; cs < NCASE; cs++)
            snprintf(sh->url[cs], sizeof sh->url[cs], "mem://mismatch-%d-%d", (int)getpid(), cs);
        pthread_t th[NRANK];
        void *args[NRANK][2];
        for (int r = 0; r < sh->nrank; r++) {
            args[r][0] = sh;
            args[r][1] = (void *)(intptr_t)r;
            pthread_create(&th[r], NULL, thread_main, args[r]);
        }
        for (int r = 0; r < sh->nrank; r++)
            pthread_join(th[r], NULL);
    }
    for (int r = 0; r < sh->nrank; r++)
        printf("%s", sh->log[r]);
    if (sh->failures || bad) {
        printf("FAIL: %d failure(s)\n", sh->failures);
        return 1;
    }
    printf("ok: every rank failed with the mismatch, naming both calls, in %s\n", mode);
    return 0;
}
