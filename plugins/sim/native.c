/* native.c - the model's native collectives: with [sim]
 * model_intra_native = shm, allreduce and allgather run as one collective
 * of the backend, not as the core's generic algorithms over messages, and
 * take the time plexus's shm transport's own collectives take by their
 * schedule (sim_model_native_ns). The ranks meet in the world; the last to
 * arrive moves the data for all and completes every rank's request at the
 * same virtual time: the latest arrival plus the schedule's cost. Coroutine
 * ranks and threads alike wait for it as for a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* The reduction or the gather, done by one rank for every rank. */
static int move_data(struct impl *c, struct sim_req **reqs)
{
    const struct plx_coll_args *a = &reqs[0]->args;
    size_t es = sim_dtype_size(a->dtype), bytes = a->count * es;
    int P = c->size;
    if (!c->model->payload && bytes > PLX_TIMING_EXACT_BYTES) /* timing only: no data */
        return 0;
    if (a->coll == PLX_COLL_ALLGATHER) {
        for (int d = 0; d < P; d++)
            for (int s = 0; s < P; s++)
                memmove((char *)reqs[d]->args.recv + (size_t)s * bytes, reqs[s]->args.send, bytes);
        return 0;
    }
    char *acc = sim_scratch(c, bytes);
    if (!acc)
        return sim_error(c, PLX_ERR_NOMEM, "sim: out of memory");
    memcpy(acc, reqs[0]->args.send, bytes);
    for (int s = 1; s < P; s++) {
        int rc = c->host->reduce(acc, reqs[s]->args.send, a->count, a->dtype, a->op);
        if (rc)
            return sim_error(c, rc, "sim: the core's reduction kernel refused dtype %d op %d", a->dtype, a->op);
    }
    if (a->op == PLX_AVG) {
        int rc = c->host->scale_div(acc, a->count, a->dtype, (uint64_t)P);
        if (rc)
            return sim_error(c, rc, "sim: the core's kernel cannot divide dtype %d", a->dtype);
    }
    for (int d = 0; d < P; d++)
        memcpy(reqs[d]->args.recv, acc, bytes);
    return 0;
}

int sim_native_model(struct impl *c, const struct plx_coll_args *a, void **req)
{
    struct world *w = c->w;
    int P = c->size;
    struct sim_req *r = sim_req_new(c);
    if (!r)
        return sim_error(c, PLX_ERR_NOMEM, "sim: out of memory");
    r->is_coll = 1;
    r->timed = 1;
    r->owner = c->rank;
    r->args = *a;
    pthread_mutex_lock(&w->mu);
    if (!w->native_reqs && !(w->native_reqs = calloc((size_t)P, sizeof *w->native_reqs))) {
        sim_req_release_locked(c, r);
        pthread_mutex_unlock(&w->mu);
        return sim_error(c, PLX_ERR_NOMEM, "sim: out of memory");
    }
    if (w->native_arrived == 0 || *c->clock_ns > w->native_start_ns)
        w->native_start_ns = *c->clock_ns;
    w->native_reqs[c->rank] = r;
    if (++w->native_arrived == P) {
        /* Every rank's call is here: check that they agree, then the data. */
        int rc = 0;
        for (int s = 1; s < P && !rc; s++) {
            const struct plx_coll_args *x = &w->native_reqs[s]->args, *y = &w->native_reqs[0]->args;
            if (x->coll != y->coll || x->count != y->count || x->dtype != y->dtype ||
                (x->coll == PLX_COLL_ALLREDUCE && x->op != y->op))
                rc = sim_error(c, PLX_ERR_MISMATCH, "sim: rank %d called %s of %zu elements, rank 0 %s of %zu",
                               s, sim_coll_name(x->coll), (size_t)x->count, sim_coll_name(y->coll),
                               (size_t)y->count);
        }
        if (!rc)
            rc = move_data(c, w->native_reqs);
        double end = w->native_start_ns + sim_model_native_ns(c, a);
        for (int s = 0; s < P; s++) {
            struct sim_req *q = w->native_reqs[s];
            struct impl *m = w->members[s];
            q->t_done = end;
            q->status = rc;
            if (rc)
                snprintf(q->err, sizeof q->err, "%s", sim_last_error(c));
            q->done = 1;
            w->native_reqs[s] = NULL;
            if (q->freed) { /* its rank gave up waiting (a timeout) and the core let it go */
                if (m)
                    sim_req_release_locked(m, q);
                else
                    free(q);
            } else if (m && m != c) {
                pthread_cond_broadcast(&m->cv);
                if (m->fiber)
                    sim_fiber_wake(m->fiber, end);
            }
        }
        w->native_arrived = 0;
    }
    pthread_mutex_unlock(&w->mu);
    *req = r;
    return 0;
}
