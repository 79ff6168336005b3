/* revoke.c - plx_comm_revoke on sim: every pending and future operation of
 * every rank of the world fails with PLX_ERR_REVOKED, naming the rank that
 * revoked. A revoke breaks the world with that status, which ends every
 * native collective at its next barrier (and every later one at its
 * first), completes every unmatched point-to-point request of any rank
 * with it, and refuses later posts (p2p.c). Matched requests complete as
 * they would: their copy is already under way.
 *
 * Ranks are threads or coroutines of one thread; each is woken where it
 * waits: a thread on its condition variable or the world's, a coroutine by
 * making it runnable. On coroutine ranks the revoke must come from one of
 * them (every call into those communicators does): another thread may not
 * touch their scheduler. */
#include <stdio.h>

#include "sim.h"

int sim_revoked(const struct world *w)
{
    return w->broken == PLX_ERR_REVOKED;
}

int sim_revoked_error(struct impl *c, const char *what)
{
    return sim_error(c, PLX_ERR_REVOKED, "sim: %s on rank %d: %s", what, c->rank, c->w->broken_msg);
}

/* Complete every request of list with the revoke (w->mu held). */
static void end_all(struct world *w, struct sim_req **list)
{
    while (*list) {
        struct sim_req *r = *list;
        *list = r->next;
        r->next = NULL;
        struct impl *owner = w->members[r->owner];
        snprintf(r->err, sizeof r->err, "sim: %s on rank %d (%s rank %d, tag %llu): %s", r->is_send ? "send" : "recv",
                 r->owner, r->is_send ? "to" : "from", r->peer, (unsigned long long)r->tag, w->broken_msg);
        r->t_done = owner ? *owner->clock_ns : 0; /* no time passes in the model */
        r->matched = 1; /* out of the lists: nothing for a cancel to withdraw */
        r->status = PLX_ERR_REVOKED;
        r->done = 1;
    }
}

int sim_revoke(void *comm)
{
    struct impl *c = comm;
    struct world *w = c->w;
    int on_fiber = sim_fiber_self() != NULL;
    pthread_mutex_lock(&w->mu);
    if (!sim_revoked(w)) { /* the first revoke names the rank; it replaces an earlier failure */
        w->broken = PLX_ERR_REVOKED;
        snprintf(w->broken_msg, sizeof w->broken_msg, "rank %d revoked the communicator", c->rank);
    }
    for (int r = 0; r < w->size; r++) {
        end_all(w, &w->sends_to[r]);
        end_all(w, &w->recvs_at[r]);
    }
    for (int r = 0; r < w->size; r++) {
        struct impl *m = w->members[r];
        if (!m)
            continue;
        pthread_cond_broadcast(&m->cv);
        if (m->fiber && on_fiber)
            sim_fiber_wake(m->fiber, *m->clock_ns);
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}
