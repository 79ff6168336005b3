/* shrink.c - plx_comm_shrink: the survivors of a communicator agree on who
 * is alive (agree.c) and build a new communicator of just them, ranks
 * renumbered in the old order, over the job's store and the same backend:
 * nothing of the old communicator's connections is needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "clock.h"
#include "comm.h"
#include "elastic.h"
#include "config.h"
#include "error.h"
#include "hier.h"
#include "log.h"
#include "store.h"

/* Whether c's backend builds the survivors' communicator itself (ABI 1.8). */
static int native_shrink(const struct plx_comm *c)
{
    return c->be->abi_minor >= 8 && c->be->ops.comm_shrink && (c->caps.flags & PLX_CAP_NATIVE_SHRINK);
}

/* ... and also finds the survivors itself: no agreement through the store. */
static int backend_agrees(const struct plx_comm *c)
{
    return native_shrink(c) && (c->caps.flags & PLX_CAP_SHRINK_AGREES);
}

/* Why c cannot shrink (or grow) on its backend: 0, or the error set. */
int plx__rebuild_refusal(const struct plx_comm *c, const char *what)
{
    if (!strcmp(what, "plx_comm_shrink") && (backend_agrees(c) || (native_shrink(c) && c->base_store)))
        return 0;
    if (!(c->caps.flags & PLX_CAP_SHRINK))
        return plx__err(PLX_ERR_UNSUPPORTED, "%s on '%s': backend %s cannot build a communicator of a new set of "
                        "ranks (no shrink capability; the backend says: %s)", what, c->name, c->be->name,
                        c->be->ops.description ? c->be->ops.description : "nothing");
    /* A newcomer cannot join a composed communicator (plx_comm_join). */
    if (c->hier && strcmp(what, "plx_comm_shrink") != 0)
        return plx__err(PLX_ERR_UNSUPPORTED, "%s on '%s': a hierarchical communicator (backend %s) cannot be "
                        "rebuilt yet", what, c->name, c->be->name);
    if (!c->base_store)
        return plx__err(PLX_ERR_UNSUPPORTED, "%s on '%s': backend %s bootstraps without the job's store, where "
                        "the ranks would meet", what, c->name, c->be->name);
    return 0;
}

/* [core] shrink_wait_ms in ns, read through c's options. */
int64_t plx__rebuild_wait_ns(struct plx_comm *c)
{
    int64_t v = 3000000000;
    plx__config_int_in(c->config, "core", "shrink_wait_ms", v, &v);
    return v > 0 ? v : 1;
}

/* How long the rendezvous of an agreed set may take: long enough for a
 * loaded machine, short enough that a member that died meanwhile costs a
 * bounded delay before the next round. */
static int64_t create_ms(const struct plx__agree *a)
{
    int64_t left = plx__ms_left(a->deadline_ns);
    int64_t want = 4 * a->wait_ns / 1000000;
    if (want < 10000)
        want = 10000;
    return left != PLX_TIMEOUT_INFINITE && left < want ? left : want;
}

/* A shrunk hierarchical communicator is composed again of the same
 * backends, inside and across hosts; hosts left holding different numbers
 * of ranks (known alike on every survivor) make it flat, as at init. */
static int recompose(struct plx_comm *c, struct plx_comm *n)
{
    struct plx__backend *intra = plx__hier_intra_backend(c);
    if (!intra)
        return 0;
    int rc = plx__hier_setup(n, intra);
    if (rc == PLX_ERR_UNSUPPORTED) {
        plx__log(PLX_LOG_WARN, "core", "comm '%s': no hierarchy, every collective on %s: %s", n->name, n->be->name,
                 plx_last_error());
        rc = 0;
    }
    return rc;
}

/* Build round a->round's communicator of the ranks in a->alive. */
static int build(struct plx_comm *c, const struct plx__agree *a, unsigned long long epoch, struct plx_comm **out)
{
    int rank = 0, size = 0;
    for (int i = 0; i < c->size; i++) {
        rank += i < c->rank && a->alive[i];
        size += a->alive[i];
    }
    char name[512], root[512], step[64];
    snprintf(step, sizeof step, "/shrink%llu", epoch);
    plx__child_name(name, sizeof name, c->name, step);
    snprintf(step, sizeof step, "/shrink%llu.%d", epoch, a->round);
    plx__child_key_root(root, sizeof root, c->key_root, step);
    struct plx__rebuild rb = {
        .name = name, .key_root = root, .rank = rank, .size = size, .be = c->be, .config = c->config,
        .base_store = c->base_store, .timeout_ms = c->timeout_ms, .create_ms = create_ms(a),
    };
    int rc = native_shrink(c) ? plx__comm_shrink_native(c, &rb, a->alive, 1, out) : plx__comm_rebuild(c, &rb, out);
    if (rc == 0 && (rc = recompose(c, *out)) != 0) {
        plx_comm_destroy(*out);
        *out = NULL;
    }
    return rc;
}

static void describe(const struct plx_comm *c, const unsigned char *alive, char *out, size_t n)
{
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < c->size && at + 16 < n; i++)
        if (!alive[i])
            at += (size_t)snprintf(out + at, n - at, "%s%d", at ? "," : "", i);
    if (!at)
        snprintf(out, n, "none");
}

static int shrink_rounds(struct plx_comm *c, struct plx__agree *a, unsigned long long epoch, struct plx_comm **out)
{
    for (;;) {
        int rc = plx__agree_alive(c, a);
        if (rc != 0)
            return rc;
        char failed[256];
        describe(c, a->alive, failed, sizeof failed);
        if ((rc = build(c, a, epoch, out)) == 0) {
            plx__log(PLX_LOG_INFO, "core", "comm '%s': rank %d shrank to '%s' (rank %d of %d) without ranks %s",
                     c->name, c->rank, (*out)->name, (*out)->rank, (*out)->size, failed);
            return 0;
        }
        char why[512];
        snprintf(why, sizeof why, "%s", plx_last_error());
        plx__log(PLX_LOG_WARN, "core", "comm '%s': the survivors without ranks %s could not meet (%s); agreeing "
                 "again", c->name, failed, why);
        if (plx__clock_ns() > a->deadline_ns)
            return plx__err(rc, "%s", why);
        if ((rc = plx__agree_retry(c, a)) != 0)
            return rc;
    }
}

/* The backend's own agreement finds the survivors while it builds their
 * communicator. */
static int shrink_by_backend(struct plx_comm *c, unsigned char *alive, unsigned long long epoch,
                                struct plx_comm **out)
{
    char name[512], step[64];
    snprintf(step, sizeof step, "/shrink%llu", epoch);
    plx__child_name(name, sizeof name, c->name, step);
    struct plx__rebuild rb = {
        .name = name, .rank = -1, .size = -1, .be = c->be, .config = c->config, .timeout_ms = c->timeout_ms,
        .create_ms = c->timeout_ms,
    };
    int rc = plx__comm_shrink_native(c, &rb, alive, 0, out);
    if (rc == 0 && (rc = recompose(c, *out)) != 0) {
        plx_comm_destroy(*out);
        *out = NULL;
    }
    if (rc == 0) {
        char failed[256];
        describe(c, alive, failed, sizeof failed);
        plx__log(PLX_LOG_INFO, "core", "comm '%s': rank %d shrank to '%s' (rank %d of %d) through %s without ranks "
                 "%s", c->name, c->rank, (*out)->name, (*out)->rank, (*out)->size, c->be->name, failed);
    }
    return rc;
}

PLX_API int plx_comm_shrink(struct plx_comm *c, struct plx_comm **out)
{
    plx__err_clear();
    if (!c || !out)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_comm_shrink: comm or out is NULL");
    *out = NULL;
    int rc = plx__rebuild_refusal(c, "plx_comm_shrink");
    if (rc != 0)
        return rc;
    unsigned long long epoch = (unsigned long long)c->rebuild_seq++;
    char ns[64];
    snprintf(ns, sizeof ns, "shrink%llu", epoch);
    struct plx__agree a = {.ns = ns, .wait_ns = plx__rebuild_wait_ns(c)};
    a.deadline_ns = plx__deadline_ms(c->timeout_ms);
    if (!(a.alive = calloc((size_t)c->size, 1)))
        return plx__err(PLX_ERR_NOMEM, "plx_comm_shrink: out of memory");
    if (backend_agrees(c))
        rc = shrink_by_backend(c, a.alive, epoch, out);
    else
        rc = shrink_rounds(c, &a, epoch, out);
    plx__agree_end(&a);
    free(a.alive);
    if (rc != 0) {
        plx__err_prefix("plx_comm_shrink(rank %d of '%s'): ", c->rank, c->name);
    }
    return rc;
}
