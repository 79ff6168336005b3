/* world.c - the shared world of a sim communicator: joining through the
 * store, the generation barrier the native collectives use, and waits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

/* Worlds are found by id, never by a pointer read from the store, so a
 * late rank cannot touch a world that was already freed. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct world *registry;
static uint64_t next_id;

struct timespec sim_abstime(uint64_t deadline_ns)
{
    struct timespec ts = {(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
    return ts;
}

static uint64_t deadline_after(int64_t ms)
{
    return plx_plugin_deadline(ms);
}

void sim_wake_all(struct world *w)
{
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static struct world *world_new(int size)
{
    struct world *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->slot = calloc((size_t)size, sizeof *w->slot);
    w->members = calloc((size_t)size, sizeof *w->members);
    w->arrive_gen = calloc((size_t)size, sizeof *w->arrive_gen);
    w->ever_joined = calloc((size_t)size, sizeof *w->ever_joined);
    w->calls[0] = calloc(2 * (size_t)size, sizeof *w->calls[0]);
    w->calls[1] = w->calls[0] ? w->calls[0] + size : NULL;
    w->sends_to = calloc(2 * (size_t)size, sizeof *w->sends_to);
    w->recvs_at = w->sends_to ? w->sends_to + size : NULL;
    if (!w->slot || !w->members || !w->arrive_gen || !w->ever_joined || !w->calls[0] || !w->sends_to) {
        free(w->sends_to);
        free(w->calls[0]);
        free(w->ever_joined);
        free(w->arrive_gen);
        free(w->slot);
        free(w->members);
        free(w);
        return NULL;
    }
    w->size = size;
    pthread_mutex_init(&w->mu, NULL);
    plx_plugin_cond_init(&w->cv); /* CLOCK_MONOTONIC, as the deadlines */
    return w;
}

static void missing_ranks(struct world *w, char *out, size_t len)
{
    out[0] = '\0';
    for (int i = 0; i < w->size; i++)
        if (!w->ever_joined[i]) {
            size_t l = strlen(out);
            snprintf(out + l, len - l, "%s%d", l ? "," : "", i);
        }
}

/* A new world for args' communicator, published in its store. */
static int world_make(const struct plx_comm_args *args, struct impl *c, struct world **out)
{
    struct world *w = world_new(args->size);
    if (!w)
        return sim_error(c, PLX_ERR_NOMEM, "sim: out of memory");
    if (c->fiber) { /* its others come from the same scheduler: world_take_seat */
        w->sched = sim_fiber_sched(c->fiber);
        w->run_slots = sim_fiber_count(c->fiber);
    }
    memcpy(&w->model, &c->cfg.model, sizeof w->model); /* its maker is its first member */
    pthread_mutex_lock(&registry_mu);
    w->id = ++next_id;
    w->refs = 1;
    w->next = registry;
    registry = w;
    pthread_mutex_unlock(&registry_mu);
    int rc = c->host->store_set(args->store, "sim/world", &w->id, sizeof w->id);
    if (rc != 0) {
        c->w = w;
        sim_world_leave(c);
        return rc;
    }
    *out = w;
    return 0;
}

/* The world another rank made (val: its id from the store, if read
 * already), held by one more reference. */
static int world_find(const struct plx_comm_args *args, struct impl *c, void *val, size_t len, struct world **out)
{
    const struct plx_host *h = c->host;
    int rc;
    if (!c->fiber && (rc = h->store_get(args->store, "sim/world", &val, &len, plx_plugin_create_ms(args))) != 0)
        return sim_error(c, rc, "sim: rank %d of '%s': rank 0 never created the world (waited %lld ms)", args->rank,
                         args->name, (long long)plx_plugin_create_ms(args));
    uint64_t id = 0;
    if (len == sizeof id)
        memcpy(&id, val, sizeof id);
    h->free(val);
    struct world *w;
    pthread_mutex_lock(&registry_mu);
    for (w = registry; w && w->id != id; w = w->next)
        ;
    if (w)
        w->refs++;
    pthread_mutex_unlock(&registry_mu);
    if (!w)
        return sim_error(c, PLX_ERR_PEER_LOST, "sim: the world of '%s' is gone (rank 0 left)", args->name);
    if (w->size != args->size) {
        c->w = w;
        sim_world_leave(c);
        return sim_error(c, PLX_ERR_INVALID_ARG, "sim: rank %d says size %d, rank 0 says %d", args->rank, args->size,
                         w->size);
    }
    *out = w;
    return 0;
}

/* Take args' rank in c's world; a thread rank waits until every rank has. */
static int world_take_seat(const struct plx_comm_args *args, struct impl *c)
{
    struct world *w = c->w;
    uint64_t deadline = deadline_after(plx_plugin_create_ms(args));
    struct timespec ts = sim_abstime(deadline);
    if (w->sched && (!c->fiber || sim_fiber_sched(c->fiber) != w->sched)) {
        sim_world_leave(c);
        return sim_error(c, PLX_ERR_INVALID_USAGE, "sim: rank %d of '%s' joins from another thread, but its ranks "
                         "are the coroutines of one plexus_sim_run_ranks, which share no lock", args->rank, args->name);
    }
    pthread_mutex_lock(&w->mu);
    if (w->members[args->rank]) {
        pthread_mutex_unlock(&w->mu);
        sim_world_leave(c);
        return sim_error(c, PLX_ERR_INVALID_ARG, "sim: two threads claim rank %d of '%s'", args->rank, args->name);
    }
    w->members[args->rank] = c;
    w->ever_joined[args->rank] = 1;
    if (!memcmp(&w->model, &c->cfg.model, sizeof w->model))
        c->model = &w->model;
    if (++w->joined == w->size) /* waking each joiner would cost size^2 wake-ups */
        pthread_cond_broadcast(&w->cv);
    /* A coroutine rank goes on at once: the ranks after it join only when
     * it waits, and a message to a rank not yet joined waits in its list. */
    while (w->joined < w->size && !c->fiber) {
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT && w->joined < w->size) {
            char miss[256];
            missing_ranks(w, miss, sizeof miss);
            w->members[args->rank] = NULL;
            w->joined--;
            pthread_mutex_unlock(&w->mu);
            sim_world_leave(c);
            return sim_error(c, PLX_ERR_TIMEOUT, "sim: rank %d waited %lld ms for rank(s) %s to join '%s'", args->rank,
                             (long long)plx_plugin_create_ms(args), miss, args->name);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}

int sim_world_join(const struct plx_comm_args *args, struct impl *c)
{
    if (!args->store)
        return sim_error(c, PLX_ERR_INVALID_USAGE,
                         "sim: ranks are threads of one process and meet through an in-process store: "
                         "pass init \"mem://NAME\" (same NAME on every rank)");
    struct world *w = NULL;
    void *val = NULL;
    size_t len = 0;
    int make = args->rank == 0;
    /* One thread runs every coroutine rank, so none may block here for
     * another: whichever rank comes first makes the world (a split's rank
     * 0 may come after its others). */
    if (c->fiber)
        make = c->host->store_get(args->store, "sim/world", &val, &len, 0) != 0;
    int rc = make ? world_make(args, c, &w) : world_find(args, c, val, len, &w);
    if (rc != 0)
        return rc;
    c->w = w;
    return world_take_seat(args, c);
}

void sim_world_leave(struct impl *c)
{
    struct world *w = c->w;
    if (!w)
        return;
    c->model = &c->cfg.model; /* w's copy may go with w */
    pthread_mutex_lock(&w->mu);
    if (w->members[c->rank] == c)
        w->members[c->rank] = NULL;
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_lock(&registry_mu);
    int last = --w->refs == 0;
    if (last)
        for (struct world **p = &registry; *p; p = &(*p)->next)
            if (*p == w) {
                *p = w->next;
                break;
            }
    pthread_mutex_unlock(&registry_mu);
    if (last) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w->slot);
        free(w->calls[0]);
        free(w->members);
        free(w->arrive_gen);
        free(w->ever_joined);
        free(w->egress_free);
        free(w->native_reqs);
        free(w->sends_to);
        free(w);
    }
    c->w = NULL;
}

void sim_world_break(struct world *w, int status, const char *msg)
{
    pthread_mutex_lock(&w->mu);
    if (!w->broken) {
        w->broken = status;
        snprintf(w->broken_msg, sizeof w->broken_msg, "%s", msg);
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Ranks (other than the caller) that have not reached generation gen + 1,
 * as "1,3". */
static void late_ranks(struct world *w, int self, uint64_t gen, char *out, size_t len)
{
    out[0] = '\0';
    for (int i = 0; i < w->size; i++)
        if (i != self && w->arrive_gen[i] != gen + 1) {
            size_t l = strlen(out);
            snprintf(out + l, len - l, "%s%d", l ? "," : "", i);
        }
}

/* All ranks meet here between the phases of a native collective. */
int sim_barrier(struct impl *c, const char *what, uint64_t deadline_ns, int64_t timeout_ms)
{
    struct world *w = c->w;
    struct timespec ts = sim_abstime(deadline_ns);
    pthread_mutex_lock(&w->mu);
    if (w->broken) {
        int st = w->broken;
        pthread_mutex_unlock(&w->mu);
        return sim_error(c, st, "sim: %s on rank %d: %s", what, c->rank, w->broken_msg);
    }
    uint64_t gen = w->generation;
    w->arrive_gen[c->rank] = gen + 1;
    if (++w->arrived == w->size) {
        w->arrived = 0;
        w->next_item = 0; /* the next phase's work items */
        w->generation++;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        return 0;
    }
    if (w->lingering)
        pthread_cond_broadcast(&w->cv);
    int rc = 0;
    while (w->generation == gen && !w->broken) {
        if (c->aborted) {
            rc = PLX_ERR_ABORTED;
            break;
        }
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT && w->generation == gen) {
            rc = PLX_ERR_TIMEOUT;
            break;
        }
    }
    if (w->generation == gen && !rc)
        rc = w->broken;
    char msg[200] = "", late[128] = "";
    if (rc == PLX_ERR_TIMEOUT)
        late_ranks(w, c->rank, gen, late, sizeof late);
    if (rc == PLX_ERR_TIMEOUT || rc == PLX_ERR_ABORTED) {
        if (rc == PLX_ERR_TIMEOUT)
            snprintf(msg, sizeof msg, "rank %d waited %lld ms for rank(s) %s in %s", c->rank,
                     (long long)timeout_ms, late, what);
        else
            snprintf(msg, sizeof msg, "rank %d aborted in %s", c->rank, what);
        if (!w->broken) { /* the others cannot complete this collective either */
            w->broken = rc == PLX_ERR_ABORTED ? PLX_ERR_REMOTE : rc;
            snprintf(w->broken_msg, sizeof w->broken_msg, "%s", msg);
        }
        pthread_cond_broadcast(&w->cv);
    } else if (rc) {
        snprintf(msg, sizeof msg, "%s", w->broken_msg);
    }
    pthread_mutex_unlock(&w->mu);
    if (rc == PLX_ERR_TIMEOUT)
        return sim_error(c, rc, "sim: %s", msg);
    if (rc)
        return sim_error(c, rc, "sim: %s on rank %d: %s", what, c->rank, msg);
    return 0;
}

/* A rank that fails midway does not arrive at the next barrier, so the
 * others time out there as they would with a real dead peer. It returns
 * only once they have arrived (or the deadline passed): until then they may
 * still be reading its buffers, which its caller is free to reuse after
 * the error. */
void sim_linger(struct impl *c, uint64_t deadline_ns)
{
    struct world *w = c->w;
    struct timespec ts = sim_abstime(deadline_ns);
    pthread_mutex_lock(&w->mu);
    uint64_t gen = w->generation;
    w->lingering++;
    for (;;) {
        int waiting = 0;
        for (int i = 0; i < w->size; i++)
            waiting += i != c->rank && w->arrive_gen[i] == gen + 1;
        if (waiting == w->size - 1 || w->broken || w->generation != gen || c->aborted)
            break;
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT)
            break;
    }
    w->lingering--;
    pthread_mutex_unlock(&w->mu);
}

static const void *member(const struct world *w, int rank)
{
    return rank >= 0 && rank < w->size ? w->members[rank] : NULL;
}

/* What c reads first when it resumes from a wait (r: the request it waits
 * on, or NULL): r, c, and the communicators of the ranks it last sent to
 * and received from. Its next messages go to the same peers (a ring's two
 * neighbours), and those ranks ran long ago: the model reads where the
 * receiver is, and a delivery reads the sender's model and queues. */
static void hot_lines(const struct impl *c, const void *r, const void *hot[SIM_FIBER_HOT])
{
    hot[0] = r;
    hot[1] = c;
    hot[2] = member(c->w, c->last_to);
    hot[3] = member(c->w, c->last_from);
}

void sim_catch_up(const struct impl *c, const void *r)
{
    const void *hot[SIM_FIBER_HOT];
    hot_lines(c, r, hot);
    sim_fiber_catch_up(c->fiber, hot);
}

int sim_wait_req(struct impl *c, struct sim_req *r, int64_t timeout_ms)
{
    struct world *w = c->w;
    /* A coroutine's wait has no wall-clock deadline: no clock read. */
    struct timespec ts = {0, 0};
    if (!c->fiber && timeout_ms != PLX_TIMEOUT_INFINITE)
        ts = sim_abstime(deadline_after(timeout_ms));
    sim_lock(w);
    pthread_cond_t *cv = &c->cv;
    while (!r->done) {
        if (c->aborted) {
            sim_unlock(w);
            return sim_error(c, PLX_ERR_ABORTED, "sim: rank %d: communicator aborted", c->rank);
        }
        if (c->fiber) { /* virtual time cannot run out: only a deadlock ends the wait */
            r->waited = 1;
            sim_unlock(w);
            /* Not a timeout: the core would ask again until the
             * operation's deadline, and no wait can ever succeed now. */
            const void *hot[SIM_FIBER_HOT];
            hot_lines(c, r, hot);
            if (sim_fiber_block(c->fiber, hot) != 0)
                return sim_error(c, SIM_DEADLOCK, "sim: rank %d waits for rank %d (%s, tag %llu), and every "
                                 "rank waits: deadlock", c->rank, r->peer, r->is_send ? "send" : "recv",
                                 (unsigned long long)r->tag);
            sim_lock(w);
        } else if (timeout_ms == PLX_TIMEOUT_INFINITE) {
            pthread_cond_wait(cv, &w->mu);
        } else if (pthread_cond_timedwait(cv, &w->mu, &ts) == ETIMEDOUT && !r->done) {
            sim_unlock(w);
            if (r->is_coll)
                return sim_error(c, PLX_ERR_TIMEOUT, "sim: rank %d waited %lld ms for its %s: timeout", c->rank,
                                 (long long)timeout_ms, sim_coll_name(r->args.coll));
            return sim_error(c, PLX_ERR_TIMEOUT, "sim: rank %d waited %lld ms for rank %d (%s, tag %llu): timeout",
                             c->rank, (long long)timeout_ms, r->peer, r->is_send ? "send" : "recv",
                             (unsigned long long)r->tag);
        }
    }
    sim_model_complete(c, r);
    int st = r->status;
    if (st)
        sim_error(c, st, "%s", r->err);
    sim_unlock(w);
    if (c->fiber && c->model->on)
        sim_catch_up(c, r);
    return st;
}
