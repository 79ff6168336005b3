/* ckpt_kill - a rank SIGKILLed in the middle of a save leaves the previous
 * checkpoint at the same path intact and loadable.
 *
 * Each iteration: 4 tcp processes save generation 1 (8 MiB a rank, with
 * fsync, so a save lasts long enough to be hit), agree, then save
 * generation 2 to the same path. The harness watches for the save's
 * temporary folder and SIGKILLs one rank a few milliseconds after it
 * appears. Afterwards the harness loads the path: it must load without
 * error and hold exactly one generation, and whenever a survivor's save
 * failed before the publication it must be generation 1, and the
 * survivors' errors must name the rank that died. At least one iteration must have hit the save before
 * its publication (otherwise the test proved nothing and fails). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/checkpoint.h"
#include "procs.h"

#define RANKS 4
#define PER_RANK ((size_t)2 << 20) /* f32 elements: 8 MiB a rank */
#define N (PER_RANK * RANKS)

struct shared {
    int port, victim;
    char path[512];
    /* Each rank: generation 1 saved by every rank and its barrier passed. A
     * rank leaves the barrier before the others may have, so one flag from
     * rank 0 let a kill land in another rank's generation-1 barrier. */
    volatile int gen1_done[RANKS];
    volatile int save2_rc[RANKS];
    volatile int save2_ended[RANKS];
    char msg[RANKS][600];
    int failures;
    char log[RANKS][1024];
};

static float value(int gen, size_t i)
{
    return (float)(gen * 1000 + (int)(i % 997));
}

static int save_gen(struct plx_comm *c, const char *path, int gen, float *buf)
{
    size_t lo = PER_RANK * (size_t)plx_comm_rank(c);
    for (size_t j = 0; j < PER_RANK; j++)
        buf[j] = value(gen, lo + j);
    struct plx_ckpt_item it;
    plx_ckpt_item_init(&it);
    it.name = "w";
    it.dtype = PLX_F32;
    it.ndim = 1;
    it.shape[0] = (int64_t)N;
    it.data = buf;
    it.offset = lo;
    it.count = PER_RANK;
    return plx_ckpt_save(c, path, &it, 1, NULL);
}

static int rank_main(int rank, void *arg)
{
    struct shared *sh = arg;
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", sh->port);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "tcp";
    o.init = url;
    o.rank = o.local_rank = rank;
    o.size = o.local_size = RANKS;
    o.timeout_ms = 5000;
    struct plx_comm *c = NULL;
    float *buf = malloc(PER_RANK * sizeof *buf);
    if (!buf || plx_comm_init(&o, &c) || save_gen(c, sh->path, 1, buf) || plx_barrier(c)) {
        procs_report(sh->log[rank], sizeof sh->log[rank], &sh->failures, "rank %d: generation 1: %s\n", rank,
                     plx_last_error());
        return 1;
    }
    __atomic_store_n(&sh->gen1_done[rank], 1, __ATOMIC_RELEASE);
    int rc = save_gen(c, sh->path, 2, buf);
    snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", rc ? plx_last_error() : "");
    sh->save2_rc[rank] = rc;
    __atomic_store_n(&sh->save2_ended[rank], 1, __ATOMIC_RELEASE);
    plx_comm_destroy(c);
    free(buf);
    return 0;
}

/* Which generation the path holds: 1 or 2, or -1 if it fails to load or
 * holds a mixture. */
static int loaded_gen(const char *path, float *buf, char *err, size_t cap)
{
    struct plx_ckpt_item it;
    plx_ckpt_item_init(&it);
    it.name = "w";
    it.dtype = PLX_F32;
    it.ndim = 1;
    it.shape[0] = (int64_t)N;
    it.data = buf;
    it.count = N;
    if (plx_ckpt_load(NULL, path, &it, 1, NULL)) {
        snprintf(err, cap, "%s", plx_last_error());
        return -1;
    }
    for (int g = 1; g <= 2; g++) {
        size_t i = 0;
        while (i < N && buf[i] == value(g, i))
            i++;
        if (i == N)
            return g;
    }
    snprintf(err, cap, "the data is neither generation 1 nor 2");
    return -1;
}

int main(void)
{
    char root[] = "/tmp/plexus-ckpt-kill-XXXXXX", tmp[600];
    /* The build tree's disk rather than a tmpfs: fsync takes real time. */
    const char *b = getenv("PLEXUS_BUILD_ROOT");
    char rootb[600];
    snprintf(rootb, sizeof rootb, "%s/plexus-ckpt-kill-XXXXXX", b ? b : "/tmp");
    char *r = mkdtemp(b ? rootb : root);
    if (!r)
        return 1;
    struct shared *sh = shared_alloc(sizeof *sh);
    float *buf = malloc(N * sizeof *buf);
    if (!sh || !buf)
        return 1;
    snprintf(sh->path, sizeof sh->path, "%s/ck", r);
    snprintf(tmp, sizeof tmp, "%s.tmp", sh->path);
    const int victims[] = {2, 0, 3, 1, 2, 0};
    const int delay_us[] = {0, 2000, 0, 5000, 1000, 0};
    int failures = 0, hit = 0;
    for (int iter = 0; iter < 6; iter++) {
        memset(sh, 0, sizeof *sh);
        snprintf(sh->path, sizeof sh->path, "%s/ck", r);
        sh->victim = victims[iter];
        if ((sh->port = free_port()) < 0)
            return 1;
        struct procs p;
        if (procs_start(&p, RANKS, rank_main, sh))
            return 1;
        /* Wait for generation 1, then for the second save's folder. */
        double until = now_s() + 30;
        for (int k = 0; k < RANKS; k++)
            while (!__atomic_load_n(&sh->gen1_done[k], __ATOMIC_ACQUIRE) && now_s() < until && !sh->failures)
                usleep(200);
        struct stat st;
        while (stat(tmp, &st) != 0 && now_s() < until && !sh->save2_ended[0])
            usleep(100);
        if (delay_us[iter])
            usleep((useconds_t)delay_us[iter]);
        kill(p.pid[sh->victim], SIGKILL);
        procs_wait(&p, now_s() + 30);
        int survivors_failed = 0, named = 1;
        for (int k = 0; k < RANKS; k++) {
            if (k == sh->victim)
                continue;
            if (p.hung[k] || !WIFEXITED(p.status[k]) || WEXITSTATUS(p.status[k])) {
                printf("iteration %d: rank %d: %s\n%s", iter, k, procs_describe(&p, k), sh->log[k]);
                failures++;
            }
            if (sh->save2_ended[k] && sh->save2_rc[k]) {
                survivors_failed = 1;
                char want[32];
                snprintf(want, sizeof want, "rank %d", sh->victim);
                if (!strstr(sh->msg[k], want) && sh->save2_rc[k] != PLX_ERR_REMOTE)
                    named = 0, printf("iteration %d: rank %d's error does not name rank %d: %s\n", iter, k,
                                      sh->victim, sh->msg[k]);
            }
        }
        char err[1024] = "";
        int g = loaded_gen(sh->path, buf, err, sizeof err);
        printf("iteration %d: killed rank %d %d us after %s appeared; survivors' save %s; the path holds %s%s%s\n",
               iter, sh->victim, delay_us[iter], "the temporary folder", survivors_failed ? "failed" : "succeeded",
               g < 0 ? "nothing loadable: " : g == 1 ? "generation 1 (the previous checkpoint)" : "generation 2",
               g < 0 ? err : "", "");
        if (survivors_failed)
            printf("  e.g. %s\n", sh->msg[sh->victim == 0 ? 1 : 0]);
        /* A kill after the rename but before the last agreement: the
         * survivors report it, and the new checkpoint is whole. */
        const char *m = sh->msg[sh->victim == 0 ? 1 : 0];
        if (g < 0 || (survivors_failed && g == 2 && !strstr(m, "(publish)")) || !named)
            failures++;
        hit += survivors_failed && g == 1;
    }
    if (!hit) {
        printf("FAIL: no kill landed before the publication; the test proved nothing\n");
        failures++;
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", r);
    if (system(cmd))
        printf("could not remove %s\n", r);
    printf("%s (%d of 6 kills landed mid-save)\n", failures ? "FAIL" : "ok: a kill mid-save never broke the checkpoint",
           hit);
    free(buf);
    return failures != 0;
}
