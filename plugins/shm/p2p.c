/* p2p.c - point-to-point through one ring per ordered pair of ranks.
 *
 * The rings and their frames are ring.c; a message is DATA fragments
 * (two copies: eager when it fits the ring, else written as the receiver
 * drains) or, single copy, an RTS the receiver answers by reading the
 * sender's buffer with process_vm_readv and an ACK.
 *
 * Single copy is off by default ([shm] p2p_cma): process_vm_readv pins
 * the sender's pages on every call, which can cost more than the second
 * copy it saves, and the ring's two copies overlap (the sender writes the
 * next fragment while the receiver drains the last) where single copy
 * waits for the receiver alone; which wins depends on the host, so it is
 * an option to measure there, not a default.
 *
 * A message that arrives before its receive is posted goes to the
 * unexpected queue (its data copied out of the ring, or for RTS just the
 * address), so a ring never waits for a receive. Progress (draining every
 * ring into this rank, writing what is queued for every peer) happens in
 * every call: isend, irecv, test, wait_until; a wait progresses every
 * direction, so two ranks that send big messages to each other and wait
 * on the sends finish. Waiting is bell.c's doorbell.
 *
 * Threads: the core calls p2p from the user's threads and the executor's
 * at once (generic collectives, RPC), so all state below is under one
 * mutex; nobody sleeps holding it. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "p2p.h"
#include "slice.h"

#define SWEEP_NS (10 * UINT64_C(1000000)) /* timeouts and peer liveness: at most this often */
#define SLICE_MS 10

static void unqueue(struct shm_comm *c, struct req *r)
{
    struct shm_p2p *p = c->p2p;
    switch (r->q) {
    case Q_SEND: lremove(&p->out[r->peer].sendq, r); break;
    case Q_RNDV: lremove(&p->rndv, r); break;
    case Q_POSTED: lremove(&p->posted, r); break;
    case Q_ACTIVE:
        if (p->in[r->from].req == r)
            p->in[r->from].req = NULL; /* the rest of its message is dropped */
        break;
    default: break;
    }
    r->q = Q_NONE;
}

void shm__p2p_complete(struct shm_comm *c, struct req *r, int status, const char *fmt, ...)
{
    struct shm_p2p *p = c->p2p;
    if (r->done)
        return;
    unqueue(c, r);
    if (r->aprev)
        r->aprev->anext = r->anext;
    else
        p->all = r->anext;
    if (r->anext)
        r->anext->aprev = r->aprev;
    r->aprev = r->anext = NULL;
    r->status = status;
    r->err[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, sizeof r->err, fmt, ap);
        va_end(ap);
    }
    r->done = 1;
}

const char *shm__p2p_what(const struct req *r, char *buf, size_t len)
{
    if (r->is_send)
        snprintf(buf, len, "send(tag %#llx, %zu bytes) to rank %d", (unsigned long long)r->tag, r->bytes, r->peer);
    else if (r->peer == PLX_ANY_SOURCE)
        snprintf(buf, len, "recv(tag %#llx, %zu bytes) from any rank", (unsigned long long)r->tag, r->bytes);
    else
        snprintf(buf, len, "recv(tag %#llx, %zu bytes) from rank %d", (unsigned long long)r->tag, r->bytes, r->peer);
    return buf;
}

/* Something no longer lets this rank trust the rings: fail everything
 * pending, and every later call, with status. */
void shm__p2p_fail_all(struct shm_comm *c, int status, const char *msg)
{
    struct shm_p2p *p = c->p2p;
    if (!p->broken) {
        p->broken = status;
        snprintf(p->broken_msg, sizeof p->broken_msg, "%s", msg);
    }
    char w[120];
    while (p->all)
        shm__p2p_complete(c, p->all, status, "%s: %s", shm__p2p_what(p->all, w, sizeof w), msg);
}
/* Single copy: read total bytes at addr in rank s into r's buffer, then
 * acknowledge. */
static void rndv_read(struct shm_comm *c, int s, struct req *r, uint64_t seq, uint64_t addr, size_t total)
{
    int32_t pid = __atomic_load_n(&shm__ctl(c, s)->pid, __ATOMIC_ACQUIRE);
    size_t done = 0;
    int st = 0, e = 0;
    while (done < total) {
        struct iovec l = {r->buf + done, total - done}, rv = {(void *)(uintptr_t)(addr + done), total - done};
        ssize_t n = pid > 0 ? process_vm_readv(pid, &l, 1, &rv, 1, 0) : -1;
        if (n <= 0) {
            e = n < 0 ? errno : EIO;
            st = e == ESRCH ? PLX_ERR_PEER_LOST : PLX_ERR_PROTOCOL;
            break;
        }
        done += (size_t)n;
    }
    char w[120];
    if (st)
        shm__p2p_complete(c, r, st, "%s: rank %d could not read %zu bytes of rank %d (pid %d) at %#llx with process_vm_readv "
                 "(single copy): %s", shm__p2p_what(r, w, sizeof w), c->rank, total - done, s, (int)pid,
                 (unsigned long long)(addr + done), strerror(e));
    else
        shm__p2p_complete(c, r, 0, NULL);
    shm__ring_ctl_push(c, s, FR_ACK, seq, st);
}

void shm__p2p_unex_remove(struct shm_p2p *p, struct unex *u)
{
    struct unex **pp = &p->ux_head, *prev = NULL;
    while (*pp && *pp != u) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = u->next;
    if (p->ux_tail == u)
        p->ux_tail = prev;
    u->next = NULL;
}

static int truncated(struct shm_comm *c, struct req *r, int s, uint64_t total)
{
    if (total <= r->bytes)
        return 0;
    char w[120];
    shm__p2p_complete(c, r, PLX_ERR_INVALID_ARG, "%s: rank %d sent %llu bytes into this %zu-byte receive (message truncated)",
             shm__p2p_what(r, w, sizeof w), s, (unsigned long long)total, r->bytes);
    return 1;
}

/* The first frame of message f->seq from s: match it with the oldest posted
 * receive, else queue it as unexpected. */
void shm__p2p_arrive(struct shm_comm *c, int s, const struct frame *f, int rndv)
{
    struct shm_p2p *p = c->p2p;
    struct inbound *in = &p->in[s];
    struct req *r = p->posted.head;
    while (r && !((r->peer == s || r->peer == PLX_ANY_SOURCE) && r->tag == f->tag))
        r = r->next;
    in->req = NULL;
    in->ux = NULL;
    if (r) {
        lremove(&p->posted, r);
        r->q = Q_NONE;
        r->from = s;
        if (truncated(c, r, s, f->total)) {
            if (rndv)
                shm__ring_ctl_push(c, s, FR_ACK, f->seq, 0);
        } else if (rndv) {
            rndv_read(c, s, r, f->seq, f->addr, (size_t)f->total);
        } else {
            in->req = r;
            r->q = Q_ACTIVE;
        }
        return;
    }
    struct unex *u = calloc(1, sizeof *u);
    if (!u || (!rndv && f->total && !(u->data = malloc((size_t)f->total)))) {
        free(u);
        shm__p2p_fail_all(c, PLX_ERR_NOMEM, "out of memory keeping an unexpected message");
        return;
    }
    *u = (struct unex){.src = s, .rndv = rndv, .tag = f->tag, .seq = f->seq, .total = f->total, .addr = f->addr,
                       .data = u->data};
    if (p->ux_tail)
        p->ux_tail->next = u;
    else
        p->ux_head = u;
    p->ux_tail = u;
    if (!rndv)
        in->ux = u;
}
static void progress(struct shm_comm *c)
{
    for (int r = 0; r < c->size && !c->p2p->broken; r++)
        shm__ring_drain(c, r);
    for (int r = 0; r < c->size && !c->p2p->broken; r++)
        shm__ring_write_out(c, r);
}

/* ---- timeouts, lost peers, abort ------------------------------------------ */

static void cancel(struct shm_comm *c, struct req *r)
{
    if (r->is_send && ((r->q == Q_SEND && r->sent) || r->q == Q_RNDV))
        shm__ring_ctl_push(c, r->peer, FR_CANCEL, r->seq, 0); /* the receiver drops what it has */
    unqueue(c, r);
}

/* What is wrong with peer q, if anything. */
enum { PEER_OK = 0, PEER_LEFT = 1, PEER_DEAD = 2, PEER_FAILED = 3 };
static int peer_state(struct shm_comm *c, int q)
{
    if (q == c->rank)
        return PEER_OK;
    if (shm__peer_dead(c, q))
        return PEER_DEAD;
    uint32_t st = __atomic_load_n(&shm__ctl(c, q)->state, __ATOMIC_ACQUIRE);
    return st == SHM_STATE_FAILED ? PEER_FAILED : st == SHM_STATE_LEFT ? PEER_LEFT : PEER_OK;
}

/* comm_abort or comm_revoke ran here: fail every pending request; 1 if so. */
static int stopped(struct shm_comm *c)
{
    if (!__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return 0;
    char msg[200];
    int stop = shm__stop_status(c);
    snprintf(msg, sizeof msg, "communicator '%s' %s on rank %d", c->name,
             stop == PLX_ERR_REVOKED ? "revoked" : "aborted", c->rank);
    shm__p2p_fail_all(c, stop, msg);
    if (stop == PLX_ERR_ABORTED) /* a revoking rank marked itself already */
        shm__fail(c, PLX_ERR_ABORTED, -1);
    return 1;
}

/* Requests whose own deadline passed fail with a timeout. */
static void expire(struct shm_comm *c, uint64_t now)
{
    char w[120];
    for (struct req *r = c->p2p->all, *n; r; r = n) {
        n = r->anext;
        if (!r->deadline || now < r->deadline)
            continue;
        cancel(c, r);
        int alive = r->peer == PLX_ANY_SOURCE || !shm__peer_dead(c, r->peer);
        shm__p2p_complete(c, r, PLX_ERR_TIMEOUT, "%s: rank %d waited %lld ms for rank %d%s on shm (%s): timeout",
                 shm__p2p_what(r, w, sizeof w), c->rank, (long long)r->timeout_ms, r->peer, alive ? " (alive)" : "",
                 r->is_send ? (r->rndv ? "it never took the single-copy send" : "it did not drain the ring")
                            : "no matching message came");
    }
}

/* A revoke by any rank (whichever this one waits for) fails every
 * pending request as revoked; 1 if so. */
static int revoked_here(struct shm_comm *c)
{
    int by = shm__revoked_by(c);
    if (by < 0)
        return 0;
    char w[120];
    snprintf(w, sizeof w, "rank %d revoked the communicator while rank %d waited on shm", by, c->rank);
    shm__p2p_fail_all(c, PLX_ERR_REVOKED, w);
    shm__fail(c, PLX_ERR_REVOKED, by);
    return 1;
}

/* Peer q is in state st (dead, left, failed): fail what waits for it. */
static void peer_gone(struct shm_comm *c, int q, int st)
{
    char w[120];
    int why = __atomic_load_n(&shm__ctl(c, q)->why_code, __ATOMIC_ACQUIRE);
    if (st == PEER_FAILED && why == PLX_ERR_REVOKED && revoked_here(c))
        return; /* it revoked (or heard of a revoke) since sweep looked */
    shm__ring_drain(c, q); /* what it wrote before it went still counts */
    if (st == PEER_DEAD && c->lost_rank < 0) {
        c->lost_rank = q;
        snprintf(c->lost_msg, sizeof c->lost_msg, "rank %d (pid %d) died", q, (int)shm__ctl(c, q)->pid);
    }
    for (struct req *r = c->p2p->all, *n; r; r = n) {
        n = r->anext;
        if (r->peer != q && !(r->peer == PLX_ANY_SOURCE && st != PEER_LEFT))
            continue;
        cancel(c, r);
        if (st == PEER_DEAD)
            shm__p2p_complete(c, r, PLX_ERR_PEER_LOST, "%s: rank %d (pid %d) died while rank %d waited for it on shm", shm__p2p_what(r, w, sizeof w),
                     q, (int)shm__ctl(c, q)->pid, c->rank);
        else if (st == PEER_LEFT)
            shm__p2p_complete(c, r, PLX_ERR_PEER_LOST, "%s: rank %d destroyed its communicator while rank %d waited for it "
                     "on shm", shm__p2p_what(r, w, sizeof w), q, c->rank);
        else
            shm__p2p_complete(c, r, PLX_ERR_REMOTE, "%s: rank %d failed (%s) while rank %d waited for it on shm", shm__p2p_what(r, w, sizeof w), q,
                     shm__status_name(why), c->rank);
    }
    if (st == PEER_DEAD)
        shm__fail(c, PLX_ERR_PEER_LOST, q);
}

/* Timeouts, a revoke elsewhere, and whether each peer a pending request
 * waits for is still there: at most every SWEEP_NS, or now (now_too). */
static void sweep(struct shm_comm *c, int now_too)
{
    struct shm_p2p *p = c->p2p;
    if (!p->all || stopped(c))
        return;
    uint64_t now = c->host->clock_ns();
    if (now < p->next_sweep && !now_too)
        return;
    p->next_sweep = now + SWEEP_NS;
    if (revoked_here(c))
        return;
    expire(c, now);
    /* Peers this rank waits for: is each still there? */
    int any = 0;
    for (int q = 0; q < c->size; q++)
        p->bad[q] = -1; /* unasked */
    for (struct req *r = p->all; r; r = r->anext) {
        if (r->peer == PLX_ANY_SOURCE)
            any = 1;
        else if (p->bad[r->peer] < 0)
            p->bad[r->peer] = peer_state(c, r->peer);
    }
    for (int q = 0; any && q < c->size; q++)
        if (p->bad[q] < 0)
            p->bad[q] = peer_state(c, q);
    for (int q = 0; q < c->size && !p->broken; q++)
        if (p->bad[q] > 0)
            peer_gone(c, q, p->bad[q]);
}

/* ---- requests ------------------------------------------------------------- */

/* Why new work on c is refused (an error), or 0: the same words for
 * collectives and point-to-point, which adds its own broken state. */
int shm__refusal(struct shm_comm *c, int p2p, char *err)
{
    struct shm_op o = {.c = c, .err = err};
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return shm__op_error(&o, shm__stop_status(c), "shm: communicator '%s' was %s", c->name,
                             shm__stop_status(c) == PLX_ERR_REVOKED ? "revoked" : "aborted");
    if (p2p && c->p2p->broken)
        return shm__op_error(&o, c->p2p->broken, "shm: communicator '%s' failed earlier: %s", c->name,
                             c->p2p->broken_msg);
    if (c->failed && c->mismatch_msg[0])
        return shm__op_error(&o, PLX_ERR_MISMATCH, "shm: communicator '%s' failed earlier: %s", c->name,
                             c->mismatch_msg);
    int by = c->failed ? shm__revoked_by(c) : -1;
    if (by >= 0)
        return shm__op_error(&o, PLX_ERR_REVOKED, "shm: communicator '%s' was revoked by rank %d", c->name, by);
    if (c->failed)
        return shm__op_error(&o, PLX_ERR_REMOTE, "shm: communicator '%s' failed earlier%s%s", c->name,
                             c->lost_rank >= 0 ? ": " : "", c->lost_rank >= 0 ? c->lost_msg : "");
    return 0;
}

/* r: the core's memory for the request (undefined contents). */
static void req_init(struct shm_comm *c, struct req *r, const struct plx_p2p_args *a, int is_send)
{
    struct shm_p2p *p = c->p2p;
    memset(r, 0, offsetof(struct req, err));
    r->err[0] = '\0';
    r->is_send = is_send;
    r->peer = a->peer;
    r->from = a->peer;
    r->tag = a->tag;
    r->buf = a->buf;
    r->bytes = a->bytes;
    r->posted = c->host->clock_ns();
    r->timeout_ms = a->timeout_ms >= 0 ? a->timeout_ms : a->timeout_ms == PLX_TIMEOUT_INFINITE ? -1 : c->timeout_ms;
    r->deadline = r->timeout_ms >= 0 ? r->posted + (uint64_t)r->timeout_ms * 1000000u : 0;
    r->anext = p->all;
    if (p->all)
        p->all->aprev = r;
    p->all = r;
}

static int check_args(struct shm_comm *c, const struct plx_p2p_args *a, int is_send, void **req)
{
    if (!*req)
        return plx_plugin_error(c->host, PLX_ERR_INVALID_USAGE, "shm: no request memory (req_size) from the core");
    if (a->mem_kind != PLX_MEM_HOST)
        return plx_plugin_error(c->host, PLX_ERR_UNSUPPORTED, "shm: point-to-point takes host memory only");
    if ((a->peer < 0 || a->peer >= c->size) && !(!is_send && a->peer == PLX_ANY_SOURCE))
        return plx_plugin_error(c->host, PLX_ERR_INVALID_ARG, "shm: peer %d is not a rank of '%s' (size %d)", a->peer,
                                c->name, c->size);
    if (a->bytes > SIZE_MAX / 2 || (a->bytes && !a->buf))
        return plx_plugin_error(c->host, PLX_ERR_INVALID_ARG, "shm: bad buffer or size %zu", a->bytes);
    return shm__refusal(c, 1, NULL);
}

int shm__p2p_isend(struct shm_comm *c, const struct plx_p2p_args *a, void **out)
{
    struct shm_p2p *p = c->p2p;
    int rc = check_args(c, a, 1, out);
    if (rc)
        return rc;
    struct req *r = *out;
    pthread_mutex_lock(&p->mu);
    req_init(c, r, a, 1);
    struct outbound *o = &p->out[a->peer];
    r->seq = o->next_seq++;
    r->rndv = c->p2p_cma && a->bytes && a->bytes >= c->cfg.p2p_cma_min_bytes;
    r->q = Q_SEND;
    lpush(&o->sendq, r);
    shm__ring_write_out(c, a->peer); /* eager: small ones are done now */
    pthread_mutex_unlock(&p->mu);
    return 0;
}

/* Post r: the oldest unexpected message that matches, else the posted list. */
static void post_recv(struct shm_comm *c, struct req *r)
{
    struct shm_p2p *p = c->p2p;
    struct unex *u = p->ux_head;
    while (u && !((r->peer == PLX_ANY_SOURCE || u->src == r->peer) && u->tag == r->tag))
        u = u->next;
    if (!u) {
        r->q = Q_POSTED;
        lpush(&p->posted, r);
        return;
    }
    shm__p2p_unex_remove(p, u);
    struct inbound *in = &p->in[u->src];
    int partial = !u->rndv && u->got < u->total; /* still arriving: it is its ring's current message */
    r->from = u->src;
    if (partial)
        in->ux = NULL;
    if (truncated(c, r, u->src, u->total)) {
        if (u->rndv)
            shm__ring_ctl_push(c, u->src, FR_ACK, u->seq, 0);
    } else if (u->rndv) {
        rndv_read(c, u->src, r, u->seq, u->addr, (size_t)u->total);
    } else {
        if (u->got)
            plx_plugin_copy(r->buf, u->data, (size_t)u->got);
        if (partial) {
            in->req = r;
            r->q = Q_ACTIVE;
        } else {
            shm__p2p_complete(c, r, 0, NULL);
        }
    }
    free(u->data);
    free(u);
}

int shm__p2p_irecv(struct shm_comm *c, const struct plx_p2p_args *a, void **out)
{
    struct shm_p2p *p = c->p2p;
    int rc = check_args(c, a, 0, out);
    if (rc)
        return rc;
    struct req *r = *out;
    pthread_mutex_lock(&p->mu);
    req_init(c, r, a, 0);
    post_recv(c, r);
    progress(c);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

static int report(struct shm_comm *c, struct req *r)
{
    if (r->status)
        return plx_plugin_error(c->host, r->status, "%s", r->err);
    return 0;
}

int shm__p2p_test(struct shm_comm *c, void *req, int *done)
{
    struct shm_p2p *p = c->p2p;
    struct req *r = req;
    pthread_mutex_lock(&p->mu);
    if (!r->done) {
        progress(c);
        sweep(c, 0);
    }
    *done = r->done;
    pthread_mutex_unlock(&p->mu);
    return *done ? report(c, r) : 0;
}

int shm__p2p_wait_until(struct shm_comm *c, void *req, uint64_t deadline_ns)
{
    struct shm_p2p *p = c->p2p;
    struct req *r = req;
    uint32_t *bell = &shm__p2p_ctl(c, c->rank)->bell;
    struct shm_pace_wait w = {0};
    for (;;) {
        uint32_t seen = __atomic_load_n(bell, __ATOMIC_ACQUIRE);
        pthread_mutex_lock(&p->mu);
        uint64_t now = c->host->clock_ns();
        if (!r->done) {
            progress(c);
            /* At the caller's deadline look at once: the request's own
             * (no later, set when posted) names the peer it waited for. */
            sweep(c, now >= deadline_ns);
        }
        int done = r->done;
        pthread_mutex_unlock(&p->mu);
        if (done || now >= deadline_ns)
            plx__slice_restore(); /* a sleep below may have shortened it */
        if (done) {
            shm__pace_done(c, &w);
            return report(c, r);
        }
        if (now >= deadline_ns)
            return PLX_ERR_TIMEOUT; /* still pending: the core decides */
        /* As sync.c: pace.c decides between looking again and sleeping on
         * the bell in slices (liveness, deadlines). */
        if (shm__pace(c, &w) == SHM_PACE_SLEEP)
            shm__bell_sleep(c, seen, deadline_ns, SLICE_MS);
    }
}

void shm__p2p_req_free(struct shm_comm *c, void *req)
{
    struct shm_p2p *p = c->p2p;
    struct req *r = req;
    if (!r)
        return;
    pthread_mutex_lock(&p->mu);
    if (!r->done) { /* the buffer is no longer borrowed: cancel */
        int d = r->is_send ? r->peer : -1;
        cancel(c, r);
        shm__p2p_complete(c, r, PLX_ERR_ABORTED, NULL);
        if (d >= 0)
            shm__ring_write_out(c, d);
    }
    pthread_mutex_unlock(&p->mu); /* r is the core's again: no list holds it */
}

/* ---- the communicator ------------------------------------------------------ */

/* May this rank read every peer's memory? A one-line reason either way. */
static int probe_cma(struct shm_comm *c)
{
    if (c->size == 1) {
        snprintf(c->p2p_cma_why, sizeof c->p2p_cma_why, "off (one rank)");
        return 0;
    }
    if (!c->cfg.p2p_cma) {
        snprintf(c->p2p_cma_why, sizeof c->p2p_cma_why, "off ([shm] p2p_cma = false)");
        return 0;
    }
    if (!shm__cma_possible(c->p2p_cma_why, sizeof c->p2p_cma_why))
        return 0;
    for (int q = 0; q < c->size; q++) {
        if (q == c->rank)
            continue;
        int32_t pid = __atomic_load_n(&shm__ctl(c, q)->pid, __ATOMIC_ACQUIRE);
        uint64_t got = 0, want = SHM_CMA_MAGIC ^ (uint64_t)(uint32_t)pid;
        struct iovec l = {&got, sizeof got},
                     r = {(void *)(uintptr_t)__atomic_load_n(&shm__ctl(c, q)->cma_addr, __ATOMIC_ACQUIRE), sizeof got};
        errno = 0;
        if (pid <= 0 || process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof got || got != want) {
            snprintf(c->p2p_cma_why, sizeof c->p2p_cma_why, "off: rank %d could not read rank %d's memory (%s)", c->rank,
                     q, errno ? strerror(errno) : "wrong word");
            return 0;
        }
    }
    return 1;
}

int shm__p2p_create(struct shm_comm *c, struct shm_op *o)
{
    struct shm_p2p *p = calloc(1, sizeof *p);
    size_t P = (size_t)c->size;
    if (!p || !(p->in = calloc(P, sizeof *p->in)) || !(p->out = calloc(P, sizeof *p->out)) ||
        !(p->bad = calloc(P, sizeof *p->bad))) {
        if (p) {
            free(p->in);
            free(p->out);
        }
        free(p);
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "shm: out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    c->p2p = p;
    int ok = probe_cma(c);
    __atomic_store_n(&shm__p2p_ctl(c, c->rank)->cma_ok, ok ? 1u : 2u, __ATOMIC_RELEASE);
    int rc = shm__barrier(o);
    if (rc)
        return rc;
    for (int r = 0; ok && r < c->size; r++)
        if (__atomic_load_n(&shm__p2p_ctl(c, r)->cma_ok, __ATOMIC_ACQUIRE) != 1) {
            snprintf(c->p2p_cma_why, sizeof c->p2p_cma_why, "off: rank %d cannot read its peers' memory", r);
            ok = 0;
        }
    c->p2p_cma = ok;
    c->host->log(c->host->ctx, PLX_LOG_DEBUG, "shm: comm '%s': point-to-point single copy %s (messages >= %zu bytes)",
              c->name, c->p2p_cma_why, c->cfg.p2p_cma_min_bytes);
    return 0;
}

void shm__p2p_destroy(struct shm_comm *c)
{
    struct shm_p2p *p = c->p2p;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    while (p->all)
        shm__p2p_complete(c, p->all, PLX_ERR_ABORTED, "shm: the communicator was destroyed with this request pending");
    for (struct unex *u = p->ux_head, *n; u; u = n) {
        n = u->next;
        free(u->data);
        free(u);
    }
    for (int d = 0; d < c->size; d++)
        free(p->out[d].ctl);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_destroy(&p->mu);
    free(p->in);
    free(p->out);
    free(p->bad);
    free(p);
    c->p2p = NULL;
}
