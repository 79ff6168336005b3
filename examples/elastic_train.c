/* elastic_train - data-parallel training that loses a rank and goes on.
 *
 * Linear regression (D weights, N samples, fixed seed), full-batch SGD:
 * each rank takes its contiguous share of the N samples by its rank in the
 * current communicator, and an allreduce sums the partial gradients, so the
 * step is the same whatever the number of ranks (up to the order of f32
 * sums). Rank 0 writes a checkpoint (step, weights) every --ckpt-every
 * steps. The program starts --ranks rank processes over tcp (rank 0 hosts
 * the job's store) and one spare process:
 *   - at step --kill-step the launcher kill -9s rank --kill-rank in the
 *     middle of its step; the survivors' allreduce fails, they revoke the
 *     communicator, shrink it to the survivors (plx_comm_shrink), reload the
 *     last checkpoint and go on with their shares resharded over fewer ranks;
 *   - at step --join-step the ranks grow the communicator (plx_comm_grow);
 *     the spare process joins it (plx_comm_join), receives the weights and
 *     the step from rank 0, and trains with them.
 * At the end every rank checks that all ranks hold the same weights and that
 * they equal, within f32 tolerance, one process that trained the same steps
 * from the same checkpoints on the whole batch.
 *
 *   elastic_train [--ranks 4] [--steps 40] [--ckpt-every 5] [--kill-rank 2]
 *                 [--kill-step 13] [--join-step 25] [--dir DIR]
 * --kill-step 0 / --join-step 0: no kill / no join. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"

enum { D = 8, N = 96, MAX_RANKS = 16 };
#define LR 0.05f
#define TOL 1e-5
#define COMPUTE_US 20000

struct job {
    int ranks, steps, ckpt_every, kill_rank, kill_step, join_step, port;
    char ckpt[512];
    volatile int step[MAX_RANKS + 1]; /* the step each process is in (shared) */
    volatile int growing;             /* the ranks are at the grow: start the spare */
};

static float data_x[N][D], data_y[N];

static void make_data(void)
{
    unsigned s = 12345;
    float truth[D];
    for (int j = 0; j < D; j++)
        truth[j] = (float)(j % 3) - 0.5f;
    for (int i = 0; i < N; i++) {
        data_y[i] = 0;
        for (int j = 0; j < D; j++) {
            s = s * 1103515245u + 12345u;
            data_x[i][j] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
            data_y[i] += truth[j] * data_x[i][j];
        }
    }
}

/* The gradient of the mean squared error over samples [lo, hi), scaled by 1/N. */
static void gradient(const float *w, int lo, int hi, float *g)
{
    memset(g, 0, D * sizeof *g);
    for (int i = lo; i < hi; i++) {
        float e = -data_y[i];
        for (int j = 0; j < D; j++)
            e += w[j] * data_x[i][j];
        for (int j = 0; j < D; j++)
            g[j] += 2.0f * e * data_x[i][j] / N;
    }
}

static void sgd(float *w, const float *g)
{
    for (int j = 0; j < D; j++)
        w[j] -= LR * g[j];
}

static int save(const struct job *jb, int step, const float *w)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", jb->ckpt);
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(&step, sizeof step, 1, f) == 1 && fwrite(w, sizeof *w, D, f) == D;
    if (f)
        ok = !fclose(f) && ok;
    return ok && rename(tmp, jb->ckpt) == 0 ? 0 : -1;
}

static int load(const struct job *jb, int *step, float *w)
{
    FILE *f = fopen(jb->ckpt, "rb");
    int ok = f && fread(step, sizeof *step, 1, f) == 1 && fread(w, sizeof *w, D, f) == D;
    if (f)
        fclose(f);
    return ok ? 0 : -1;
}

/* One step on c: this rank's share of the batch, summed over the ranks. */
static int step_on(struct plx_comm *c, float *w)
{
    int r = plx_comm_rank(c), p = plx_comm_size(c);
    float g[D], sum[D];
    gradient(w, N * r / p, N * (r + 1) / p, g);
    usleep(COMPUTE_US); /* the rest of a real model's forward and backward */
    int rc = plx_allreduce(c, g, sum, D, PLX_F32, PLX_SUM);
    if (rc == 0)
        sgd(w, sum);
    return rc;
}

/* The communicator broke (a rank died): revoke it for everyone, shrink to
 * the survivors and go back to the last checkpoint. */
static int recover(const struct job *jb, struct plx_comm **c, int *step, float *w)
{
    struct plx_comm *n = NULL;
    plx_comm_revoke(*c);
    if (plx_comm_shrink(*c, &n) != 0)
        return fprintf(stderr, "shrink: %s\n", plx_last_error()), -1;
    plx_comm_destroy(*c);
    *c = n;
    if (load(jb, step, w) != 0)
        return fprintf(stderr, "rank %d: no checkpoint to go back to\n", plx_comm_rank(n)), -1;
    if (plx_comm_rank(n) == 0)
        printf("shrunk to %d ranks; back to the checkpoint of step %d\n", plx_comm_size(n), *step);
    return 0;
}

/* The ranks grow c by one (the newcomer has joined it already); the
 * newcomer gets the weights and the step from rank 0. */
static int grow(struct job *jb, struct plx_comm **c, int *step, float *w, int newcomer)
{
    struct plx_comm *g = NULL;
    if (!newcomer) {
        jb->growing = 1;
        if (plx_comm_grow(*c, plx_comm_size(*c) + 1, &g) != 0)
            return fprintf(stderr, "grow: %s\n", plx_last_error()), -1;
        plx_comm_destroy(*c);
        *c = g;
    }
    float state[D + 1];
    memcpy(state, w, sizeof(float) * D);
    state[D] = (float)*step;
    if (plx_broadcast(*c, state, D + 1, PLX_F32, 0) != 0)
        return fprintf(stderr, "broadcast after the grow: %s\n", plx_last_error()), -1;
    memcpy(w, state, sizeof(float) * D);
    *step = (int)state[D];
    if (plx_comm_rank(*c) == 0)
        printf("grew to %d ranks at step %d\n", plx_comm_size(*c), *step);
    return 0;
}

/* Everyone holds the same weights, equal to one process's training. */
static int check(struct plx_comm *c, const float *w, int steps)
{
    float lo[D], hi[D], ref[D] = {0}, g[D];
    int rc = plx_allreduce(c, w, lo, D, PLX_F32, PLX_MIN);
    if (rc == 0)
        rc = plx_allreduce(c, w, hi, D, PLX_F32, PLX_MAX);
    if (rc != 0)
        return fprintf(stderr, "final check: %s\n", plx_last_error()), -1;
    for (int s = 0; s < steps; s++) {
        gradient(ref, 0, N, g);
        sgd(ref, g);
    }
    double diff = 0, size = 0;
    for (int j = 0; j < D; j++) {
        diff = fmax(diff, fabs((double)w[j] - ref[j]));
        size = fmax(size, fabs((double)ref[j]));
    }
    int same = !memcmp(lo, hi, sizeof lo);
    if (plx_comm_rank(c) == 0)
        printf("%s: %d ranks hold %s weights; largest difference from one process: %.2g (relative %.2g, bound %.0e)\n",
               same && diff <= TOL * size ? "ok" : "FAIL", plx_comm_size(c), same ? "the same" : "DIFFERENT", diff,
               diff / size, TOL);
    return same && diff <= TOL * size ? 0 : -1;
}

static int train(struct job *jb, int me, struct plx_comm *c, int step, float *w)
{
    while (step < jb->steps) {
        if (jb->join_step && step == jb->join_step && plx_comm_size(c) < jb->ranks) {
            if (grow(jb, &c, &step, w, 0) != 0)
                return 1;
            continue;
        }
        jb->step[me] = step + 1;
        if (step_on(c, w) != 0) {
            if (recover(jb, &c, &step, w) != 0)
                return 1;
            continue;
        }
        step++;
        if (plx_comm_rank(c) == 0 && step % jb->ckpt_every == 0 && save(jb, step, w) != 0)
            return fprintf(stderr, "cannot write the checkpoint %s\n", jb->ckpt), 1;
    }
    int bad = check(c, w, jb->steps);
    plx_comm_destroy(c);
    return bad ? 1 : 0;
}

static void options(const struct job *jb, struct plx_comm_options *o, char *url, size_t n)
{
    snprintf(url, n, "tcp://127.0.0.1:%d", jb->port);
    plx_comm_options_init(o);
    o->init = url;
    o->backend = "tcp";
    o->timeout_ms = 60000;
}

static int run_rank(struct job *jb, int me)
{
    char url[64];
    struct plx_comm_options o;
    options(jb, &o, url, sizeof url);
    float w[D] = {0};
    struct plx_comm *c = NULL;
    if (me == jb->ranks) { /* the spare: joins when the ranks grow */
        while (!jb->growing)
            usleep(1000);
        int step = 0;
        if (plx_comm_join(&o, &c) != 0)
            return fprintf(stderr, "join: %s\n", plx_last_error()), 1;
        if (grow(jb, &c, &step, w, 1) != 0)
            return 1;
        return train(jb, me, c, step, w);
    }
    o.rank = o.local_rank = me;
    o.size = o.local_size = jb->ranks;
    if (plx_comm_init(&o, &c) != 0)
        return fprintf(stderr, "init: %s\n", plx_last_error()), 1;
    if (me == 0 && save(jb, 0, w) != 0)
        return fprintf(stderr, "cannot write the checkpoint %s\n", jb->ckpt), 1;
    if (plx_barrier(c) != 0) /* the first checkpoint is there for everyone */
        return fprintf(stderr, "barrier: %s\n", plx_last_error()), 1;
    return train(jb, me, c, 0, w);
}

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int parse(int argc, char **argv, struct job *jb)
{
    *jb = (struct job){.ranks = 4, .steps = 40, .ckpt_every = 5, .kill_rank = 2, .kill_step = 13, .join_step = 25};
    const char *dir = "/tmp";
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--ranks")) jb->ranks = v;
        else if (!strcmp(argv[i], "--steps")) jb->steps = v;
        else if (!strcmp(argv[i], "--ckpt-every")) jb->ckpt_every = v;
        else if (!strcmp(argv[i], "--kill-rank")) jb->kill_rank = v;
        else if (!strcmp(argv[i], "--kill-step")) jb->kill_step = v;
        else if (!strcmp(argv[i], "--join-step")) jb->join_step = v;
        else if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else return -1;
    }
    snprintf(jb->ckpt, sizeof jb->ckpt, "%s/elastic_train.%d.ckpt", dir, (int)getpid());
    int bad = jb->ranks < 2 || jb->ranks > MAX_RANKS || jb->ckpt_every < 1 || jb->steps < 1 || argc % 2 == 0;
    bad |= jb->kill_step && (jb->kill_rank < 1 || jb->kill_rank >= jb->ranks); /* rank 0 hosts the store */
    bad |= jb->join_step && jb->kill_step && jb->join_step <= jb->kill_step;
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    struct job *jb = mmap(NULL, sizeof *jb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (jb == MAP_FAILED || parse(argc, argv, jb) != 0 || (jb->port = free_port()) < 0) {
        fprintf(stderr, "usage: %s [--ranks 2..16] [--steps N] [--ckpt-every K] [--kill-rank 1..ranks-1] "
                "[--kill-step S] [--join-step S (after the kill)] [--dir DIR]\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    make_data();
    int procs = jb->ranks + (jb->join_step > 0);
    pid_t pid[MAX_RANKS + 1];
    for (int i = 0; i < procs; i++)
        if ((pid[i] = fork()) == 0)
            _exit(run_rank(jb, i));
    /* kill -9 in the middle of the step: the victim has started it */
    while (jb->kill_step && jb->step[jb->kill_rank] < jb->kill_step && !waitpid(pid[jb->kill_rank], NULL, WNOHANG))
        usleep(200);
    if (jb->kill_step) {
        kill(pid[jb->kill_rank], SIGKILL);
        printf("killed rank %d (kill -9) in step %d\n", jb->kill_rank, jb->step[jb->kill_rank]);
    }
    int bad = 0;
    for (int i = 0; i < procs; i++) {
        int st = 0;
        waitpid(pid[i], &st, 0);
        if (!(jb->kill_step && i == jb->kill_rank) && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            bad = 1;
    }
    unlink(jb->ckpt);
    return bad;
}
