/* mailbox.c - a minimal third-party plexus backend, built against the
 * installed headers only (pkg-config plexus-backend). Ranks are threads of
 * one process (init "mem://NAME"); it provides point-to-point only, so the
 * core's generic algorithms give it every collective.
 *
 * Messages: a sender copies its buffer into a mailbox entry (eager); a
 * receive takes the first entry from its peer with its tag (FIFO). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <plexus/backend.h>

#ifndef MAILBOX_NAME
#define MAILBOX_NAME "mailbox"
#endif

static const struct plx_host *host;

struct msg {
    int src, dst;
    uint64_t tag;
    void *data;
    size_t len;
    struct msg *next;
};

/* The shared state of one world, found through the store by its address. */
struct world {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct msg *head;
    int refs;
};

struct comm {
    struct world *w;
    int rank, size;
};

struct req {
    int is_send, peer, done, status;
    void *buf;
    size_t bytes;
    uint64_t tag;
};

static int probe(struct plx_probe_result *out)
{
    out->state = PLX_PROBE_USABLE;
    snprintf(out->reason, sizeof out->reason, "in-process mailboxes");
    return 0;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    out->flags = PLX_CAP_P2P | PLX_CAP_THREAD_SAFE | PLX_CAP_IN_PROCESS; /* no native collectives */
    out->mem_kinds = PLX_BIT(PLX_MEM_HOST);
#ifdef MAILBOX_V_BITS
    /* Test hook (the only addition to the frozen source): claim bits 11 and
     * 12, which ABI 1.4 gave alltoallv/allgatherv, from an older minor. The
     * core must not route them here: this plugin cannot read their layout. */
    out->dtypes = PLX_BIT(PLX_DTYPE_COUNT) - 1;
    out->collectives = PLX_BIT(11) | PLX_BIT(12);
#endif
#ifdef MAILBOX_OP_BITS
    /* Test hook: claim reductions with ops 5 to 7, which ABI 1.13 gave
     * BAND, BOR and BXOR, from an older minor (what a mask such as
     * PLX_BIT(PLX_REDOP_COUNT) - 1 does once rebuilt against today's
     * plexus.h). The core must not route them here. */
    out->dtypes = PLX_BIT(PLX_DTYPE_COUNT) - 1;
    out->collectives = PLX_BIT(PLX_COLL_ALLREDUCE) | PLX_BIT(PLX_COLL_REDUCE) | PLX_BIT(PLX_COLL_REDUCE_SCATTER);
    out->redops = PLX_BIT(5) | PLX_BIT(6) | PLX_BIT(7);
#endif
    return 0;
}

#if defined(MAILBOX_V_BITS) || defined(MAILBOX_OP_BITS)
static int collective(void *comm, const struct plx_coll_args *a, void **req)
{
    (void)comm;
    (void)req;
    return host->error(host->ctx, PLX_ERR_INTERNAL, MAILBOX_NAME ": collective %d routed to a plugin of ABI minor %d",
                       (int)a->coll, PLX_ABI_MINOR);
}
#endif

static int comm_create(const struct plx_comm_args *a, void **out)
{
    if (!a->store)
        return host->error(host->ctx, PLX_ERR_INVALID_USAGE, "mailbox: run ranks as threads with init mem://NAME");
    struct comm *c = calloc(1, sizeof *c);
    if (!c)
        return PLX_ERR_NOMEM;
    c->rank = a->rank;
    c->size = a->size;
    int rc;
    if (a->rank == 0) {
        c->w = calloc(1, sizeof *c->w);
        pthread_mutex_init(&c->w->mu, NULL);
        pthread_cond_init(&c->w->cv, NULL);
        c->w->refs = a->size;
        rc = host->store_set(a->store, "mailbox/world", &c->w, sizeof c->w);
    } else {
        void *v = NULL;
        size_t len = 0;
        rc = host->store_get(a->store, "mailbox/world", &v, &len, a->timeout_ms);
        if (rc == 0 && len == sizeof c->w)
            memcpy(&c->w, v, sizeof c->w);
        if (v)
            host->free(v);
    }
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int comm_destroy(void *comm)
{
    struct comm *c = comm;
    pthread_mutex_lock(&c->w->mu);
    int last = --c->w->refs == 0;
    pthread_mutex_unlock(&c->w->mu);
    if (last) {
        while (c->w->head) {
            struct msg *m = c->w->head;
            c->w->head = m->next;
            free(m->data);
            free(m);
        }
        free(c->w);
    }
    free(c);
    return 0;
}

static int isend(void *comm, const struct plx_p2p_args *a, void **out)
{
    struct comm *c = comm;
    struct msg *m = calloc(1, sizeof *m);
    struct req *r = calloc(1, sizeof *r);
    if (!m || !r || !(m->data = malloc(a->bytes ? a->bytes : 1))) {
        free(m);
        free(r);
        return PLX_ERR_NOMEM;
    }
    if (a->bytes)
        memcpy(m->data, a->buf, a->bytes);
    *m = (struct msg){c->rank, a->peer, a->tag, m->data, a->bytes, NULL};
    pthread_mutex_lock(&c->w->mu);
    struct msg **t = &c->w->head;
    while (*t)
        t = &(*t)->next;
    *t = m;
    pthread_cond_broadcast(&c->w->cv);
    pthread_mutex_unlock(&c->w->mu);
    r->is_send = 1;
    r->done = 1; /* eager: the data is in the mailbox */
    *out = r;
    return 0;
}

static int irecv(void *comm, const struct plx_p2p_args *a, void **out)
{
    (void)comm;
    struct req *r = calloc(1, sizeof *r);
    if (!r)
        return PLX_ERR_NOMEM;
    r->peer = a->peer;
    r->buf = a->buf;
    r->bytes = a->bytes;
    r->tag = a->tag;
    *out = r;
    return 0;
}

/* Under the lock: deliver the first matching message, if any. */
static void try_match(struct comm *c, struct req *r)
{
    for (struct msg **p = &c->w->head; *p; p = &(*p)->next) {
        struct msg *m = *p;
        if (m->dst == c->rank && m->tag == r->tag && (r->peer == PLX_ANY_SOURCE || r->peer == m->src)) {
            *p = m->next;
            if (m->len > r->bytes) {
                r->status = PLX_ERR_INVALID_ARG;
            } else if (m->len) {
                memcpy(r->buf, m->data, m->len);
            }
            r->done = 1;
            free(m->data);
            free(m);
            return;
        }
    }
}

static int test(void *comm, void *req, int *done)
{
    struct comm *c = comm;
    struct req *r = req;
    if (!r->done) {
        pthread_mutex_lock(&c->w->mu);
        try_match(c, r);
        pthread_mutex_unlock(&c->w->mu);
    }
    *done = r->done;
    return r->done ? r->status : 0;
}

static int wait_req(void *comm, void *req, int64_t timeout_ms)
{
    struct comm *c = comm;
    struct req *r = req;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (timeout_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&c->w->mu);
    for (;;) {
        if (!r->done)
            try_match(c, r);
        if (r->done || pthread_cond_timedwait(&c->w->cv, &c->w->mu, &ts) == ETIMEDOUT)
            break;
    }
    if (!r->done)
        try_match(c, r);
    pthread_mutex_unlock(&c->w->mu);
    if (!r->done)
        return host->error(host->ctx, PLX_ERR_TIMEOUT, "mailbox: rank %d waited %lld ms for rank %d", c->rank,
                           (long long)timeout_ms, r->peer);
    return r->status;
}

static void req_free(void *comm, void *req)
{
    (void)comm;
    free(req);
}

static const struct plx_backend mailbox = {
    .struct_size = sizeof(struct plx_backend),
    .abi_minor = PLX_ABI_MINOR,
    .name = MAILBOX_NAME,
    .version = "1.0",
    .description = "example out-of-tree backend: in-process mailboxes, point-to-point only",
    .probe = probe,
    .get_caps = get_caps,
    .comm_create = comm_create,
    .comm_destroy = comm_destroy,
    .isend = isend,
    .irecv = irecv,
    .test = test,
    .wait = wait_req,
    .req_free = req_free,
#if defined(MAILBOX_V_BITS) || defined(MAILBOX_OP_BITS)
    .collective = collective,
#endif
};

PLX_BACKEND_EXPORT int plx_backend_entry_v1(const struct plx_host *h, uint32_t *minor, const struct plx_backend **out)
{
    host = h;
    if (*minor > PLX_ABI_MINOR)
        *minor = PLX_ABI_MINOR;
    *out = &mailbox;
    return 0;
}
