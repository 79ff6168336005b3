/* p2p.c - point-to-point between sim ranks: requests are matched by
 * (source, destination, tag) in post order; the thread that completes the
 * match copies straight from the sender's buffer to the receiver's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static int matches(const struct sim_req *send, const struct sim_req *recv)
{
    return send->peer == recv->owner && (recv->peer == PLX_ANY_SOURCE || recv->peer == send->owner) &&
           send->tag == recv->tag;
}

/* Its owner's wait on r may go on (w->mu held). A coroutine that does not
 * wait on r is left alone: it finds r done when it waits for it, and one
 * that waits on another request would only run to block again (in a ring,
 * every send completes while its sender waits for its receive). */
static void wake(struct impl *owner, const struct sim_req *r)
{
    if (owner->fiber) {
        if (r->waited)
            sim_fiber_wake(owner->fiber, r->t_done > *owner->clock_ns ? r->t_done : *owner->clock_ns);
    } else
        pthread_cond_broadcast(&owner->cv);
}

/* Timing only (backend.h): the first bytes of a payload up to
 * PLX_TIMING_SAMPLED_BYTES, none of a longer one (touching its pages would
 * cost thousands of ranks gigabytes), none where a side gave no buffer. */
static size_t copied_bytes(const struct impl *c, const struct sim_req *send, const struct sim_req *recv)
{
    size_t bytes = send->bytes - send->head_bytes;
    if (!c->model->on || c->model->payload)
        return bytes;
    if (!send->buf || !recv->buf)
        return 0;
    return send->bytes > PLX_TIMING_SAMPLED_BYTES ? 0 : bytes > SIM_SAMPLE_BYTES ? SIM_SAMPLE_BYTES : bytes;
}

/* The part of a source piece (at src_at of the message, src_n bytes) that
 * falls in a destination piece (at dst_at, dst_n bytes). */
static void put(char *dst, size_t dst_at, size_t dst_n, const char *src, size_t src_at, size_t src_n)
{
    size_t lo = dst_at > src_at ? dst_at : src_at;
    size_t hi = dst_at + dst_n < src_at + src_n ? dst_at + dst_n : src_at + src_n;
    if (dst && src && lo < hi)
        plx_plugin_copy(dst + (lo - dst_at), src + (lo - src_at), hi - lo);
}

/* The sender's head then payload into the receiver's head then payload
 * (PLX_CAP_P2P_HEAD): as much as fits, the head always whole. */
static void copy_message(const struct impl *c, const struct sim_req *send, const struct sim_req *recv)
{
    size_t sh = send->head_bytes, rh = recv->head_bytes, rn = recv->bytes - rh;
    size_t sn = copied_bytes(c, send, recv);
    put(recv->head, 0, rh, send->head, 0, sh);
    put(recv->buf, rh, rn, send->head, 0, sh);
    put(recv->head, 0, rh, send->buf, sh, sn);
    put(recv->buf, rh, rn, send->buf, sh, sn);
}

/* Copy outside the lock, then complete both. */
static void deliver(struct impl *c, struct sim_req *send, struct sim_req *recv)
{
    struct world *w = c->w;
    int st = send->bytes > recv->bytes ? PLX_ERR_INVALID_ARG : 0;
    /* Timing only, a large message has no buffer on either side: nothing
     * to copy, and four empty pieces cost a message 130 instructions. */
    if (send->bytes && (send->head || send->buf) && (recv->head || recv->buf))
        copy_message(c, send, recv);
    sim_lock(w);
    struct impl *sender = w->members[send->owner];
    if (sender && sender->model->on && !send->priced && sim_model_send(sender, send))
        st = PLX_ERR_NOMEM;
    if (sender && sender->model->on && send->priced)
        sim_model_deliver(sender, send, recv);
    if (st) {
        if (st == PLX_ERR_NOMEM)
            snprintf(send->err, sizeof send->err, "sim: out of memory");
        else
            snprintf(send->err, sizeof send->err, "sim: rank %d sent %zu bytes to rank %d, which posted %zu (tag %llu)",
                     send->owner, send->bytes, recv->owner, recv->bytes, (unsigned long long)send->tag);
        memcpy(recv->err, send->err, sizeof recv->err);
    }
    send->status = recv->status = st;
    send->done = recv->done = 1;
    struct impl *receiver = w->members[recv->owner];
    if (sender)
        wake(sender, send);
    if (receiver && receiver != sender)
        wake(receiver, recv);
    sim_unlock(w);
}

static int post(struct impl *c, int is_send, const struct plx_p2p_args *a, void **out)
{
    int rc = sim_fault_check(c, is_send ? "send" : "recv");
    if (rc)
        return rc;
    sim_fault_delay(c);
    struct sim_req *r = sim_req_new(c);
    if (!r)
        return sim_error(c, PLX_ERR_NOMEM, "sim: out of memory");
    r->is_send = is_send;
    r->peer = a->peer;
    r->owner = c->rank;
    r->buf = a->buf;
    r->bytes = a->bytes;
    r->head = NULL;
    r->head_bytes = 0;
    if (PLX_HAS_FIELD(a, struct plx_p2p_args, head_bytes) && a->head_bytes) {
        r->head = a->head;
        r->head_bytes = a->head_bytes;
        r->bytes += a->head_bytes;
    }
    r->tag = a->tag;
    if (c->fiber) { /* for world.c's hot_lines: a coroutine's, on its one thread */
        if (is_send)
            c->last_to = a->peer;
        else
            c->last_from = a->peer;
    }
    struct world *w = c->w;
    struct sim_req *mate = NULL;
    sim_lock(w);
    if (c->aborted) {
        sim_req_release_locked(c, r);
        sim_unlock(w);
        return sim_error(c, PLX_ERR_ABORTED, "sim: rank %d: communicator aborted", c->rank);
    }
    if (sim_revoked(w)) { /* under the lock that a revoke's sweep of the lists takes */
        sim_req_release_locked(c, r);
        sim_unlock(w);
        return sim_revoked_error(c, is_send ? "send" : "recv");
    }
    /* The model prices a send when it is posted, by where the receiver
     * is; a coroutine's receiver may not have joined yet (a split's world):
     * then when it is delivered, from the time it was posted. */
    r->t_post = *c->clock_ns;
    if (is_send && c->model->on && (!c->fiber || (r->peer >= 0 && r->peer < w->size && w->members[r->peer])) &&
        sim_model_send(c, r)) {
        sim_req_release_locked(c, r);
        sim_unlock(w);
        return sim_error(c, PLX_ERR_NOMEM, "sim: out of memory");
    }
    int dst = is_send ? r->peer : c->rank;
    if (dst < 0 || dst >= w->size) {
        sim_req_release_locked(c, r);
        sim_unlock(w);
        return sim_error(c, PLX_ERR_INVALID_ARG, "sim: rank %d: peer %d is not a rank of 0..%d", c->rank, a->peer,
                         w->size - 1);
    }
    struct sim_req **list = is_send ? &w->recvs_at[dst] : &w->sends_to[dst];
    for (struct sim_req **p = list; *p; p = &(*p)->next)
        if (is_send ? matches(r, *p) : matches(*p, r)) {
            mate = *p;
            *p = mate->next;
            mate->matched = r->matched = 1;
            break;
        }
    if (!mate) { /* append: FIFO per (peer, tag) */
        struct sim_req **tail = is_send ? &w->sends_to[dst] : &w->recvs_at[dst];
        while (*tail)
            tail = &(*tail)->next;
        *tail = r;
    }
    sim_unlock(w);
    if (mate)
        deliver(c, is_send ? r : mate, is_send ? mate : r);
    *out = r;
    return 0;
}

int sim_isend(void *comm, const struct plx_p2p_args *a, void **req)
{
    return post(comm, 1, a, req);
}

int sim_irecv(void *comm, const struct plx_p2p_args *a, void **req)
{
    return post(comm, 0, a, req);
}

/* Free a request; an unmatched one is withdrawn, a matched one is waited
 * for (its copy is in flight in the partner's thread). */
void sim_p2p_cancel(struct impl *c, struct sim_req *r)
{
    struct world *w = c->w;
    sim_lock(w);
    if (!r->matched) {
        struct sim_req **list = r->is_send ? &w->sends_to[r->peer] : &w->recvs_at[r->owner];
        for (struct sim_req **p = list; *p; p = &(*p)->next)
            if (*p == r) {
                *p = r->next;
                break;
            }
    } else { /* thread ranks only: a coroutine's match completes before it yields */
        while (!r->done)
            pthread_cond_wait(&c->cv, &w->mu);
    }
    sim_req_release_locked(c, r);
    sim_unlock(w);
}
