#include "ranks.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct job {
    struct rank_ctx ctx;
    const char *backend, *init;
    const char *const *overrides;
    int64_t timeout_ms;
    int (*fn)(struct rank_ctx *, int);
    int result;
};

int join_rank(const char *backend, const char *init, int rank, int size, int64_t timeout_ms,
              const char *const *overrides, struct plx_comm **c)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend;
    o.init = init;
    o.rank = rank;
    o.size = size;
    o.timeout_ms = timeout_ms;
    o.overrides = overrides;
    return plx_comm_init(&o, c);
}

static void *rank_main(void *p)
{
    struct job *j = p;
    int rc = join_rank(j->backend, j->init, j->ctx.rank, j->ctx.size, j->timeout_ms, j->overrides, &j->ctx.comm);
    if (rc)
        j->ctx.comm = NULL;
    j->result = j->fn(&j->ctx, rc);
    plx_comm_destroy(j->ctx.comm);
    return NULL;
}

int run_ranks(int size, const char *backend, const char *const *overrides, int64_t timeout_ms,
              int (*fn)(struct rank_ctx *, int), void *arg)
{
    static int counter;
    char init[96];
    snprintf(init, sizeof init, "mem://test-%d-%d", (int)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    struct job *jobs = calloc((size_t)size, sizeof *jobs);
    pthread_t *th = calloc((size_t)size, sizeof *th);
    for (int i = 0; i < size; i++) {
        jobs[i] = (struct job){.ctx = {NULL, i, size, arg}, .backend = backend, .init = init,
                               .overrides = overrides, .timeout_ms = timeout_ms, .fn = fn};
        pthread_create(&th[i], NULL, rank_main, &jobs[i]);
    }
    int worst = 0;
    for (int i = 0; i < size; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].result > worst)
            worst = jobs[i].result;
    }
    free(jobs);
    free(th);
    return worst;
}
