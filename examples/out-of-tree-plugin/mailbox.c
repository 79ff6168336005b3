/* mailbox.c - a minimal third-party plexus backend, built against the
 * installed headers only (pkg-config plexus-backend). Ranks are threads of
 * one process (init "mem://NAME"); it provides point-to-point only, so the
 * core's generic algorithms give it every collective.
 *
 * Messages: a sender copies its buffer into a mailbox entry (eager); a
 * receive takes the first entry from its peer with its tag (FIFO).
 *
 * It uses the plugin SDK of ABI 1.3 (plexus/plugin.h): the entry-point
 * macro, error reporting, a typed key read through the communicator's
 * configuration, and waits to an absolute deadline. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <plexus/backend.h>
#include <plexus/plugin.h>

#ifndef MAILBOX_NAME
#define MAILBOX_NAME "mailbox"
#endif

/* The entry point's services, for a core older than ABI 1.5 only: a newer
 * one hands each communicator an instance of its own (comm_create). */
static const struct plx_host *entry_host;

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
    const struct plx_host *host; /* this communicator's: log lines and errors name it */
    struct world *w;
    int rank, size;
    int64_t max_bytes; /* [mailbox] max_bytes */
};

/* The keys of [mailbox], typed: the core checks values where they are set. */
static const struct plx_key keys[] = {
    {"max_bytes", PLX_KEY_SIZE, "1G", NULL, "largest message a rank may send (bytes, or with K, M, G)"},
    {NULL, 0, NULL, NULL, NULL},
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
    return 0;
}

static int comm_create(const struct plx_comm_args *a, void **out)
{
    const struct plx_host *host = plx_plugin_comm_host(a, entry_host);
    if (!a->store)
        return plx_plugin_error(host, PLX_ERR_INVALID_USAGE, "mailbox: run ranks as threads with init mem://NAME");
    struct comm *c = calloc(1, sizeof *c);
    if (!c)
        return plx_plugin_error(host, PLX_ERR_NOMEM, "mailbox: out of memory");
    c->host = host;
    c->rank = a->rank;
    c->size = a->size;
    c->max_bytes = plx_plugin_config_int(host, a->config, "max_bytes", (int64_t)1 << 30);
    int rc;
    if (a->rank == 0) {
        c->w = calloc(1, sizeof *c->w);
        pthread_mutex_init(&c->w->mu, NULL);
        plx_plugin_cond_init(&c->w->cv); /* CLOCK_MONOTONIC, as deadlines are */
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
    if ((int64_t)a->bytes > c->max_bytes)
        return plx_plugin_error(c->host, PLX_ERR_INVALID_ARG, "mailbox: %zu bytes to rank %d, more than [mailbox] "
                                "max_bytes (%lld)", a->bytes, a->peer, (long long)c->max_bytes);
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

/* ABI 1.3: wait until an absolute deadline (host->clock_ns, CLOCK_MONOTONIC). */
static int wait_until(void *comm, void *req, uint64_t deadline_ns)
{
    struct comm *c = comm;
    struct req *r = req;
    uint64_t t0 = c->host->clock_ns();
    pthread_mutex_lock(&c->w->mu);
    for (;;) {
        if (!r->done)
            try_match(c, r);
        if (r->done || plx_plugin_cond_wait_until(&c->w->cv, &c->w->mu, deadline_ns) == ETIMEDOUT)
            break;
    }
    if (!r->done)
        try_match(c, r);
    pthread_mutex_unlock(&c->w->mu);
    if (!r->done)
        return plx_plugin_error(c->host, PLX_ERR_TIMEOUT, "mailbox: rank %d waited %llu ms for rank %d", c->rank,
                                (unsigned long long)((c->host->clock_ns() - t0) / 1000000u), r->peer);
    return r->status;
}

/* The ABI 1.0 wait, for cores that slice waits (this backend has no abort):
 * PLX_TIMEOUT_INFINITE waits for good, as plx_plugin_deadline says. */
static int wait_req(void *comm, void *req, int64_t timeout_ms)
{
    return wait_until(comm, req, plx_plugin_deadline(timeout_ms));
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
    .version = "1.3",
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
    .keys = keys,
    .wait_until = wait_until,
};

/* Needs ABI 1.3: it reads its key typed, through the communicator's view. */
PLX_PLUGIN_ENTRY(mailbox, entry_host, 3)
