/* store_tcp_server.c - the TCPStore server: one thread, one poll loop for
 * every client, a bounded input buffer per client, and the pure request
 * decoder. With a job secret every client first passes the handshake of
 * auth.h (without blocking the loop, within [core] auth_timeout_ms). A
 * malformed request, a failed handshake or a breached limit drops that
 * client only, with a log line naming its address. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "store_tcp.h"

/* ---- decoder ------------------------------------------------------------ */

static int take_u64(const unsigned char *b, size_t n, size_t *off, uint64_t *v)
{
    if (n - *off < 8)
        return 0;
    memcpy(v, b + *off, 8);
    *off += 8;
    return 1;
}

/* A length-prefixed string: 1 ok, 0 need more, -1 too long (*bad = its length). */
static int take_str(const unsigned char *b, size_t n, size_t *off, uint64_t max, const char **s, size_t *len,
                    uint64_t *bad)
{
    uint64_t l;
    size_t o = *off;
    if (!take_u64(b, n, &o, &l))
        return 0;
    if (l > max) {
        *bad = l;
        return -1;
    }
    if (n - o < l)
        return 0;
    *s = (const char *)b + o;
    *len = (size_t)l;
    *off = o + (size_t)l;
    return 1;
}

static const struct plx__store_limits default_limits = {
    .max_key = PLX__STORE_MAX_KEY, .max_value = PLX__STORE_MAX_VALUE, .max_clients = PLX__STORE_MAX_CLIENTS,
    .max_pending = PLX__STORE_MAX_PENDING, .auth_timeout_ms = 10000,
};

long plx__store_decode(const unsigned char *buf, size_t n, struct plx__store_req *req, const char **why)
{
    return plx__store_decode_with(buf, n, req, why, &default_limits);
}

long plx__store_decode_with(const unsigned char *buf, size_t n, struct plx__store_req *req, const char **why,
                            const struct plx__store_limits *lim)
{
    memset(req, 0, sizeof *req);
    if (n < 1)
        return 0;
    size_t off = 1;
    req->type = buf[0];
    int nstr = 0, r;
    uint64_t maxes[3] = {lim->max_key, lim->max_value, lim->max_value};
    switch (req->type) {
    case PLX__Q_SET: nstr = 2; break;
    case PLX__Q_COMPARE_SET: nstr = 3; break;
    case PLX__Q_GET: case PLX__Q_DELETE_KEY: case PLX__Q_ADD: case PLX__Q_WATCH_KEY: nstr = 1; break;
    case PLX__Q_GETNUMKEYS: return 1;
    case PLX__Q_CHECK:
    case PLX__Q_WAIT: {
        uint64_t cnt;
        if (!take_u64(buf, n, &off, &cnt))
            return 0;
        if (cnt > PLX__STORE_MAX_KEYS) {
            *why = "too many keys in one request";
            return -1;
        }
        req->nkeys = (size_t)cnt;
        req->keys_at = buf + off;
        for (uint64_t i = 0; i < cnt; i++) {
            const char *s;
            size_t l;
            if ((r = take_str(buf, n, &off, lim->max_key, &s, &l, &req->bad_len)) <= 0) {
                if (r < 0)
                    *why = "key longer than [core] store_max_key_bytes";
                return r;
            }
        }
        return (long)off;
    }
    default:
        *why = "unknown query type";
        return -1;
    }
    for (int i = 0; i < nstr; i++) {
        if ((r = take_str(buf, n, &off, maxes[i], &req->str[i], &req->len[i], &req->bad_len)) <= 0) {
            if (r < 0)
                *why = i == 0 ? "key longer than [core] store_max_key_bytes"
                              : "value longer than [core] store_max_value_bytes";
            return r;
        }
    }
    req->nstr = (size_t)nstr;
    if (req->type == PLX__Q_ADD) {
        uint64_t d;
        if (!take_u64(buf, n, &off, &d))
            return 0;
        memcpy(&req->delta, &d, 8);
    }
    return (long)off;
}

void plx__store_req_key(const struct plx__store_req *req, size_t i, const char **key, size_t *len)
{
    const unsigned char *p = req->keys_at;
    for (size_t k = 0;; k++) {
        uint64_t l;
        memcpy(&l, p, 8);
        if (k == i) {
            *key = (const char *)p + 8;
            *len = (size_t)l;
            return;
        }
        p += 8 + l;
    }
}

/* ---- server state ------------------------------------------------------- */

struct kv {
    char *key;
    size_t klen;
    char *val;
    size_t vlen;
    struct kv *next;
};

struct conn {
    int fd;
    char addr[64];
    int authed;           /* passed the handshake (or no secret) */
    struct plx__auth hs;  /* the handshake while !authed */
    uint64_t hs_deadline; /* ... and when it must be over */
    unsigned char *in;
    size_t n, cap;
    char **wait_keys; /* a pending WAIT */
    size_t *wait_lens, nwait;
    size_t scan, queued; /* requests buffered behind the pending WAIT, counted up to in[scan] */
    int resume;          /* its WAIT was answered: serve what it queued */
    int dialect;         /* 0 before its first request, 1 torch 1.13, 2 torch 2.x (opened with VALIDATE) */
};

struct plx__store_server {
    int lfd, wake[2];
    pthread_t thread;
    struct plx__store_limits lim;
    char *secret;
    struct kv *kvs;
    struct conn *conns;
    size_t nconns;
};

static struct kv *kv_find(struct plx__store_server *s, const char *k, size_t kl)
{
    for (struct kv *e = s->kvs; e; e = e->next)
        if (e->klen == kl && !memcmp(e->key, k, kl))
            return e;
    return NULL;
}

static int kv_set(struct plx__store_server *s, const char *k, size_t kl, const char *v, size_t vl)
{
    struct kv *e = kv_find(s, k, kl);
    char *copy = malloc(vl ? vl : 1);
    if (!copy)
        return -1;
    memcpy(copy, v, vl);
    if (!e) {
        if (!(e = calloc(1, sizeof *e)) || !(e->key = malloc(kl ? kl : 1))) {
            free(e);
            free(copy);
            return -1;
        }
        memcpy(e->key, k, kl);
        e->klen = kl;
        e->next = s->kvs;
        s->kvs = e;
    }
    free(e->val);
    e->val = copy;
    e->vlen = vl;
    return 0;
}

static int reply(struct conn *c, const void *d, size_t n)
{
    const char *p = d;
    while (n) {
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1; /* SO_SNDTIMEO bounds a client that stops reading */
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int reply_bytes(struct conn *c, const char *d, size_t n)
{
    uint64_t l = n;
    return reply(c, &l, 8) || reply(c, d, n);
}

static void drop(struct conn *c, const char *why)
{
    if (why)
        plx__log(PLX_LOG_WARN, "store", "dropping store client %s: %s", c->addr, why);
    close(c->fd);
    c->fd = -1;
    for (size_t i = 0; i < c->nwait; i++)
        free(c->wait_keys[i]);
    free(c->wait_keys);
    free(c->wait_lens);
    c->wait_keys = NULL;
    c->nwait = 0;
    free(c->in);
    c->in = NULL;
    c->n = c->cap = 0;
}

/* Drop c for a refused request, naming the limit and what was asked. */
static void refuse(struct plx__store_server *s, struct conn *c, const char *why, const struct plx__store_req *q)
{
    char msg[256];
    if (strstr(why, "store_max_key_bytes"))
        snprintf(msg, sizeof msg, "%s (%llu > %llu bytes); refused", why, (unsigned long long)q->bad_len,
                 (unsigned long long)s->lim.max_key);
    else if (strstr(why, "store_max_value_bytes"))
        snprintf(msg, sizeof msg, "%s (%llu > %llu bytes); refused", why, (unsigned long long)q->bad_len,
                 (unsigned long long)s->lim.max_value);
    else
        snprintf(msg, sizeof msg, "%s", why);
    drop(c, msg);
}

/* Answer every pending WAIT whose keys now all exist. */
static void wake_waiters(struct plx__store_server *s)
{
    for (size_t i = 0; i < s->nconns; i++) {
        struct conn *c = &s->conns[i];
        if (c->fd < 0 || !c->nwait)
            continue;
        size_t k = 0;
        while (k < c->nwait && kv_find(s, c->wait_keys[k], c->wait_lens[k]))
            k++;
        if (k < c->nwait)
            continue;
        for (k = 0; k < c->nwait; k++)
            free(c->wait_keys[k]);
        free(c->wait_keys);
        free(c->wait_lens);
        c->wait_keys = NULL;
        c->wait_lens = NULL;
        c->nwait = 0;
        c->resume = c->n > 0;
        uint8_t r = PLX__STOP_WAITING;
        if (reply(c, &r, 1))
            drop(c, "cannot send the WAIT reply");
    }
}

/* COMPARE_SET: the new value goes in when the current one is the expected
 * one (no key counts as an empty expected value); the answer is the value
 * the key holds afterwards (the expected one if the key is missing). */
static int compare_set(struct plx__store_server *s, struct conn *c, const struct plx__store_req *q)
{
    struct kv *e = kv_find(s, q->str[0], q->len[0]);
    const char *cur = e ? e->val : NULL;
    size_t cl = e ? e->vlen : 0;
    if ((!e && q->len[1] == 0) || (e && cl == q->len[1] && !memcmp(cur, q->str[1], cl))) {
        if (kv_set(s, q->str[0], q->len[0], q->str[2], q->len[2]))
            return -1;
        wake_waiters(s);
        return reply_bytes(c, q->str[2], q->len[2]);
    }
    return e ? reply_bytes(c, cur, cl) : reply_bytes(c, q->str[1], q->len[1]);
}

/* ADD: the key holds a decimal number (a missing one counts as 0); the
 * sum wraps as torch's does and is both stored and answered. */
static int add_number(struct plx__store_server *s, struct conn *c, const struct plx__store_req *q)
{
    struct kv *e = kv_find(s, q->str[0], q->len[0]);
    int64_t v = 0;
    if (e) {
        char tmp[32] = {0};
        memcpy(tmp, e->val, e->vlen < 31 ? e->vlen : 31);
        v = strtoll(tmp, NULL, 10);
    }
    v = (int64_t)((uint64_t)v + (uint64_t)q->delta);
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", (long long)v);
    if (kv_set(s, q->str[0], q->len[0], text, (size_t)n))
        return -1;
    wake_waiters(s);
    return reply(c, &v, 8);
}

/* CHECK: READY when every key exists. */
static int check_keys(struct plx__store_server *s, struct conn *c, const struct plx__store_req *q)
{
    uint8_t r = PLX__READY;
    for (size_t i = 0; i < q->nkeys; i++) {
        const char *k;
        size_t l;
        plx__store_req_key(q, i, &k, &l);
        if (!kv_find(s, k, l))
            r = PLX__NOT_READY;
    }
    return reply(c, &r, 1);
}

/* WAIT: c keeps the keys and is answered (wake_waiters) once all exist;
 * at most [core] store_max_pending keys, so a client cannot make the
 * server hold without bound. */
static int wait_keys(struct plx__store_server *s, struct conn *c, const struct plx__store_req *q)
{
    if (q->nkeys > s->lim.max_pending) {
        char msg[160];
        snprintf(msg, sizeof msg, "WAIT on %zu keys: more than [core] store_max_pending = %zu; refused", q->nkeys,
                 s->lim.max_pending);
        drop(c, msg);
        return 0;
    }
    c->wait_keys = calloc(q->nkeys ? q->nkeys : 1, sizeof *c->wait_keys);
    c->wait_lens = calloc(q->nkeys ? q->nkeys : 1, sizeof *c->wait_lens);
    if (!c->wait_keys || !c->wait_lens)
        return -1;
    for (size_t i = 0; i < q->nkeys; i++) {
        const char *k;
        size_t l;
        plx__store_req_key(q, i, &k, &l);
        if (!(c->wait_keys[i] = malloc(l ? l : 1)))
            return -1;
        memcpy(c->wait_keys[i], k, l);
        c->wait_lens[i] = l;
        c->nwait = i + 1;
    }
    if (q->nkeys == 0) {
        uint8_t r = PLX__STOP_WAITING;
        return reply(c, &r, 1);
    }
    wake_waiters(s);
    return 0;
}

/* DELETE_KEY: answers 1 if the key existed, else 0. */
static int delete_key(struct plx__store_server *s, struct conn *c, const struct plx__store_req *q)
{
    int64_t n = 0;
    for (struct kv **p = &s->kvs; *p; p = &(*p)->next)
        if ((*p)->klen == q->len[0] && !memcmp((*p)->key, q->str[0], q->len[0])) {
            struct kv *e = *p;
            *p = e->next;
            free(e->key);
            free(e->val);
            free(e);
            n = 1;
            break;
        }
    return reply(c, &n, 8);
}

/* The torch 1.13 type of a torch 2.x code, or -1. */
static int torch2_type(unsigned char code)
{
    static const signed char map[] = {-1, PLX__Q_SET, PLX__Q_COMPARE_SET, PLX__Q_GET, PLX__Q_ADD, PLX__Q_CHECK,
                                      PLX__Q_WAIT, PLX__Q_GETNUMKEYS, PLX__Q_DELETE_KEY};
    return code < sizeof map ? map[code] : -1;
}

/* The request of c at in[at], in its dialect (found on its first request):
 * as plx__store_decode_with returns. */
static long decode_at(struct plx__store_server *s, struct conn *c, size_t at, struct plx__store_req *q,
                      const char **why)
{
    unsigned char *b = c->in + at;
    size_t n = c->n - at;
    memset(q, 0, sizeof *q);
    if (n < 1)
        return 0;
    if (c->dialect == 0 && b[0] == PLX__Q2_VALIDATE) { /* or torch 1.13's SET, whose key length follows */
        uint32_t magic;
        if (n < 5)
            return 0;
        memcpy(&magic, b + 1, 4);
        c->dialect = magic == PLX__TORCH2_MAGIC ? 2 : 1;
        if (c->dialect == 2) {
            q->type = PLX__Q_VALIDATE;
            return 5;
        }
    }
    if (c->dialect == 0)
        c->dialect = 1;
    if (c->dialect == 1)
        return plx__store_decode_with(b, n, q, why, &s->lim);
    if (b[0] == PLX__Q2_CANCEL_WAIT) {
        q->type = PLX__Q_CANCEL_WAIT;
        return 1;
    }
    if (b[0] == PLX__Q2_PING) {
        uint32_t nonce;
        if (n < 5)
            return 0;
        memcpy(&nonce, b + 1, 4);
        q->type = PLX__Q_PING;
        q->delta = nonce;
        return 5;
    }
    int t = torch2_type(b[0]);
    if (t < 0) {
        *why = "a torch 2.x query this server does not serve (APPEND, MULTI_GET, MULTI_SET or a queue)";
        return -1;
    }
    unsigned char code = b[0]; /* the decoder reads torch 1.13's codes */
    b[0] = (unsigned char)t;
    long r = plx__store_decode_with(b, n, q, why, &s->lim);
    b[0] = code;
    return r;
}

/* Serve one decoded request of c. Returns 0, or -1 when c cannot be
 * answered (out of memory, or the reply does not go): the caller drops c. */
static int handle(struct plx__store_server *s, struct conn *c, const struct plx__store_req *q)
{
    switch (q->type) {
    case PLX__Q_SET:
        if (kv_set(s, q->str[0], q->len[0], q->str[1], q->len[1]))
            return -1;
        wake_waiters(s);
        return 0;
    case PLX__Q_COMPARE_SET:
        return compare_set(s, c, q);
    case PLX__Q_GET: {
        struct kv *e = kv_find(s, q->str[0], q->len[0]);
        if (!e) { /* as torch's server: clients WAIT first, so this is a protocol error */
            drop(c, "GET of a missing key");
            return 0;
        }
        return reply_bytes(c, e->val, e->vlen);
    }
    case PLX__Q_ADD:
        return add_number(s, c, q);
    case PLX__Q_CHECK:
        return check_keys(s, c, q);
    case PLX__Q_WAIT:
        return wait_keys(s, c, q);
    case PLX__Q_GETNUMKEYS: {
        int64_t n = 0;
        for (struct kv *e = s->kvs; e; e = e->next)
            n++;
        return reply(c, &n, 8);
    }
    case PLX__Q_DELETE_KEY:
        return delete_key(s, c, q);
    case PLX__Q_VALIDATE:
        return 0;
    case PLX__Q_PING: {
        uint32_t nonce = (uint32_t)q->delta;
        return reply(c, &nonce, 4);
    }
    case PLX__Q_CANCEL_WAIT: { /* its WAIT was answered already */
        uint8_t r = PLX__WAIT_CANCELED;
        return reply(c, &r, 1);
    }
    default:
        drop(c, "WATCH_KEY is not supported by this server");
        return 0;
    }
}

static void process(struct plx__store_server *s, struct conn *c);

/* A torch 2.x client gave up its pending WAIT (CANCEL_WAIT, r bytes at
 * in[scan]): it hears WAIT_CANCELED, then what it queued is served. */
static void cancel_wait(struct plx__store_server *s, struct conn *c, size_t r)
{
    for (size_t k = 0; k < c->nwait; k++)
        free(c->wait_keys[k]);
    free(c->wait_keys);
    free(c->wait_lens);
    c->wait_keys = NULL;
    c->wait_lens = NULL;
    c->nwait = 0;
    memmove(c->in + c->scan, c->in + c->scan + r, c->n - c->scan - r);
    c->n -= r;
    uint8_t w = PLX__WAIT_CANCELED;
    if (reply(c, &w, 1)) {
        drop(c, "cannot send the WAIT_CANCELED reply");
        return;
    }
    process(s, c);
}

/* Count the requests c queued behind its pending WAIT; too many drops it
 * (a client may pipeline, but not without bound). */
static void count_queued(struct plx__store_server *s, struct conn *c)
{
    while (c->fd >= 0) {
        struct plx__store_req q;
        const char *why = "malformed request";
        long r = decode_at(s, c, c->scan, &q, &why);
        if (r == 0)
            return;
        if (r < 0) {
            refuse(s, c, why, &q);
            return;
        }
        if (q.type == PLX__Q_CANCEL_WAIT) {
            cancel_wait(s, c, (size_t)r);
            return;
        }
        c->scan += (size_t)r;
        if (c->nwait + ++c->queued > s->lim.max_pending) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "%zu pending operations (a WAIT on %zu keys and %zu requests behind it): more than [core] "
                     "store_max_pending = %zu; refused",
                     c->nwait + c->queued, c->nwait, c->queued, s->lim.max_pending);
            drop(c, msg);
            return;
        }
    }
}

/* Serve the complete requests in c's buffer, up to a WAIT that must wait. */
static void process(struct plx__store_server *s, struct conn *c)
{
    size_t used = 0;
    c->resume = 0;
    while (c->fd >= 0 && !c->nwait) {
        struct plx__store_req q;
        const char *why = "malformed request";
        long r = decode_at(s, c, used, &q, &why);
        if (r == 0)
            break;
        if (r < 0) {
            refuse(s, c, why, &q);
            return;
        }
        if (handle(s, c, &q) != 0) {
            drop(c, "cannot reply");
            return;
        }
        used += (size_t)r;
    }
    if (c->fd < 0)
        return;
    if (used) {
        memmove(c->in, c->in + used, c->n - used);
        c->n -= used;
    }
    c->scan = c->queued = 0;
    if (c->nwait)
        count_queued(s, c);
}

/* Read what the client sent and serve every complete request in it. */
static void on_readable(struct plx__store_server *s, struct conn *c)
{
    if (c->cap - c->n < 65536) {
        size_t cap = c->cap ? c->cap * 2 : 65536;
        /* One request holds a key and at most 2 values, each within the limits. */
        size_t most = (size_t)(s->lim.max_key + 2 * s->lim.max_value) + 1024;
        if (cap > most)
            cap = most;
        if (cap <= c->n) {
            drop(c, "request larger than the limits");
            return;
        }
        unsigned char *p = realloc(c->in, cap);
        if (!p) {
            drop(c, "out of memory");
            return;
        }
        c->in = p;
        c->cap = cap;
    }
    ssize_t k = recv(c->fd, c->in + c->n, c->cap - c->n, 0);
    if (k <= 0) {
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        drop(c, NULL); /* a client leaving is normal */
        return;
    }
    c->n += (size_t)k;
    if (c->nwait)
        count_queued(s, c);
    else
        process(s, c);
}

/* Advance c's handshake; it never blocks the loop. */
static void on_handshake(struct conn *c)
{
    int r = plx__auth_step(&c->hs, c->fd);
    if (r > 0) {
        c->authed = 1;
        plx__log(PLX_LOG_DEBUG, "store", "store client %s authenticated", c->addr);
    } else if (r < 0) {
        char msg[240];
        snprintf(msg, sizeof msg, "authentication failed: %s; refused", c->hs.why);
        drop(c, msg);
    }
}

static void accept_one(struct plx__store_server *s)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    char host[48] = "?", port[8] = "?";
    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
    size_t slot = s->nconns;
    for (size_t i = 0; i < s->nconns; i++)
        if (s->conns[i].fd < 0) {
            slot = i;
            break;
        }
    if (slot == s->lim.max_clients) {
        plx__log(PLX_LOG_WARN, "store", "refusing store client %s:%s: %zu clients already ([core] store_max_clients)",
                 host, port, s->lim.max_clients);
        close(fd);
        return;
    }
    if (slot == s->nconns)
        s->nconns++;
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1; /* replies go out in pieces (length, then bytes): no Nagle wait between them */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn *c = &s->conns[slot];
    memset(c, 0, sizeof *c);
    c->fd = fd;
    snprintf(c->addr, sizeof c->addr, "%s:%s", host, port);
    c->authed = s->secret == NULL;
    if (!c->authed) {
        c->hs_deadline = plx__deadline_ms(s->lim.auth_timeout_ms);
        if (plx__auth_init(&c->hs, PLX__AUTH_SERVER, s->secret, "store") != 0)
            drop(c, c->hs.why);
    }
}

/* Drop the clients whose handshake ran out of time; returns the poll
 * timeout (ms) until the next deadline, or -1 for none. */
static int expire(struct plx__store_server *s)
{
    uint64_t now = plx__clock_ns(), next = UINT64_MAX;
    for (size_t i = 0; i < s->nconns; i++) {
        struct conn *c = &s->conns[i];
        if (c->fd < 0 || c->authed)
            continue;
        if (now >= c->hs_deadline) {
            char msg[200];
            snprintf(msg, sizeof msg, "not authenticated within %lld ms ([core] auth_timeout_ms; it was %s)",
                     (long long)s->lim.auth_timeout_ms, plx__auth_waiting_for(&c->hs));
            drop(c, msg);
        } else if (c->hs_deadline < next) {
            next = c->hs_deadline;
        }
    }
    return next == UINT64_MAX ? -1 : (int)((next - now) / 1000000u) + 1;
}

static void *serve(void *arg)
{
    struct plx__store_server *s = arg;
    struct pollfd *pf = calloc(s->lim.max_clients + 2, sizeof *pf);
    if (!pf)
        return NULL;
    for (;;) {
        int ms = expire(s);
        pf[0] = (struct pollfd){s->wake[0], POLLIN, 0};
        pf[1] = (struct pollfd){s->lfd, POLLIN, 0};
        for (size_t i = 0; i < s->nconns; i++) {
            struct conn *c = &s->conns[i];
            pf[i + 2] = (struct pollfd){c->fd, c->authed ? POLLIN : plx__auth_events(&c->hs), 0};
        }
        if (poll(pf, s->nconns + 2, ms) < 0 && errno != EINTR)
            break;
        if (pf[0].revents)
            break;
        for (size_t i = 0; i < s->nconns; i++) {
            struct conn *c = &s->conns[i];
            if (c->fd < 0 || !pf[i + 2].revents)
                continue;
            if (c->authed)
                on_readable(s, c);
            else
                on_handshake(c);
        }
        /* Clients whose WAIT was answered may have requests queued. */
        for (int again = 1; again;) {
            again = 0;
            for (size_t i = 0; i < s->nconns; i++)
                if (s->conns[i].fd >= 0 && s->conns[i].resume) {
                    process(s, &s->conns[i]);
                    again = 1;
                }
        }
        if (pf[1].revents)
            accept_one(s);
    }
    free(pf);
    return NULL;
}

/* Resolve where to listen: lim->listen if set ("*": every interface),
 * else host. */
static int resolve_listen(const char *host, int port, const struct plx__store_limits *lim, struct addrinfo **res)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    const char *where = lim->listen && *lim->listen ? lim->listen : host;
    if (!strcmp(where, "*"))
        where = NULL;
    int gai = getaddrinfo(where, ps, &hints, res);
    if (gai)
        return plx__err(PLX_ERR_INVALID_ARG, "store server %s:%d: cannot resolve: %s", where ? where : "*", port,
                        gai_strerror(gai));
    return 0;
}

int plx__store_server_start(const char *host, int port, struct plx__store_server **out, int *bound_port)
{
    struct plx__store_limits lim;
    int rc = plx__store_limits_from_config(NULL, &lim);
    return rc ? rc : plx__store_server_start_with(host, port, &lim, out, bound_port);
}

int plx__store_server_start_with(const char *host, int port, const struct plx__store_limits *lim,
                                 struct plx__store_server **out, int *bound_port)
{
    struct addrinfo *res;
    int rc = resolve_listen(host, port, lim, &res);
    if (rc)
        return rc;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return plx__err(PLX_ERR_SYSTEM, "store server: cannot listen on %s:%d: %s%s", host, port, strerror(e),
                        e == EADDRINUSE ? " (another job, or a previous run, still holds the port)" : "");
    }
    freeaddrinfo(res);
    struct plx__store_server *s = calloc(1, sizeof *s);
    if (!s || !(s->conns = calloc(lim->max_clients ? lim->max_clients : 1, sizeof *s->conns)) ||
        (lim->secret && !(s->secret = strdup(lim->secret))) || pipe2(s->wake, O_CLOEXEC)) {
        if (s) {
            free(s->conns);
            free(s->secret);
        }
        free(s);
        close(fd);
        return plx__err(PLX_ERR_NOMEM, "store server: out of resources");
    }
    s->lfd = fd;
    s->lim = *lim;
    s->lim.secret = s->secret;
    s->lim.listen = NULL;
    if (bound_port) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    }
    if (pthread_create(&s->thread, NULL, serve, s) != 0) {
        close(fd);
        close(s->wake[0]);
        close(s->wake[1]);
        free(s->conns);
        free(s->secret);
        free(s);
        return plx__err(PLX_ERR_SYSTEM, "store server: cannot start its thread");
    }
    *out = s;
    return 0;
}

void plx__store_server_stop(struct plx__store_server *s)
{
    if (!s)
        return;
    if (write(s->wake[1], "x", 1) < 0)
        plx__log(PLX_LOG_WARN, "store", "cannot wake the store server");
    pthread_join(s->thread, NULL);
    for (size_t i = 0; i < s->nconns; i++)
        if (s->conns[i].fd >= 0)
            drop(&s->conns[i], NULL);
    for (struct kv *e = s->kvs, *n; e; e = n) {
        n = e->next;
        free(e->key);
        free(e->val);
        free(e);
    }
    close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s->conns);
    if (s->secret) {
        explicit_bzero(s->secret, strlen(s->secret));
        free(s->secret);
    }
    free(s);
}
