/* pool.c - records the tcp plugin reuses instead of allocating per message:
 * requests per communicator; slots, frames and early payloads per peer. All
 * with c->mu held. A record in a pool is zeroed when it is handed out again
 * (an early record keeps its buffer). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tcp.h"

/* Early records stay pooled up to this many per peer, with buffers of at
 * most this many bytes, so the pool holds at most 4 MiB per peer. */
#define TCP_EARLY_POOL 64
#define TCP_EARLY_POOL_BYTES 65536u

struct tcp_req *tcp__req_get(struct tcp_comm *c)
{
    struct tcp_req *r = c->req_pool;
    if (!r)
        return calloc(1, sizeof *r);
    c->req_pool = r->next;
    memset(r, 0, offsetof(struct tcp_req, err)); /* err is written before it is read */
    r->next = NULL;
    return r;
}

void tcp__req_put(struct tcp_comm *c, struct tcp_req *r)
{
    r->next = c->req_pool;
    c->req_pool = r;
}

struct tcp_slot *tcp__slot_get(struct tcp_peer *p)
{
    struct tcp_slot *s = p->slot_pool;
    if (!s)
        return calloc(1, sizeof *s);
    p->slot_pool = s->next;
    memset(s, 0, sizeof *s);
    return s;
}

void tcp__slot_put(struct tcp_peer *p, struct tcp_slot *s)
{
    s->next = p->slot_pool;
    p->slot_pool = s;
}

struct tcp_frame *tcp__frame_get(struct tcp_peer *p)
{
    struct tcp_frame *f = p->frame_pool;
    if (!f)
        return calloc(1, sizeof *f);
    p->frame_pool = f->next;
    memset(f, 0, sizeof *f);
    return f;
}

void tcp__frame_put(struct tcp_peer *p, struct tcp_frame *f)
{
    f->next = p->frame_pool;
    p->frame_pool = f;
}

struct tcp_early *tcp__early_get(struct tcp_peer *p, size_t len)
{
    struct tcp_early *e = p->early_pool;
    if (e) {
        p->early_pool = e->next;
        p->early_pooled--;
    } else if (!(e = calloc(1, sizeof *e))) {
        return NULL;
    }
    if (e->cap < len || !e->data) {
        char *d = realloc(e->data, len ? len : 1);
        if (!d) {
            free(e->data);
            free(e);
            return NULL;
        }
        e->data = d;
        e->cap = len ? len : 1;
    }
    e->len = len;
    e->next = NULL;
    return e;
}

void tcp__early_put(struct tcp_peer *p, struct tcp_early *e)
{
    if (!e)
        return;
    if (p->early_pooled >= TCP_EARLY_POOL || e->cap > TCP_EARLY_POOL_BYTES) {
        free(e->data);
        free(e);
        return;
    }
    e->next = p->early_pool;
    p->early_pool = e;
    p->early_pooled++;
}

void tcp__pools_free(struct tcp_comm *c)
{
    for (int i = 0; i < c->size; i++) {
        struct tcp_peer *p = &c->peers[i];
        for (struct tcp_slot *s = p->slot_pool, *n; s; s = n) {
            n = s->next;
            free(s);
        }
        for (struct tcp_frame *f = p->frame_pool, *n; f; f = n) {
            n = f->next;
            free(f);
        }
        for (struct tcp_early *e = p->early_pool, *n; e; e = n) {
            n = e->next;
            free(e->data);
            free(e);
        }
        p->slot_pool = NULL;
        p->frame_pool = NULL;
        p->early_pool = NULL;
        p->early_pooled = 0;
    }
    for (struct tcp_req *r = c->req_pool, *n; r; r = n) {
        n = r->next;
        free(r);
    }
    c->req_pool = NULL;
}
