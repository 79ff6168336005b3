/* store_tcp.c - tcp://HOST:PORT: a key-value store speaking PyTorch's
 * TCPStore protocol of the torch 1.13 era (u8 query type, u64 little-endian
 * length-prefixed strings, i64 integers; no magic number). The client also
 * speaks torch 2.x's dialect to a torch 2.x server (torchrun's agent store):
 * each connection opens with VALIDATE and a magic number, and the query
 * codes are renumbered; it finds out which one a server speaks on its first
 * connection (torch_dialect below). Rank 0 hosts the
 * server (one poll loop thread for every client) unless PLEXUS_STORE_HOSTED=1
 * says a launcher does; every rank is a client. Every length the server
 * reads is bounded, so a bad client is dropped with a logged reason. With a
 * job secret (PLEXUS_JOB_SECRET, [core] auth) every connection starts with
 * the mutual handshake of auth.h; without one the protocol is torch's. */
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
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "config.h"
#include "error.h"
#include "liveness.h"
#include "log.h"
#include "resolve.h"
#include "store.h"
#include "store_tcp.h"

/* ---- client ------------------------------------------------------------- */

struct client {
    struct plx_store base;
    pthread_mutex_t mu;
    int fd;
    char host[256], port[16];
    char where[320];                  /* "store tcp://HOST:PORT", and who hosts it when known */
    struct plx__store_server *server; /* hosted here (rank 0), or NULL */
    char lost[320];                   /* why the connection broke, or "" */
    struct plx__store_limits lim;
    char *secret;                     /* copy of lim.secret, or NULL */
    int dialect;                      /* DIALECT_*: what the server was found to speak */
};

enum { DIALECT_UNKNOWN, DIALECT_TORCH1, DIALECT_TORCH2 };

/* torch 2.x: a fresh connection's first query must be VALIDATE with this number. */
#define TORCH2_VALIDATE 0
#define TORCH2_MAGIC 0x3C85F7CEu

/* The wire code of a query in the server's dialect: torch 2.x put VALIDATE
 * first and dropped WATCH_KEY, so the codes before it moved up by one. */
static uint8_t code(const struct client *c, int query)
{
    if (c->dialect == DIALECT_TORCH2 && query < PLX__Q_WATCH_KEY)
        return (uint8_t)(query + 1);
    return (uint8_t)query;
}

static int64_t key_int(const struct plx_config *v, const char *key, int64_t def, int *rc)
{
    int64_t n = def;
    if (*rc == 0)
        *rc = plx__config_int_in(v, "core", key, def, &n);
    return n;
}

int plx__store_limits_from_config(const struct plx_config *v, struct plx__store_limits *lim)
{
    int rc = 0;
    memset(lim, 0, sizeof *lim);
    lim->max_key = (uint64_t)key_int(v, "store_max_key_bytes", PLX__STORE_MAX_KEY, &rc);
    lim->max_value = (uint64_t)key_int(v, "store_max_value_bytes", PLX__STORE_MAX_VALUE, &rc);
    lim->max_clients = (size_t)key_int(v, "store_max_clients", PLX__STORE_MAX_CLIENTS, &rc);
    lim->max_pending = (size_t)key_int(v, "store_max_pending", PLX__STORE_MAX_PENDING, &rc);
    if (rc == 0)
        rc = plx__config_ms_in(v, "core", "auth_timeout_ms", &lim->auth_timeout_ms);
    lim->listen = plx__config_get_in(v, "core", "store_listen", NULL);
    if (rc)
        return rc;
    if (lim->max_clients < 1 || lim->max_pending < 1 || lim->max_key < 1)
        return plx__err(PLX_ERR_CONFIG, "[core] store_max_clients, store_max_pending and store_max_key_bytes "
                                        "must be at least 1");
    /* Without a secret: torch-compatible, a plain TCPStore. */
    char why[200];
    const char *origin = NULL, *mode = plx__config_get_in(v, "core", "auth", &origin);
    if (plx__auth_policy("core", mode, getenv(PLX__AUTH_ENV), &lim->secret, why, sizeof why))
        return plx__err(PLX_ERR_CONFIG, "store: %s ([core] auth from %s)", why, origin);
    return 0;
}

/* The handshake on a fresh connection, bounded by deadline. */
static int authenticate(struct client *c, int fd, uint64_t deadline)
{
    if (!c->secret)
        return 0;
    struct plx__auth a;
    int r = plx__auth_init(&a, PLX__AUTH_CLIENT, c->secret, "store");
    if (r == 0)
        r = plx__auth_run(&a, fd, deadline);
    else
        r = -1;
    if (r == 1)
        return 0;
    return plx__err(r == 0 ? PLX_ERR_TIMEOUT : PLX_ERR_AUTH,
                    "%s: authentication with %s failed: %s", c->where, PLX__AUTH_ENV,
                    a.why);
}

/* One connection attempt to a, bounded by deadline: a non-blocking
 * connect, so that a host whose SYNs are dropped (a firewall, a dead host)
 * costs the time left, not the kernel's two minutes of retries. The fd or
 * -1 with *err (ETIMEDOUT when the deadline came first). */
static int connect_one(const struct addrinfo *a, uint64_t deadline, int *err)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    while (rc != 0 && (errno == EINPROGRESS || errno == EINTR)) {
        uint64_t now = plx__clock_ns();
        if (deadline != PLX__NEVER && now >= deadline) {
            errno = ETIMEDOUT;
            break;
        }
        struct pollfd pf = {fd, POLLOUT, 0};
        int ms = deadline == PLX__NEVER ? -1 : (int)((deadline - now) / 1000000) + 1;
        int r = poll(&pf, 1, ms);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0) {
            errno = EINPROGRESS; /* again, or out of time at the top */
            continue;
        }
        int e = 0;
        socklen_t el = sizeof e;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
            e = errno;
        rc = e ? -1 : 0;
        errno = e;
        break;
    }
    if (rc != 0) {
        *err = errno;
        close(fd);
        return -1;
    }
    /* The callers poll before every transfer: blocking mode as before. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* A task of this node's Slurm step that has exited (the store's host that
 * could not listen, a rank that crashed): waiting on is pointless. 0, or
 * an error naming it; looks once a second (*next_ns). */
static int task_gone(const struct client *c, uint64_t *next_ns, const char *doing)
{
    uint64_t now = plx__clock_ns();
    if (now < *next_ns)
        return 0;
    *next_ns = now + 1000000000u;
    long t = plx__liveness_local();
    if (t < 0)
        return 0;
    return plx__err(PLX_ERR_PEER_LOST, "%s: %s, and Slurm task %ld on this node has exited (if it was to host the "
                    "store, whatever holds the port is not a plexus store: a port taken by another program?)",
                    c->where, doing, t);
}

static int connect_until(const struct client *c, uint64_t deadline, int *out)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int64_t left = plx__ms_left(deadline);
    int gai = plx_common_resolve(c->host, c->port, &hints, left, &res);
    if (gai == EAI_AGAIN && errno == ETIMEDOUT)
        return plx__err(PLX_ERR_TIMEOUT, "%s: cannot resolve '%s' within %lld ms: no answer from the name server",
                        c->where, c->host, (long long)left);
    if (gai)
        return plx__err(PLX_ERR_INVALID_ARG, "%s: cannot resolve '%s': %s", c->where, c->host, gai_strerror(gai));
    uint64_t start = plx__clock_ns(), look = start + 1000000000u;
    int last = 0;
    for (;;) {
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            int e = 0, fd = connect_one(a, deadline, &e);
            if (fd >= 0) {
                freeaddrinfo(res);
                *out = fd;
                return 0;
            }
            /* The attempt the deadline cut short tells less than the
             * refusals before it: nothing listened, no firewall. */
            if (!(e == ETIMEDOUT && last && last != ETIMEDOUT && plx__clock_ns() >= deadline))
                last = e;
        }
        if (plx__clock_ns() >= deadline)
            break;
        char doing[96];
        snprintf(doing, sizeof doing, "no server yet (%s)", strerror(last));
        int gone = task_gone(c, &look, doing);
        if (gone) {
            freeaddrinfo(res);
            return gone;
        }
        usleep(20000); /* the server may not be up yet */
    }
    freeaddrinfo(res);
    return plx__err(PLX_ERR_TIMEOUT, "%s: cannot connect to %s port %s within %lld ms: %s (%s)", c->where, c->host,
                    c->port, (long long)((plx__clock_ns() - start) / 1000000), strerror(last),
                    last == ETIMEDOUT      ? "no answer: a firewall or a host that is down?"
                    : last == ECONNREFUSED ? "nothing listened there in time: has the store's host started?"
                                           : "no server appeared in time");
}

/* Move exactly n bytes, each wait bounded by the deadline (PLX__NEVER: none). */
static int xfer(struct client *c, int is_write, void *buf, size_t n, uint64_t deadline)
{
    char *p = buf;
    while (n) {
        int ms = -1;
        if (deadline != PLX__NEVER) {
            uint64_t now = plx__clock_ns();
            if (now >= deadline)
                return plx__err(PLX_ERR_TIMEOUT, "%s: timed out", c->where);
            ms = (int)((deadline - now) / 1000000) + 1;
        }
        struct pollfd pf = {c->fd, is_write ? POLLOUT : POLLIN, 0};
        int r = poll(&pf, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            continue; /* re-check the deadline */
        ssize_t k = is_write ? send(c->fd, p, n, MSG_NOSIGNAL) : recv(c->fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0) {
            plx__err(PLX_ERR_PEER_LOST, "%s: connection lost: %s", c->where,
                     k == 0 ? "closed by the server" : strerror(errno));
            snprintf(c->lost, sizeof c->lost, "%s", plx_last_error());
            return PLX_ERR_PEER_LOST;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}


/* A request being built: one buffer, one write. The first failed append records its status in err
 * and the later ones do nothing, so a request is built in straight lines and
 * checked once: its status is a PLX_ERR_*, never a truth value. */
struct msg {
    char *p;
    size_t n, cap;
    int err;
};

static int put(struct msg *m, const void *d, size_t n)
{
    if (m->err)
        return m->err;
    if (m->n + n > m->cap) {
        size_t cap = (m->cap ? m->cap * 2 : 256) + n;
        char *p = realloc(m->p, cap);
        if (!p)
            return m->err = plx__err(PLX_ERR_NOMEM, "store: out of memory for a %zu-byte request", cap);
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->n, d, n);
    m->n += n;
    return 0;
}

static int put_bytes(struct msg *m, const void *d, size_t n)
{
    uint64_t len = n; /* little-endian hosts only (x86_64, aarch64) */
    put(m, &len, 8);
    return put(m, d, n);
}

static int connected(struct client *c, uint64_t deadline);

static int send_msg(struct client *c, struct msg *m, uint64_t deadline)
{
    int rc = connected(c, deadline);
    if (rc == 0)
        rc = xfer(c, 1, m->p, m->n, deadline);
    free(m->p);
    m->p = NULL;
    return rc;
}

static int read_bytes(struct client *c, void **val, size_t *len, uint64_t deadline)
{
    uint64_t n;
    int rc = xfer(c, 0, &n, 8, deadline);
    if (rc)
        return rc;
    if (n > c->lim.max_value)
        return plx__err(PLX_ERR_PROTOCOL, "%s: reply of %llu bytes is too large", c->where,
                        (unsigned long long)n);
    *val = malloc(n ? n : 1);
    if (!*val)
        return plx__err(PLX_ERR_NOMEM, "store: out of memory");
    if ((rc = xfer(c, 0, *val, n, deadline)) != 0) {
        free(*val);
        *val = NULL; /* a caller that frees what it was given on error too must not free it twice */
        return rc;
    }
    *len = n;
    return 0;
}

/* After a timed-out WAIT the server's late reply would poison the stream:
 * drop the connection, and let the next request open a fresh one within its
 * own deadline (reconnecting here would add a wait to the timeout just
 * reported, and a server that is gone would stretch it). */
static void disconnect(struct client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* A second from now, or deadline if sooner. */
static uint64_t slice_end(uint64_t deadline)
{
    uint64_t t = plx__clock_ns() + 1000000000u;
    return t < deadline ? t : deadline;
}

/* A fresh connection's opening in the server's dialect, found on the first
 * one: a torch 1.x server (or plexus's own) answers a CHECK of no keys with
 * READY; a torch 2.x server closes a connection whose first query is not
 * VALIDATE, and is reconnected to with it. With a job secret the server is
 * plexus's own (torch's has no handshake). */
static int greet(struct client *c, uint64_t deadline)
{
    if (c->secret && c->dialect == DIALECT_UNKNOWN)
        c->dialect = DIALECT_TORCH1;
    if (c->dialect == DIALECT_TORCH1)
        return 0;
    if (c->dialect == DIALECT_UNKNOWN) {
        unsigned char probe[9] = {PLX__Q_CHECK}; /* and a key count of 0 */
        uint8_t reply = 0xff;
        int rc = xfer(c, 1, probe, sizeof probe, deadline);
        /* A server answers at once; one that holds the port without
         * answering is waited for in slices, looking for a gone task. */
        uint64_t look = 0;
        int gone = 0;
        while (rc == 0 && (rc = xfer(c, 0, &reply, 1, slice_end(deadline))) == PLX_ERR_TIMEOUT &&
               plx__clock_ns() < deadline && !(gone = task_gone(c, &look, "no answer to the first request")))
            rc = 0;
        if (gone)
            return gone;
        if (rc == PLX_ERR_TIMEOUT)
            return plx__err(rc, "%s: connected, but no answer to the first request in time: is what listens there "
                            "a store (a port taken by another program)?", c->where);
        if (rc == 0 && reply == PLX__READY) {
            c->dialect = DIALECT_TORCH1;
            return 0;
        }
        if (rc == 0)
            return plx__err(PLX_ERR_PROTOCOL, "%s: unexpected reply %u to a CHECK of no keys", c->where, reply);
        if (rc != PLX_ERR_PEER_LOST)
            return rc;
        c->lost[0] = '\0';
        disconnect(c);
        if ((rc = connect_until(c, deadline, &c->fd)) != 0)
            return rc;
        c->dialect = DIALECT_TORCH2;
    }
    unsigned char validate[5] = {TORCH2_VALIDATE};
    uint32_t magic = TORCH2_MAGIC; /* little-endian hosts only, as put_bytes */
    memcpy(validate + 1, &magic, 4);
    return xfer(c, 1, validate, sizeof validate, deadline);
}

/* A connection for the next request (under c->mu), bounded by deadline. */
static int connected(struct client *c, uint64_t deadline)
{
    if (c->fd >= 0)
        return 0;
    uint64_t d = deadline != PLX__NEVER ? deadline : plx__clock_ns() + 5000000000u;
    int rc = connect_until(c, d, &c->fd);
    if (rc == PLX_ERR_TIMEOUT) { /* it was there before: not a slow start, it is gone */
        plx__err_prefix("reconnecting after a timed-out wait: ");
        snprintf(c->lost, sizeof c->lost, "%s", plx_last_error());
        return PLX_ERR_PEER_LOST;
    }
    if (rc == 0 && (rc = authenticate(c, c->fd, d)) == 0)
        rc = greet(c, d);
    if (rc)
        disconnect(c);
    return rc;
}

/* Refuse here what the server would refuse, with a clearer message. */
static int too_large(struct client *c, const char *key, size_t vlen)
{
    size_t kl = strlen(key);
    if (kl > c->lim.max_key)
        return plx__err(PLX_ERR_INVALID_ARG, "%s: key of %zu bytes exceeds [core] store_max_key_bytes = %llu",
                        c->where, kl, (unsigned long long)c->lim.max_key);
    if (vlen > c->lim.max_value)
        return plx__err(PLX_ERR_INVALID_ARG,
                        "%s: value of %zu bytes for '%s' exceeds [core] store_max_value_bytes = %llu",
                        c->where, vlen, key, (unsigned long long)c->lim.max_value);
    return 0;
}

static int c_set(struct plx_store *s, const char *key, const void *val, size_t len)
{
    struct client *c = (struct client *)s;
    int bad = too_large(c, key, len);
    if (bad)
        return bad;
    struct msg m = {0};
    uint8_t q = code(c, PLX__Q_SET);
    put(&m, &q, 1);
    put_bytes(&m, key, strlen(key));
    int rc = put_bytes(&m, val, len);
    pthread_mutex_lock(&c->mu);
    rc = rc ? rc : send_msg(c, &m, plx__deadline_ms(plx__store_capped_ms(s, s->timeout_ms)));
    pthread_mutex_unlock(&c->mu);
    free(m.p);
    return rc;
}

static int wait_locked(struct client *c, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct msg m = {0};
    uint8_t q = code(c, PLX__Q_WAIT);
    uint64_t cnt = n;
    put(&m, &q, 1);
    int rc = put(&m, &cnt, 8);
    for (size_t i = 0; !rc && i < n; i++)
        if ((rc = too_large(c, keys[i], 0)) == 0)
            rc = put_bytes(&m, keys[i], strlen(keys[i]));
    uint64_t deadline = plx__deadline_ms(timeout_ms);
    if (!rc)
        rc = send_msg(c, &m, deadline);
    free(m.p);
    uint8_t reply = 0xff;
    if (!rc)
        rc = xfer(c, 0, &reply, 1, deadline);
    if (rc == PLX_ERR_TIMEOUT) {
        disconnect(c);
        char list[256] = "";
        for (size_t i = 0; i < n; i++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s'%s'", i ? ", " : "", keys[i]);
        }
        return plx__err(PLX_ERR_TIMEOUT, "%s: waited %lld ms for key(s) %s: timeout", c->where,
                        (long long)timeout_ms, list);
    }
    if (!rc && reply != PLX__STOP_WAITING)
        rc = plx__err(PLX_ERR_PROTOCOL, "%s: unexpected WAIT reply %u", c->where, reply);
    return rc;
}

static int c_wait(struct plx_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct client *c = (struct client *)s;
    timeout_ms = plx__store_capped_ms(s, timeout_ms);
    pthread_mutex_lock(&c->mu);
    int rc = wait_locked(c, keys, n, timeout_ms);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int c_get(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    struct client *c = (struct client *)s;
    timeout_ms = plx__store_capped_ms(s, timeout_ms);
    pthread_mutex_lock(&c->mu);
    int rc = wait_locked(c, &key, 1, timeout_ms); /* as torch does: WAIT, then GET */
    struct msg m = {0};
    uint8_t q = code(c, PLX__Q_GET);
    if (!rc) {
        put(&m, &q, 1);
        rc = put_bytes(&m, key, strlen(key));
    }
    uint64_t deadline = plx__deadline_ms(plx__store_capped_ms(s, s->timeout_ms));
    if (!rc)
        rc = send_msg(c, &m, deadline);
    free(m.p);
    if (!rc)
        rc = read_bytes(c, val, len, deadline);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int c_add(struct plx_store *s, const char *key, int64_t delta, int64_t *result)
{
    struct client *c = (struct client *)s;
    struct msg m = {0};
    uint8_t q = code(c, PLX__Q_ADD);
    put(&m, &q, 1);
    put_bytes(&m, key, strlen(key));
    int rc = put(&m, &delta, 8);
    int64_t v = 0;
    uint64_t deadline = plx__deadline_ms(plx__store_capped_ms(s, s->timeout_ms));
    pthread_mutex_lock(&c->mu);
    if (!rc)
        rc = send_msg(c, &m, deadline);
    if (!rc)
        rc = xfer(c, 0, &v, 8, deadline);
    pthread_mutex_unlock(&c->mu);
    free(m.p);
    if (!rc && result)
        *result = v;
    return rc;
}

static int c_check(struct plx_store *s, const char *key)
{
    struct client *c = (struct client *)s;
    struct msg m = {0};
    uint8_t q = code(c, PLX__Q_CHECK), reply = 1;
    uint64_t one = 1;
    put(&m, &q, 1);
    put(&m, &one, 8);
    int rc = put_bytes(&m, key, strlen(key));
    uint64_t deadline = plx__deadline_ms(plx__store_capped_ms(s, s->timeout_ms));
    pthread_mutex_lock(&c->mu);
    if (!rc)
        rc = send_msg(c, &m, deadline);
    if (!rc)
        rc = xfer(c, 0, &reply, 1, deadline);
    pthread_mutex_unlock(&c->mu);
    free(m.p);
    return rc ? rc : reply == 0;
}

static int c_del(struct plx_store *s, const char *key)
{
    struct client *c = (struct client *)s;
    struct msg m = {0};
    uint8_t q = code(c, PLX__Q_DELETE_KEY);
    int64_t n = 0;
    put(&m, &q, 1);
    int rc = put_bytes(&m, key, strlen(key));
    uint64_t deadline = plx__deadline_ms(plx__store_capped_ms(s, s->timeout_ms));
    pthread_mutex_lock(&c->mu);
    if (!rc)
        rc = send_msg(c, &m, deadline);
    if (!rc)
        rc = xfer(c, 0, &n, 8, deadline);
    pthread_mutex_unlock(&c->mu);
    free(m.p);
    return rc;
}

static void c_destroy(struct plx_store *s)
{
    struct client *c = (struct client *)s;
    if (c->fd >= 0)
        close(c->fd);
    plx__store_hosted_release(c->server);
    pthread_mutex_destroy(&c->mu);
    if (c->secret) {
        explicit_bzero(c->secret, strlen(c->secret));
        free(c->secret);
    }
    free(c);
}

static int c_lost(const struct plx_store *s, char *out, size_t n)
{
    const struct client *c = (const struct client *)s;
    if (!c->lost[0])
        return 0;
    snprintf(out, n, "%s", c->lost);
    return 1;
}

static const struct plx__store_ops tcp_ops = {
    .set = c_set, .get = c_get, .add = c_add, .wait = c_wait, .check = c_check, .del = c_del, .destroy = c_destroy,
    .lost = c_lost,
};


int plx__store_tcp_open(const struct plx_config *v, const char *rest, int rank, int size, int64_t timeout_ms,
                        struct plx_store **out)
{
    (void)size;
    struct client *c = calloc(1, sizeof *c);
    if (!c)
        return plx__err(PLX_ERR_NOMEM, "store: out of memory");
    c->fd = -1;
    int rc = plx__store_limits_from_config(v, &c->lim);
    if (rc == 0 && c->lim.secret && !(c->secret = strdup(c->lim.secret)))
        rc = plx__err(PLX_ERR_NOMEM, "store: out of memory");
    if (rc) {
        free(c);
        return rc;
    }
    c->lim.secret = c->secret;
    pthread_mutex_init(&c->mu, NULL);
    c->base.ops = &tcp_ops;
    c->base.timeout_ms = timeout_ms;
    /* host:port, [v6]:port */
    const char *colon = strrchr(rest, ':');
    if (!colon || colon == rest || !colon[1]) {
        free(c->secret);
        free(c);
        return plx__err(PLX_ERR_INVALID_ARG, "store url 'tcp://%s': expected tcp://HOST:PORT", rest);
    }
    snprintf(c->host, sizeof c->host, "%.*s", (int)(colon - rest), rest);
    snprintf(c->port, sizeof c->port, "%s", colon + 1);
    if (c->host[0] == '[') {
        memmove(c->host, c->host + 1, strlen(c->host));
        c->host[strcspn(c->host, "]")] = '\0';
    }
    /* atoi would host "70000" on 4464 and print 70000: digits, 1-65535. */
    if (strspn(c->port, "0123456789") != strlen(c->port) || strlen(c->port) > 5 || atoi(c->port) < 1 ||
        atoi(c->port) > 65535) {
        rc = plx__err(PLX_ERR_INVALID_ARG, "store url 'tcp://%s': port '%s' is not a TCP port (1 to 65535)", rest,
                      colon + 1);
        free(c->secret);
        free(c);
        return rc;
    }
    /* Rank 0 hosts it unless a launcher does: then a store that cannot be
     * reached or goes away says which rank to look at. */
    const char *hosted = getenv("PLEXUS_STORE_HOSTED");
    int by_rank0 = rank >= 0 && !(hosted && !strcmp(hosted, "1"));
    snprintf(c->where, sizeof c->where, "store tcp://%s (hosted by rank 0)", rest);
    if (!by_rank0)
        snprintf(c->where, sizeof c->where, "store tcp://%s", rest);
    if (rank == 0 && by_rank0)
        rc = plx__store_hosted_acquire(c->host, atoi(c->port), &c->lim, &c->server);
    uint64_t deadline = plx__deadline_ms(timeout_ms);
    if (!rc)
        rc = connect_until(c, deadline, &c->fd);
    if (!rc)
        rc = authenticate(c, c->fd, deadline);
    if (!rc)
        rc = greet(c, deadline);
    if (rc) {
        if (c->fd >= 0)
            close(c->fd);
        plx__store_hosted_release(c->server);
        pthread_mutex_destroy(&c->mu);
        free(c->secret);
        free(c);
        return rc;
    }
    *out = &c->base;
    return 0;
}
