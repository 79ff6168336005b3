/* prepared.c - collectives prepared once and run many times
 * (plx_coll_prepare): the checks, the memory kind and the choice of path
 * are made at preparation; where the backend prepares its part too
 * (ABI 1.12), a run is the usability check, a sequence number, the flight
 * recorder's two entries and one call into the backend. Anything else runs
 * each time through the same path as the plain call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "diag_hooks.h"
#include "error.h"
#include "log.h"

struct plx_prepared {
    struct plx_comm *comm;       /* NULL once the communicator was destroyed */
    struct plx_coll_args call;   /* as the user made it: what a run through submit gets */
    struct plx_op_options opts;
    int has_opts;
    struct plx_coll_args direct; /* as the backend takes it (direct runs) */
    void *bp;                    /* the backend's prepared state, or NULL: each run through submit */
    struct plx__fp fp;           /* the user's call, for the flight recorder */
    const char *what;            /* its name, for errors */
    uint64_t bytes;
    struct plx_prepared *next;   /* the communicator's list (c->mu) */
};

static int preparable(int coll)
{
    return coll >= 0 && coll < PLX_COLL_SEND && coll != PLX_COLL_ALLTOALLV && coll != PLX_COLL_ALLGATHERV;
}

/* The backend's part, where it has one and takes this call. */
static void prepare_backend(struct plx_comm *c, struct plx_prepared *p)
{
    if (!c->be->ops.coll_prepare)
        return;
    if (c->be->ops.coll_prepare(c->bc, &p->direct, &p->bp) != 0)
        p->bp = NULL; /* declined (its reason is logged at debug level): every run through submit */
    if (p->bp)
        plx__log(PLX_LOG_DEBUG, "core", "%s on '%s': prepared in backend '%s'", p->what, c->name, c->be->name);
    else
        plx__log(PLX_LOG_DEBUG, "core", "%s on '%s': backend '%s' does not prepare it (%s); each run is a plain "
                 "call", p->what, c->name, c->be->name, plx_last_error());
    plx__err_clear(); /* a declined preparation is no failure of the call */
}

PLX_API int plx_coll_prepare(struct plx_comm *c, int coll, const void *send, void *recv, size_t count, int dtype,
                             int op, int root, const struct plx_op_options *o, struct plx_prepared **out)
{
    plx__err_clear();
    if (!out)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_coll_prepare: out is NULL");
    *out = NULL;
    if (!c)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_coll_prepare: comm is NULL");
    if (!preparable(coll))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_coll_prepare on '%s': %s cannot be prepared (the collectives "
                        "of plexus.h but the v-collectives)", c->name,
                        coll >= 0 && coll < PLX_COLL_COUNT ? plx_coll_name(coll) : "an unknown collective");
    struct plx_prepared *p = calloc(1, sizeof *p);
    if (!p)
        return plx__err(PLX_ERR_NOMEM, "plx_coll_prepare: out of memory");
    if (coll == PLX_COLL_BROADCAST) /* plx_broadcast's one buffer */
        send = recv;
    p->call = (struct plx_coll_args){.struct_size = sizeof p->call, .coll = coll, .send = send, .recv = recv,
                                     .count = count, .dtype = dtype, .op = op, .root = root, .timeout_ms = -1};
    if (o) {
        size_t n = o->struct_size < sizeof p->opts ? o->struct_size : sizeof p->opts;
        memcpy(&p->opts, o, n);
        p->opts.struct_size = (uint32_t)n;
        p->has_opts = 1;
    }
    p->direct = p->call;
    int direct = 0;
    int rc = plx__coll_plan(c, &p->direct, p->has_opts ? &p->opts : NULL, &direct);
    if (rc) {
        free(p);
        return rc;
    }
    p->comm = c;
    p->fp = plx__fp_of(&p->call);
    p->what = plx_coll_name(coll);
    p->bytes = coll == PLX_COLL_BARRIER ? 0 : count * plx_dtype_size(dtype);
    if (direct)
        prepare_backend(c, p);
    pthread_mutex_lock(&c->mu);
    p->next = c->prepared;
    c->prepared = p;
    pthread_mutex_unlock(&c->mu);
    *out = p;
    return 0;
}

/* A direct run's failure, as run_native reports one. */
static int direct_failed(struct plx_comm *c, const struct plx_prepared *p, uint64_t seq, int rc)
{
    plx__diag_state(c, seq, PLX__OP_FAILED, NULL);
    plx__err_prefix("%s(seq %llu) on '%s' [%s]: ", p->what, (unsigned long long)seq, c->name, c->be->name);
    if (!plx__breaks_comm(rc))
        return rc;
    char msg[sizeof c->failed_msg];
    snprintf(msg, sizeof msg, "%s", plx_last_error());
    return plx__comm_fail(c, rc, msg, sizeof msg);
}

static int gone(const struct plx_prepared *p, const char *what)
{
    return plx__err(!p ? PLX_ERR_INVALID_ARG : PLX_ERR_INVALID_USAGE, "%s: %s", what,
                    !p ? "prepared collective is NULL" : "its communicator was destroyed");
}

PLX_API int plx_prepared_run(struct plx_prepared *p)
{
    if (!p || !p->comm)
        return gone(p, "plx_prepared_run");
    struct plx_comm *c = p->comm;
    if (!p->bp) {
        struct plx_coll_args a = p->call;
        return plx__coll_submit(c, &a, p->has_opts ? &p->opts : NULL, NULL);
    }
    plx__err_clear();
    int rc = plx__check_usable(c, p->what);
    if (rc)
        return rc;
    struct plx__fp fp = p->fp; /* a copy: the prepared collective itself is only read */
    fp.seq = __atomic_fetch_add(&c->coll_seq, 1, __ATOMIC_RELAXED);
    plx__diag_post_running(c, &fp, p->bytes);
    if ((rc = c->be->ops.coll_run(c->bc, p->bp, fp.seq)) != 0)
        return direct_failed(c, p, fp.seq, rc);
    plx__diag_state(c, fp.seq, PLX__OP_DONE, NULL);
    return 0;
}

PLX_API int plx_prepared_start(struct plx_prepared *p, struct plx_work **w)
{
    if (!w)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_prepared_start: work is NULL");
    *w = NULL;
    if (!p || !p->comm)
        return gone(p, "plx_prepared_start");
    struct plx_coll_args a = p->call;
    return plx__coll_submit(p->comm, &a, p->has_opts ? &p->opts : NULL, w);
}

/* Off c's list and the backend's part ended (c->mu held). */
static void detach_locked(struct plx_comm *c, struct plx_prepared *p)
{
    for (struct plx_prepared **q = &c->prepared; *q; q = &(*q)->next)
        if (*q == p) {
            *q = p->next;
            break;
        }
    if (p->bp)
        c->be->ops.coll_unprepare(c->bc, p->bp);
    p->bp = NULL;
    p->comm = NULL;
}

PLX_API void plx_prepared_free(struct plx_prepared *p)
{
    if (!p)
        return;
    struct plx_comm *c = p->comm;
    if (c) {
        pthread_mutex_lock(&c->mu);
        detach_locked(c, p);
        pthread_mutex_unlock(&c->mu);
    }
    free(p);
}

void plx__prepared_drop_all(struct plx_comm *c)
{
    pthread_mutex_lock(&c->mu);
    while (c->prepared)
        detach_locked(c, c->prepared);
    pthread_mutex_unlock(&c->mu);
}
