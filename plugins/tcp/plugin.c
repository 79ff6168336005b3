/* plugin.c - the tcp backend: point-to-point over one TCP connection per
 * pair of ranks; every collective comes from the core's generic algorithms.
 *
 * This first version uses its own framing (a 16-byte header: tag, length)
 * and eager sends: isend writes header and payload with one writev in the
 * caller's thread, and a reader thread per peer receives straight into a
 * posted buffer (or an unexpected-message buffer when none is posted yet),
 * so both directions of every pair flow at once. Gloo's pair protocol on the
 * wire is not implemented yet (see the issue notes).
 *
 * Bootstrap: each rank listens on [tcp] address (default 127.0.0.1, port 0),
 * publishes "ip:port" under tcp/addr/<rank> in the store, connects to every
 * lower rank and accepts every higher one; a hello carries the rank. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "plexus/backend.h"

static const struct plx_host *host;

#define HELLO_MAGIC 0x504c5854u /* "PLXT" */
#define MAX_MESSAGE (UINT64_C(1) << 40)

struct req {
    int is_send, peer, done, status;
    void *buf;
    size_t bytes;
    uint64_t tag;
    int freed;
    char err[200];
    struct req *next;
};

struct unexpected {
    uint64_t tag;
    void *data;
    size_t len;
    struct unexpected *next;
};

struct peer {
    int fd, rank;
    char addr[64];
    pthread_t reader;
    int reader_started;
    pthread_mutex_t send_mu;
    struct req *posted;         /* receives posted for this peer, FIFO */
    struct unexpected *unexp;   /* messages that arrived before their receive */
    int lost;
    char lost_msg[200];
};

struct impl {
    int rank, size;
    int64_t timeout_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct peer *peers;
    int aborted;
    struct req *any_posted;     /* receives from any source */
};

static _Thread_local char last_error[256];

static int fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return host->error(host->ctx, status, "%s", last_error);
}

static int full_io(int fd, int is_write, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t k = is_write ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, MSG_WAITALL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k == 0 ? ECONNRESET : errno;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void complete(struct impl *c, struct req *r, int status, const char *msg)
{
    r->status = status;
    if (msg)
        snprintf(r->err, sizeof r->err, "%s", msg);
    r->done = 1;
    pthread_cond_broadcast(&c->cv);
}

/* Under c->mu: the first posted receive that matches (peer, tag). */
static struct req *take_posted(struct impl *c, struct peer *p, uint64_t tag)
{
    for (struct req **q = &p->posted; *q; q = &(*q)->next)
        if ((*q)->tag == tag) {
            struct req *r = *q;
            *q = r->next;
            return r;
        }
    for (struct req **q = &c->any_posted; *q; q = &(*q)->next)
        if ((*q)->tag == tag) {
            struct req *r = *q;
            *q = r->next;
            return r;
        }
    return NULL;
}

static void peer_lost(struct impl *c, struct peer *p, const char *why)
{
    pthread_mutex_lock(&c->mu);
    if (!p->lost) {
        p->lost = 1;
        snprintf(p->lost_msg, sizeof p->lost_msg, "tcp: connection to rank %d (%s) lost: %s", p->rank, p->addr, why);
    }
    /* Every pending receive from that peer fails, and so do any-source ones. */
    for (struct req *r = p->posted, *n; r; r = n) {
        n = r->next;
        complete(c, r, PLX_ERR_PEER_LOST, p->lost_msg);
    }
    p->posted = NULL;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

struct reader_arg {
    struct impl *c;
    struct peer *p;
};

static void *reader(void *arg)
{
    struct reader_arg *ra = arg;
    struct impl *c = ra->c;
    struct peer *p = ra->p;
    free(ra);
    for (;;) {
        uint64_t hdr[2];
        int e = full_io(p->fd, 0, hdr, sizeof hdr);
        if (e) {
            peer_lost(c, p, e == ECONNRESET ? "closed by the peer" : strerror(e));
            return NULL;
        }
        uint64_t tag = hdr[0], len = hdr[1];
        if (len > MAX_MESSAGE) {
            host->log(host->ctx, PLX_LOG_WARN, "tcp: rank %d (%s) sent a frame of %llu bytes; dropping it", p->rank,
                      p->addr, (unsigned long long)len);
            peer_lost(c, p, "malformed frame (length too large)");
            return NULL;
        }
        pthread_mutex_lock(&c->mu);
        struct req *r = take_posted(c, p, tag);
        pthread_mutex_unlock(&c->mu);
        if (r && len > r->bytes) {
            pthread_mutex_lock(&c->mu);
            char msg[200];
            snprintf(msg, sizeof msg, "tcp: rank %d sent %llu bytes (tag %llu) into a %zu-byte receive", p->rank,
                     (unsigned long long)len, (unsigned long long)tag, r->bytes);
            complete(c, r, PLX_ERR_INVALID_ARG, msg);
            pthread_mutex_unlock(&c->mu);
            r = NULL; /* drain into an unexpected buffer and drop it */
        }
        void *dst = r ? r->buf : malloc(len ? len : 1);
        if (!r && !dst) {
            peer_lost(c, p, "out of memory for an unexpected message");
            return NULL;
        }
        if ((e = len ? full_io(p->fd, 0, dst, len) : 0) != 0) {
            if (!r)
                free(dst);
            else {
                pthread_mutex_lock(&c->mu);
                p->posted = r; /* fail it with the others */
                r->next = NULL;
                pthread_mutex_unlock(&c->mu);
            }
            peer_lost(c, p, e == ECONNRESET ? "closed by the peer" : strerror(e));
            return NULL;
        }
        pthread_mutex_lock(&c->mu);
        struct req *late = r ? NULL : take_posted(c, p, tag);
        if (late) { /* its receive was posted while the payload arrived */
            if (len > late->bytes) {
                char msg[200];
                snprintf(msg, sizeof msg, "tcp: rank %d sent %llu bytes into a %zu-byte receive", p->rank,
                         (unsigned long long)len, late->bytes);
                complete(c, late, PLX_ERR_INVALID_ARG, msg);
            } else {
                memcpy(late->buf, dst, len);
                complete(c, late, 0, NULL);
            }
            free(dst);
        } else if (r) {
            complete(c, r, 0, NULL);
        } else {
            struct unexpected *u = malloc(sizeof *u);
            if (u) {
                *u = (struct unexpected){tag, dst, (size_t)len, NULL};
                struct unexpected **t = &p->unexp;
                while (*t)
                    t = &(*t)->next;
                *t = u;
            }
            pthread_cond_broadcast(&c->cv);
        }
        pthread_mutex_unlock(&c->mu);
    }
}

/* ---- bootstrap ---------------------------------------------------------- */

static int set_sock_opts(int fd)
{
    int one = 1, buf = 4 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    return 0;
}

static int connect_mesh(struct impl *c, const struct plx_comm_args *a)
{
    const char *addr = host->config_get(host->ctx, "address");
    if (!addr || !*addr)
        addr = "127.0.0.1";
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        return fail(PLX_ERR_CONFIG, "tcp: [tcp] address '%s' is not an IPv4 address", addr);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t sl = sizeof sa;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 256) ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl)) {
        int e = errno;
        if (lfd >= 0)
            close(lfd);
        return fail(PLX_ERR_SYSTEM, "tcp: rank %d cannot listen on %s: %s", c->rank, addr, strerror(e));
    }
    char mine[64], key[64];
    snprintf(mine, sizeof mine, "%s:%d", addr, ntohs(sa.sin_port));
    snprintf(key, sizeof key, "tcp/addr/%d", c->rank);
    int rc = host->store_set(a->store, key, mine, strlen(mine));
    uint64_t deadline = host->clock_ns() + (uint64_t)a->timeout_ms * 1000000u;
    for (int j = 0; rc == 0 && j < c->rank; j++) {
        void *val = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "tcp/addr/%d", j);
        rc = host->store_get(a->store, key, &val, &len, a->timeout_ms);
        if (rc) {
            rc = fail(rc, "tcp: rank %d: rank %d never published its address (waited %lld ms)", c->rank, j,
                      (long long)a->timeout_ms);
            break;
        }
        struct peer *p = &c->peers[j];
        snprintf(p->addr, sizeof p->addr, "%.*s", (int)(len < 63 ? len : 63), (char *)val);
        host->free(val);
        char *colon = strrchr(p->addr, ':');
        struct sockaddr_in pa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(colon ? atoi(colon + 1) : 0))};
        if (colon)
            *colon = '\0';
        inet_pton(AF_INET, p->addr, &pa.sin_addr);
        if (colon)
            *colon = ':';
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        while (fd >= 0 && connect(fd, (struct sockaddr *)&pa, sizeof pa) != 0) {
            if (host->clock_ns() > deadline) {
                close(fd);
                fd = -1;
                break;
            }
            usleep(10000);
        }
        if (fd < 0) {
            rc = fail(PLX_ERR_TIMEOUT, "tcp: rank %d cannot connect to rank %d at %s", c->rank, j, p->addr);
            break;
        }
        set_sock_opts(fd);
        uint32_t hello[2] = {HELLO_MAGIC, (uint32_t)c->rank};
        if (full_io(fd, 1, hello, sizeof hello)) {
            close(fd);
            rc = fail(PLX_ERR_PEER_LOST, "tcp: rank %d: hello to rank %d failed", c->rank, j);
            break;
        }
        p->fd = fd;
    }
    /* Accept every higher rank; a connection without a valid hello is dropped. */
    int need = c->size - 1 - c->rank;
    while (rc == 0 && need > 0) {
        int64_t left = (int64_t)(deadline - host->clock_ns()) / 1000000;
        struct pollfd pf = {lfd, POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0) {
            char miss[128] = "";
            for (int j = c->rank + 1; j < c->size; j++)
                if (c->peers[j].fd < 0) {
                    size_t l = strlen(miss);
                    snprintf(miss + l, sizeof miss - l, "%s%d", l ? "," : "", j);
                }
            rc = fail(PLX_ERR_TIMEOUT, "tcp: rank %d waited %lld ms for rank(s) %s to connect", c->rank,
                      (long long)a->timeout_ms, miss);
            break;
        }
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        int fd = accept4(lfd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        struct timeval tv = {2, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        uint32_t hello[2];
        int ok = full_io(fd, 0, hello, sizeof hello) == 0 && hello[0] == HELLO_MAGIC && (int)hello[1] > c->rank &&
                 (int)hello[1] < c->size && c->peers[hello[1]].fd < 0;
        if (!ok) {
            char ip[32] = "?";
            inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
            host->log(host->ctx, PLX_LOG_WARN, "tcp: rank %d: refusing a connection from %s:%d without a valid hello",
                      c->rank, ip, ntohs(from.sin_port));
            close(fd);
            continue;
        }
        struct timeval none = {0, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
        set_sock_opts(fd);
        struct peer *p = &c->peers[hello[1]];
        p->fd = fd;
        char ip[32] = "?";
        inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
        snprintf(p->addr, sizeof p->addr, "%s:%d", ip, ntohs(from.sin_port));
        need--;
    }
    close(lfd);
    return rc;
}

/* ---- operations --------------------------------------------------------- */

static int probe(struct plx_probe_result *out)
{
    out->state = PLX_PROBE_USABLE;
    snprintf(out->reason, sizeof out->reason, "TCP sockets");
    return 0;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    uint32_t size = out->struct_size;
    struct plx_caps caps = {.struct_size = size,
                            .flags = PLX_CAP_ASYNC | PLX_CAP_ABORT | PLX_CAP_THREAD_SAFE | PLX_CAP_MULTI_NODE |
                                     PLX_CAP_ANY_SOURCE | PLX_CAP_P2P,
                            .dtypes = PLX_BIT(PLX_DTYPE_COUNT) - 1,
                            .redops = PLX_BIT(PLX_REDOP_COUNT) - 1,
                            .mem_kinds = PLX_BIT(PLX_MEM_HOST)};
    memcpy(out, &caps, size < sizeof caps ? size : sizeof caps);
    return 0;
}

static void close_all(struct impl *c)
{
    for (int i = 0; i < c->size; i++)
        if (c->peers[i].fd >= 0)
            shutdown(c->peers[i].fd, SHUT_RDWR);
    for (int i = 0; i < c->size; i++) {
        struct peer *p = &c->peers[i];
        if (p->reader_started)
            pthread_join(p->reader, NULL);
        if (p->fd >= 0)
            close(p->fd);
        for (struct unexpected *u = p->unexp, *n; u; u = n) {
            n = u->next;
            free(u->data);
            free(u);
        }
        pthread_mutex_destroy(&p->send_mu);
    }
}

static int comm_create(const struct plx_comm_args *a, void **out)
{
    if (!a->store)
        return fail(PLX_ERR_INVALID_USAGE, "tcp: needs a rendezvous store (MASTER_ADDR/MASTER_PORT or PLEXUS_INIT)");
    struct impl *c = calloc(1, sizeof *c);
    if (!c || !(c->peers = calloc((size_t)a->size, sizeof *c->peers))) {
        free(c);
        return fail(PLX_ERR_NOMEM, "tcp: out of memory");
    }
    c->rank = a->rank;
    c->size = a->size;
    c->timeout_ms = a->timeout_ms;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < a->size; i++) {
        c->peers[i].fd = -1;
        c->peers[i].rank = i;
        pthread_mutex_init(&c->peers[i].send_mu, NULL);
    }
    int rc = connect_mesh(c, a);
    for (int i = 0; rc == 0 && i < a->size; i++) {
        if (i == a->rank)
            continue;
        struct reader_arg *ra = malloc(sizeof *ra);
        *ra = (struct reader_arg){c, &c->peers[i]};
        if (pthread_create(&c->peers[i].reader, NULL, reader, ra) == 0)
            c->peers[i].reader_started = 1;
        else
            rc = fail(PLX_ERR_SYSTEM, "tcp: cannot start a reader thread");
    }
    if (rc) {
        close_all(c);
        free(c->peers);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int comm_abort(void *comm)
{
    struct impl *c = comm;
    pthread_mutex_lock(&c->mu);
    c->aborted = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static int comm_destroy(void *comm)
{
    struct impl *c = comm;
    close_all(c);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->peers);
    free(c);
    return 0;
}

static int isend(void *comm, const struct plx_p2p_args *a, void **out)
{
    struct impl *c = comm;
    struct peer *p = &c->peers[a->peer];
    struct req *r = calloc(1, sizeof *r);
    if (!r)
        return fail(PLX_ERR_NOMEM, "tcp: out of memory");
    r->is_send = 1;
    r->peer = a->peer;
    if (a->peer == c->rank)
        return free(r), fail(PLX_ERR_INVALID_ARG, "tcp: rank %d cannot send to itself", c->rank);
    pthread_mutex_lock(&c->mu);
    int lost = p->lost;
    pthread_mutex_unlock(&c->mu);
    if (lost) {
        free(r);
        return fail(PLX_ERR_PEER_LOST, "%s", p->lost_msg);
    }
    /* Eager: header and payload in one writev; the peer's reader drains it. */
    uint64_t hdr[2] = {a->tag, a->bytes};
    struct iovec iov[2] = {{hdr, sizeof hdr}, {a->buf, a->bytes}};
    struct iovec *v = iov;
    int cnt = a->bytes ? 2 : 1, e = 0;
    pthread_mutex_lock(&p->send_mu);
    while (cnt) {
        ssize_t k = writev(p->fd, v, cnt);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            e = errno;
            break;
        }
        size_t left = (size_t)k;
        while (cnt && left >= v->iov_len) {
            left -= v->iov_len;
            v++;
            cnt--;
        }
        if (cnt) {
            v->iov_base = (char *)v->iov_base + left;
            v->iov_len -= left;
        }
    }
    pthread_mutex_unlock(&p->send_mu);
    if (e) {
        free(r);
        return fail(PLX_ERR_PEER_LOST, "tcp: send to rank %d (%s) failed: %s", a->peer, p->addr, strerror(e));
    }
    r->done = 1;
    *out = r;
    return 0;
}

static int irecv(void *comm, const struct plx_p2p_args *a, void **out)
{
    struct impl *c = comm;
    struct req *r = calloc(1, sizeof *r);
    if (!r)
        return fail(PLX_ERR_NOMEM, "tcp: out of memory");
    r->peer = a->peer;
    r->buf = a->buf;
    r->bytes = a->bytes;
    r->tag = a->tag;
    pthread_mutex_lock(&c->mu);
    /* An unexpected message may already be here. */
    for (int i = 0; i < c->size; i++) {
        if (i == c->rank || (a->peer != PLX_ANY_SOURCE && a->peer != i))
            continue;
        struct peer *p = &c->peers[i];
        for (struct unexpected **u = &p->unexp; *u; u = &(*u)->next)
            if ((*u)->tag == a->tag) {
                struct unexpected *m = *u;
                *u = m->next;
                if (m->len > r->bytes) {
                    char msg[200];
                    snprintf(msg, sizeof msg, "tcp: rank %d sent %zu bytes into a %zu-byte receive", i, m->len,
                             r->bytes);
                    complete(c, r, PLX_ERR_INVALID_ARG, msg);
                } else {
                    memcpy(r->buf, m->data, m->len);
                    complete(c, r, 0, NULL);
                }
                free(m->data);
                free(m);
                pthread_mutex_unlock(&c->mu);
                *out = r;
                return 0;
            }
    }
    if (a->peer == PLX_ANY_SOURCE) {
        struct req **t = &c->any_posted;
        while (*t)
            t = &(*t)->next;
        *t = r;
    } else {
        struct peer *p = &c->peers[a->peer];
        if (p->lost) {
            complete(c, r, PLX_ERR_PEER_LOST, p->lost_msg);
        } else {
            struct req **t = &p->posted;
            while (*t)
                t = &(*t)->next;
            *t = r;
        }
    }
    pthread_mutex_unlock(&c->mu);
    *out = r;
    return 0;
}

static int test(void *comm, void *req, int *done)
{
    struct impl *c = comm;
    struct req *r = req;
    pthread_mutex_lock(&c->mu);
    *done = r->done;
    int st = r->status;
    if (r->done && st)
        fail(st, "%s", r->err);
    pthread_mutex_unlock(&c->mu);
    return r->done ? st : 0;
}

static int wait_req(void *comm, void *req, int64_t timeout_ms)
{
    struct impl *c = comm;
    struct req *r = req;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    pthread_mutex_lock(&c->mu);
    while (!r->done && !c->aborted) {
        if (timeout_ms == PLX_TIMEOUT_INFINITE)
            pthread_cond_wait(&c->cv, &c->mu);
        else if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT)
            break;
    }
    int done = r->done, st = r->status, aborted = c->aborted;
    pthread_mutex_unlock(&c->mu);
    if (done)
        return st ? fail(st, "%s", r->err) : 0;
    if (aborted)
        return fail(PLX_ERR_ABORTED, "tcp: rank %d: communicator aborted", c->rank);
    return fail(PLX_ERR_TIMEOUT, "tcp: rank %d waited %lld ms for rank %d", c->rank, (long long)timeout_ms, r->peer);
}

static void req_free(void *comm, void *req)
{
    struct impl *c = comm;
    struct req *r = req;
    pthread_mutex_lock(&c->mu);
    if (!r->done) { /* withdraw a pending receive */
        struct req **lists[2] = {r->peer >= 0 ? &c->peers[r->peer].posted : NULL, &c->any_posted};
        for (int k = 0; k < 2; k++)
            for (struct req **q = lists[k]; q && *q; q = &(*q)->next)
                if (*q == r) {
                    *q = r->next;
                    k = 2;
                    break;
                }
    }
    pthread_mutex_unlock(&c->mu);
    free(r);
}

static const struct plx_param params[] = {
    {"address", "127.0.0.1", "IPv4 address to listen on and publish to the other ranks"},
    {NULL, NULL, NULL},
};

static const struct plx_backend tcp_backend = {
    .struct_size = sizeof(struct plx_backend),
    .abi_minor = PLX_ABI_MINOR,
    .name = "tcp",
    .version = "0.1.0",
    .description = "TCP sockets, one connection per pair of ranks; collectives from the core",
    .params = params,
    .probe = probe,
    .get_caps = get_caps,
    .comm_create = comm_create,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .isend = isend,
    .irecv = irecv,
    .test = test,
    .wait = wait_req,
    .req_free = req_free,
};

PLX_BACKEND_EXPORT int plx_backend_entry_v1(const struct plx_host *h, uint32_t *minor, const struct plx_backend **out)
{
    host = h;
    if (*minor > PLX_ABI_MINOR)
        *minor = PLX_ABI_MINOR;
    *out = &tcp_backend;
    return 0;
}
