/* bootstrap.c - gloo's connectFullMesh, in the layout the job speaks
 * (gloo_wire.c): gloo 2022's one listener per pair with 136-byte addresses
 * under the store keys gloo uses ("rank_<r>" = hostname, "<r>" = the P-1
 * addresses in ascending peer order), or gloo 2023's one listener per rank
 * whose connections name their pair first; gloo's connect-role rule either
 * way, so a plexus rank and libgloo ranks can share a job at the transport
 * level.
 *
 * Address blob (gloo transport/tcp/address.h, struct {sockaddr_storage;
 * ssize_t seq;}): bytes 0..127 the sockaddr, 128..135 seq = -1. libgloo
 * leaves the bytes past the sockaddr uninitialised and never reads them;
 * plexus writes a marker there (16..31 after an IPv4 address, 32..47 after
 * an IPv6 one) so two plexus ranks can agree on eager small sends (tcp.h),
 * with the version of the frames they send each other: a rank that meets
 * another plexus version fails at once, naming both, instead of misreading
 * its frames mid-job (a job across hosts with different installs). The 8
 * bytes after the marker name the machine (its kernel's boot id, hashed; 0:
 * unknown), so a rank counts the ranks whose cores it shares, which network
 * namespaces or containers on one machine hide from the host's rank count.
 *
 * With a job secret (PLEXUS_JOB_SECRET, unless [tcp] auth = off) every pair
 * connection passes the mutual handshake of core/auth.h before it carries a
 * frame: the dialer is the client, the listener the server, and the context
 * names the communicator and both ranks. A listener keeps accepting until a
 * connection authenticates as its peer; the others are refused and logged,
 * and one that stays silent is dropped after [tcp] auth_timeout_ms. All
 * handshakes of a rank run in one poll loop, so none waits for another.
 * Without a secret the pair protocol is Gloo's, byte for byte. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "auth.h"
#include "hostid.h"
#include "tcp.h"

/* The version goes up whenever a plexus peer would misread the new frames
 * (2: an eager payload may carry a head, TCP_EAGER_HEAD_MAX). */
static const char marker[16] = "plexus-tcp/2\0\0\0";
#define MARKER_NAME "plexus-tcp/"

/* Where the marker sits: just past the sockaddr, 16-byte aligned. */
static size_t marker_at(int family)
{
    return family == AF_INET6 ? 32 : 16;
}

static int err(const struct tcp_comm *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int err(const struct tcp_comm *c, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return c->host->error(c->host->ctx, status, "%s", msg);
}

static int64_t config_int(const struct tcp_comm *c, const char *key, int64_t def)
{
    return plx_plugin_config_int(c->host, c->config, key, def);
}

static void set_bufs(const struct tcp_comm *c, int fd)
{
    int snd = (int)config_int(c, "sndbuf", 4 << 20), rcv = (int)config_int(c, "rcvbuf", 4 << 20);
    if (snd > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof snd);
    if (rcv > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
}

static void fmt_addr(char *out, size_t n, const struct sockaddr_storage *sa)
{
    tcp__fmt_sockaddr(out, n, (const struct sockaddr *)sa);
}

static int64_t left_ms(uint64_t deadline)
{
    uint64_t now = plx_plugin_now_ns();
    return now >= deadline ? 0 : (int64_t)((deadline - now) / 1000000u);
}

/* Non-blocking connect with retries until the deadline (the listener exists
 * once the address is published, but SYNs can be lost or refused briefly). */
static int dial(const struct tcp_comm *c, const struct sockaddr_storage *to, uint64_t deadline, int *out)
{
    int last = ETIMEDOUT;
    for (;;) {
        int fd = socket(to->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return errno;
        set_bufs(c, fd);
        int rc = connect(fd, (const struct sockaddr *)to, tcp__sockaddr_len((const struct sockaddr *)to));
        if (rc && errno == EINPROGRESS) {
            struct pollfd pf = {fd, POLLOUT, 0};
            int64_t ms = left_ms(deadline);
            rc = poll(&pf, 1, (int)(ms > 1000 ? 1000 : ms));
            int e = 0;
            socklen_t el = sizeof e;
            if (rc > 0 && !getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) && e == 0) {
                *out = fd;
                return 0;
            }
            errno = rc == 0 ? ETIMEDOUT : e ? e : errno;
            rc = -1;
        }
        if (rc == 0) {
            *out = fd;
            return 0;
        }
        last = errno;
        close(fd);
        if (left_ms(deadline) <= 0)
            return last;
        usleep(20000);
    }
}

/* The job secret, or NULL for the plain Gloo pair protocol. */
static int job_secret(const struct tcp_comm *c, const char **out)
{
    char why[200];
    if (plx__auth_policy("tcp", plx_plugin_config_str(c->host, c->config, "auth"), getenv(PLX__AUTH_ENV), out, why,
                         sizeof why))
        return err(c, PLX_ERR_CONFIG, "tcp: %s", why);
    return 0;
}

/* A connection in its handshake, or (ident) one accepted on the gloo 2023
 * listener that has not yet said which pair it is for. */
struct shake {
    int fd, peer, role; /* peer: the rank dialed, or whose listener accepted it */
    int dead;           /* finished or dropped; removed by shake_compact */
    int ident;          /* still reading the 8-byte pair identifier */
    size_t seq_got;
    unsigned char seq[8];
    uint64_t deadline;
    char addr[64];
    struct plx__auth a;
};

/* Everything the connect phase of one rank holds. */
struct mesh {
    struct tcp_comm *c;
    const struct plx_comm_args *args;
    const char *secret;  /* NULL: plain Gloo */
    int wire;            /* TCP_WIRE_* */
    int *lfd;            /* listener per peer (gloo 2022), -1 once closed */
    int one_fd;          /* the one listener (gloo 2023), or -1 */
    int *accepting;      /* this rank listens for that peer */
    struct shake *sh;
    int nsh, capsh;
    int64_t auth_ms, max_shakes;
    int blame;           /* the rank this rendezvous failed waiting for, or -1 */
    uint64_t machine;    /* plx_common_machine_id() */
};

static void shake_ctx(const struct mesh *m, int dialer, int listener, char *out, size_t n)
{
    snprintf(out, n, "tcp/%s/%d->%d", m->args->name ? m->args->name : "", dialer, listener);
}

/* Close k's socket (unless taken) and mark it; indices stay valid until
 * shake_compact, so a poll pass can drop any handshake. */
static void shake_close(struct mesh *m, int k)
{
    if (m->sh[k].fd >= 0)
        close(m->sh[k].fd);
    m->sh[k].fd = -1;
    m->sh[k].dead = 1;
}

static void shake_compact(struct mesh *m)
{
    int n = 0;
    for (int k = 0; k < m->nsh; k++)
        if (!m->sh[k].dead)
            m->sh[n++] = m->sh[k];
    m->nsh = n;
}

/* A fresh record for a connection on fd (closed when out of memory). */
static struct shake *shake_new(struct mesh *m, int fd, int peer, int role, uint64_t deadline, const char *addr)
{
    if (m->nsh == m->capsh) {
        int cap = m->capsh ? 2 * m->capsh : 16;
        struct shake *p = realloc(m->sh, sizeof *p * (size_t)cap);
        if (!p) {
            close(fd);
            err(m->c, PLX_ERR_NOMEM, "tcp: out of memory");
            return NULL;
        }
        m->sh = p;
        m->capsh = cap;
    }
    struct shake *h = &m->sh[m->nsh++];
    *h = (struct shake){.fd = fd, .peer = peer, .role = role, .deadline = deadline};
    snprintf(h->addr, sizeof h->addr, "%s", addr);
    return h;
}

/* The job-secret handshake of h with its peer begins. */
static int shake_begin(struct mesh *m, struct shake *h)
{
    char ctx[96];
    int me = m->c->rank, peer = h->peer, role = h->role;
    shake_ctx(m, role == PLX__AUTH_CLIENT ? me : peer, role == PLX__AUTH_CLIENT ? peer : me, ctx, sizeof ctx);
    if (plx__auth_init(&h->a, role, m->secret, ctx) != 0) {
        close(h->fd);
        h->fd = -1;
        h->dead = 1;
        return err(m->c, PLX_ERR_SYSTEM, "tcp: %s", h->a.why);
    }
    return 0;
}

static int shake_add(struct mesh *m, int fd, int peer, int role, uint64_t deadline, const char *addr)
{
    struct shake *h = shake_new(m, fd, peer, role, deadline, addr);
    return h ? shake_begin(m, h) : PLX_ERR_NOMEM;
}

/* The pair with peer is connected on fd: keep it, stop listening for it,
 * and drop whatever else was still knocking on that listener. */
static void pair_done(struct mesh *m, int peer, int fd)
{
    m->c->peers[peer].fd = fd;
    if (m->lfd[peer] >= 0) {
        close(m->lfd[peer]);
        m->lfd[peer] = -1;
    }
    for (int k = 0; k < m->nsh; k++)
        if (!m->sh[k].dead && m->sh[k].peer == peer && m->sh[k].role == PLX__AUTH_SERVER) {
            /* What the stranger already sent may be judged now: log that
             * reason rather than "dropped" (one non-blocking step). */
            if (plx__auth_step(&m->sh[k].a, m->sh[k].fd) < 0) {
                m->c->host->log(m->c->host->ctx, PLX_LOG_WARN,
                               "rank %d refused a connection from %s on its listener for rank %d: %s",
                               m->c->rank, m->sh[k].addr, peer, m->sh[k].a.why);
                shake_close(m, k);
                continue;
            }
            m->c->host->log(m->c->host->ctx, PLX_LOG_WARN,
                           "rank %d dropping an unauthenticated connection from %s on its listener for rank "
                           "%d: rank %d has connected (its handshake was %s)",
                           m->c->rank, m->sh[k].addr, peer, peer, plx__auth_waiting_for(&m->sh[k].a));
            shake_close(m, k);
        }
}

static int pending_on(const struct mesh *m, int peer)
{
    int n = 0;
    for (int k = 0; k < m->nsh; k++)
        n += !m->sh[k].dead && m->sh[k].peer == peer && m->sh[k].role == PLX__AUTH_SERVER;
    return n;
}

/* Take what waits on peer's listener: in plain mode the first connection
 * is the peer (as in gloo); with a secret each one starts a handshake, at
 * most max_shakes at a time (the rest wait in the kernel's backlog, so a
 * flood of strangers delays the peer by at most auth_timeout_ms). */
static int accept_on(struct mesh *m, int peer)
{
    for (;;) {
        if (m->secret && pending_on(m, peer) >= m->max_shakes) {
            m->c->host->log(m->c->host->ctx, PLX_LOG_WARN,
                           "rank %d has %d unauthenticated connections on its listener for rank %d ([tcp] "
                           "max_handshakes): further ones wait until those end",
                           m->c->rank, pending_on(m, peer), peer);
            return 0;
        }
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int fd = accept4(m->lfd[peer], (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return 0;
        if (!m->secret) {
            pair_done(m, peer, fd);
            return 0;
        }
        char addr[64];
        fmt_addr(addr, sizeof addr, &sa);
        int rc = shake_add(m, fd, peer, PLX__AUTH_SERVER,
                           plx_plugin_deadline(m->auth_ms), addr);
        if (rc)
            return rc;
    }
}

static int unnamed(const struct mesh *m)
{
    int n = 0;
    for (int k = 0; k < m->nsh; k++)
        n += !m->sh[k].dead && m->sh[k].ident;
    return n;
}

/* gloo 2023: take what waits on the one listener; each connection names
 * its pair first (ident_step), at most max_shakes unnamed at a time. */
static int accept_one(struct mesh *m)
{
    while (unnamed(m) < m->max_shakes) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int fd = accept4(m->one_fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return 0;
        char addr[64];
        fmt_addr(addr, sizeof addr, &sa);
        struct shake *h = shake_new(m, fd, -1, PLX__AUTH_SERVER, plx_plugin_deadline(m->auth_ms), addr);
        if (!h)
            return PLX_ERR_NOMEM;
        h->ident = 1;
    }
    return 0;
}

static int shake_step(struct mesh *m, int k);

/* Read what accepted connection k says its pair is: the identifier this
 * rank published for a peer (its rank), as a native ssize_t. */
static int ident_step(struct mesh *m, int k)
{
    struct shake *h = &m->sh[k];
    struct tcp_comm *c = m->c;
    ssize_t n = recv(h->fd, h->seq + h->seq_got, sizeof h->seq - h->seq_got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n <= 0) {
        c->host->log(c->host->ctx, PLX_LOG_WARN, "rank %d dropped a connection from %s: it closed before naming "
                     "its pair", c->rank, h->addr);
        shake_close(m, k);
        return 0;
    }
    if ((h->seq_got += (size_t)n) < sizeof h->seq)
        return 0;
    int64_t seq;
    memcpy(&seq, h->seq, sizeof seq);
    if (seq < 0 || seq >= c->size || !m->accepting[seq] || c->peers[seq].fd >= 0) {
        c->host->log(c->host->ctx, PLX_LOG_WARN, "rank %d refused a connection from %s: it names pair %lld, for "
                     "which rank %d awaits no connection (another job, or another world size?)", c->rank, h->addr,
                     (long long)seq, c->rank);
        shake_close(m, k);
        return 0;
    }
    h->ident = 0;
    h->peer = (int)seq;
    if (!m->secret) {
        int fd = h->fd;
        h->fd = -1;
        shake_close(m, k);
        pair_done(m, (int)seq, fd);
        return 0;
    }
    int rc = shake_begin(m, h);
    return rc ? rc : shake_step(m, k);
}

/* Advance handshake k after poll said it may; returns an error only for a
 * connection this rank dialed (its peer is then unusable). */
static int shake_step(struct mesh *m, int k)
{
    struct shake *h = &m->sh[k];
    if (h->dead)
        return 0;
    if (h->ident)
        return ident_step(m, k);
    int r = plx__auth_step(&h->a, h->fd);
    if (r == 0)
        return 0;
    int peer = h->peer, rank = m->c->rank;
    if (r > 0) {
        int fd = h->fd;
        h->fd = -1;
        shake_close(m, k);
        if (m->c->peers[peer].fd >= 0) { /* cannot happen with one dial per pair; keep the first */
            close(fd);
            return 0;
        }
        m->c->host->log(m->c->host->ctx, PLX_LOG_DEBUG, "rank %d authenticated rank %d (%s)", rank, peer,
                       h->role == PLX__AUTH_CLIENT ? "dialed" : "accepted");
        pair_done(m, peer, fd);
        return 0;
    }
    if (h->role == PLX__AUTH_CLIENT) {
        m->blame = peer;
        int rc = err(m->c, PLX_ERR_AUTH, "tcp: rank %d cannot authenticate to rank %d at %s: %s", rank, peer, h->addr,
                     h->a.why);
        shake_close(m, k);
        return rc;
    }
    m->c->host->log(m->c->host->ctx, PLX_LOG_WARN,
                   "rank %d refused a connection from %s on its listener for rank %d: %s", rank, h->addr, peer,
                   h->a.why);
    shake_close(m, k);
    return 0;
}

/* Drop accepted connections whose handshake ran out of time; a dialed
 * one out of time is an error. */
static int shake_expire(struct mesh *m, uint64_t now)
{
    for (int k = 0; k < m->nsh; k++) {
        struct shake *h = &m->sh[k];
        if (h->dead || now < h->deadline)
            continue;
        if (h->ident) {
            m->c->host->log(m->c->host->ctx, PLX_LOG_WARN, "rank %d dropped a connection from %s: it did not name its "
                            "pair within %lld ms ([tcp] auth_timeout_ms)", m->c->rank, h->addr, (long long)m->auth_ms);
            shake_close(m, k);
            continue;
        }
        if (h->role == PLX__AUTH_CLIENT) {
            m->blame = h->peer;
            int rc = err(m->c, PLX_ERR_TIMEOUT, "tcp: rank %d cannot authenticate to rank %d at %s: no answer (%s)",
                         m->c->rank, h->peer, h->addr, plx__auth_waiting_for(&h->a));
            shake_close(m, k);
            return rc;
        }
        m->c->host->log(m->c->host->ctx, PLX_LOG_WARN,
                       "rank %d dropped a connection from %s on its listener for rank %d: not authenticated "
                       "within %lld ms ([tcp] auth_timeout_ms; it was %s)",
                       m->c->rank, h->addr, h->peer, (long long)m->auth_ms, plx__auth_waiting_for(&h->a));
        shake_close(m, k);
    }
    return 0;
}

/* This rank's rendezvous failed waiting for rank blame (why:
 * TCP_LOST_RENDEZVOUS) or after losing it (TCP_LOST_CONNECTION): the
 * plexus peers it is already connected to may have finished theirs and
 * wait for it in a first operation. A lost-peer notice on each connection
 * (48 bytes on a fresh socket: never blocks) makes them fail at once
 * naming that rank, rather than at their own timeout naming this one. */
static void tell_peers(struct tcp_comm *c, int blame, int why)
{
    uint64_t h[6];
    tcp__notice_frame(h, blame, why);
    for (int i = 0; i < c->size; i++) {
        struct tcp_peer *p = &c->peers[i];
        if (i != c->rank && i != blame && p->fd >= 0 && p->eager &&
            send(p->fd, h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof h)
            shutdown(p->fd, SHUT_WR);
    }
}

/* The connected peers that have closed their end (without reading what
 * they sent: a fast peer may already be in its first operation), as
 * "; meanwhile rank 0 (addr) closed its connection". A rank that died right
 * after its own rendezvous shows up here while the one that gave up because
 * of it is what this rank waits for. */
static void closed_peers(const struct tcp_comm *c, char *out, size_t n)
{
    out[0] = '\0';
    for (int i = 0; i < c->size; i++) {
        const struct tcp_peer *p = &c->peers[i];
        if (i == c->rank || !tcp__hung_up(p->fd))
            continue;
        size_t l = strlen(out);
        snprintf(out + l, n - l, "%s rank %d (%s)", l ? "," : "; meanwhile", i, p->addr);
    }
    if (out[0]) {
        size_t l = strlen(out);
        snprintf(out + l, n - l, strchr(out, ',') ? " closed their connections" : " closed its connection");
    }
}

/* What connect_loop polls: listeners of peers still to come, handshakes
 * (*next: the earliest of their deadlines). who[j] >= 0: the listener of
 * that peer (size: the one listener); -1 - k: handshake k. */
static int poll_set(const struct mesh *m, struct pollfd *pf, int *who, uint64_t *next)
{
    const struct tcp_comm *c = m->c;
    int n = 0, P = c->size, awaited = 0;
    for (int i = 0; i < P; i++) {
        awaited += m->accepting[i] && c->peers[i].fd < 0;
        if (m->accepting[i] && c->peers[i].fd < 0 && m->lfd[i] >= 0 &&
            (!m->secret || pending_on(m, i) < m->max_shakes)) {
            pf[n] = (struct pollfd){m->lfd[i], POLLIN, 0};
            who[n++] = i;
        }
    }
    if (m->one_fd >= 0 && awaited && unnamed(m) < m->max_shakes) {
        pf[n] = (struct pollfd){m->one_fd, POLLIN, 0};
        who[n++] = P;
    }
    for (int k = 0; k < m->nsh; k++) {
        pf[n] = (struct pollfd){m->sh[k].fd, m->sh[k].ident ? POLLIN : plx__auth_events(&m->sh[k].a), 0};
        who[n++] = -1 - k;
        if (m->sh[k].deadline < *next)
            *next = m->sh[k].deadline;
    }
    return n;
}

/* Accept and authenticate until every peer is connected or the deadline. */
static int connect_loop(struct mesh *m, uint64_t deadline, int64_t conn_ms)
{
    struct tcp_comm *c = m->c;
    int P = c->size;
    struct pollfd *pf = NULL;
    int *who = NULL, cap = 0, rc = 0;
    while (rc == 0) {
        shake_compact(m);
        int missing = 0;
        for (int i = 0; i < P; i++)
            missing += i != c->rank && c->peers[i].fd < 0;
        if (!missing)
            break;
        if (cap < P + 1 + m->nsh) {
            cap = 2 * (P + 1 + m->nsh);
            free(pf);
            free(who);
            pf = malloc(sizeof *pf * (size_t)cap);
            who = malloc(sizeof *who * (size_t)cap);
            if (!pf || !who) {
                rc = err(m->c, PLX_ERR_NOMEM, "tcp: out of memory");
                break;
            }
        }
        uint64_t now = m->c->host->clock_ns(), next = deadline;
        int n = poll_set(m, pf, who, &next);
        if ((rc = shake_expire(m, now)) != 0)
            break;
        if (now >= deadline) {
            char miss[160] = "";
            for (int i = 0; i < P; i++)
                if (i != c->rank && c->peers[i].fd < 0) {
                    if (m->blame < 0)
                        m->blame = i;
                    size_t l = strlen(miss);
                    snprintf(miss + l, sizeof miss - l, "%s%d", l ? ", " : "", i);
                }
            char closed[200];
            closed_peers(c, closed, sizeof closed);
            rc = err(m->c, PLX_ERR_TIMEOUT, "tcp: rank %d waited %lld ms for rank(s) %s to connect%s", c->rank,
                     (long long)conn_ms, miss, closed);
            break;
        }
        int64_t ms = next > now ? (int64_t)((next - now) / 1000000u) + 1 : 0;
        int k = poll(pf, (nfds_t)n, (int)(ms > 60000 ? 60000 : ms));
        if (k < 0 && errno != EINTR) {
            rc = err(m->c, PLX_ERR_SYSTEM, "tcp: poll: %s", strerror(errno));
            break;
        }
        /* Handshakes first: accepting may grow m->sh. */
        for (int j = 0; j < n && rc == 0 && k > 0; j++)
            if (who[j] < 0 && pf[j].revents)
                rc = shake_step(m, -1 - who[j]);
        for (int j = 0; j < n && rc == 0 && k > 0; j++)
            if (who[j] == P && (pf[j].revents & POLLIN))
                rc = accept_one(m);
            else if (who[j] >= 0 && who[j] < P && (pf[j].revents & POLLIN) && m->lfd[who[j]] >= 0)
                rc = accept_on(m, who[j]);
    }
    free(pf);
    free(who);
    return rc;
}

/* A peer that published a loopback address cannot be reached from another
 * host: say so at once, naming what to set, instead of failing the connect
 * (or waiting the whole timeout on the other side). host: the peer's host
 * name from its gloo 2023 record, or NULL: read under "rank_<peer>". */
static int check_reachable(const struct tcp_comm *c, const struct plx_comm_args *a, int peer, const char *host,
                           const struct tcp_addr *me, const struct sockaddr_storage *addr, const char *shown)
{
    if (!tcp__is_loopback((const struct sockaddr *)addr) || tcp__is_loopback((const struct sockaddr *)&me->ss))
        return 0;
    char key[32], mine[256] = "localhost", theirs[256];
    gethostname(mine, sizeof mine - 1);
    if (host) {
        snprintf(theirs, sizeof theirs, "%s", host);
    } else {
        snprintf(key, sizeof key, "rank_%d", peer);
        void *val = NULL;
        size_t len = 0;
        if (c->host->store_get(a->store, key, &val, &len, plx_plugin_create_ms(a)) != 0)
            return 0; /* the connect attempt then says what happened */
        snprintf(theirs, sizeof theirs, "%.*s", (int)(len < 255 ? len : 255), (const char *)val);
        c->host->free(val);
    }
    if (!strcmp(theirs, mine))
        return 0;
    return err(c, PLX_ERR_CONFIG,
               "tcp: rank %d on host '%s' published the loopback address %s, which rank %d on host '%s' cannot reach: "
               "set [tcp] ifname (PLEXUS_TCP_IFNAME, e.g. eth0) or [tcp] address on rank %d's host, or give every rank "
               "a routable MASTER_ADDR",
               peer, theirs, shown, c->rank, mine, peer);
}

/* A listener on the chosen address (port 0), its address in *sa. */
static int listen_on(struct mesh *m, const struct tcp_addr *me, const char *shown, int backlog,
                     struct sockaddr_storage *sa, int *out)
{
    struct tcp_comm *c = m->c;
    socklen_t alen = tcp__sockaddr_len((const struct sockaddr *)&me->ss), sl = sizeof *sa;
    *sa = me->ss;
    int fd = socket(me->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0)
        set_bufs(c, fd); /* accepted sockets inherit them */
    if (fd < 0 || bind(fd, (struct sockaddr *)sa, alen) || listen(fd, backlog) ||
        getsockname(fd, (struct sockaddr *)sa, &sl)) {
        /* Port 0 in use: every port of the local range is taken, most often
         * by the closed connections of jobs that ended within the last minute
         * (TIME_WAIT; a flat job of P ranks on one host leaves P(P-1)/2). */
        const char *hint = errno == EADDRINUSE ? "; no free port in net.ipv4.ip_local_port_range (`ss -s` counts the "
                                                 "connections of recent jobs still in TIME_WAIT)"
                                               : "";
        int rc = err(c, PLX_ERR_SYSTEM, "tcp: rank %d cannot listen on %s (%s): %s%s", c->rank, shown, me->why,
                     strerror(errno), hint);
        if (fd >= 0)
            close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

/* gloo's 136-byte address of a listener, with plexus's marker. */
static void address_bytes(unsigned char *out, const struct sockaddr_storage *sa, uint64_t machine)
{
    memset(out, 0, TCP_ADDR_BYTES);
    memcpy(out, sa, tcp__sockaddr_len((const struct sockaddr *)sa));
    memcpy(out + marker_at(sa->ss_family), marker, sizeof marker);
    memcpy(out + marker_at(sa->ss_family) + sizeof marker, &machine, sizeof machine);
    memset(out + 128, 0xff, 8); /* seq = -1 */
}

/* gloo 2022: one listener per pair, on the chosen address only, each
 * listener's address in this rank's slice of the list it publishes. The
 * backlog leaves room for strangers ahead of the peer. gloo 2023: one
 * listener, in the rank record. *len: the bytes of blob to publish. */
static int open_listeners(struct mesh *m, const struct tcp_addr *me, const char *shown, struct sockaddr_storage *mine,
                          unsigned char *blob, size_t *len)
{
    struct tcp_comm *c = m->c;
    if (m->wire == TCP_WIRE_2023) {
        struct sockaddr_storage sa;
        int rc = listen_on(m, me, shown, SOMAXCONN, &sa, &m->one_fd);
        if (rc)
            return rc;
        for (int i = 0; i < c->size; i++)
            mine[i] = sa;
        unsigned char addr[TCP_ADDR_BYTES];
        address_bytes(addr, &sa, m->machine);
        char host[256] = "localhost";
        gethostname(host, sizeof host - 1);
        tcp__rec_encode(blob, host, addr, c->size);
        *len = tcp__rec_size(c->size, strlen(host));
        return 0;
    }
    for (int i = 0, k = 0; i < c->size; i++) {
        if (i == c->rank)
            continue;
        int rc = listen_on(m, me, shown, m->secret ? 16 : 1, &mine[i], &m->lfd[i]);
        if (rc)
            return rc;
        address_bytes(blob + (size_t)k++ * TCP_ADDR_BYTES, &mine[i], m->machine);
    }
    *len = (size_t)(c->size - 1) * TCP_ADDR_BYTES;
    return 0;
}

/* This rank's host name under "rank_<r>" (gloo 2022 ranks after this one
 * wait for it before they publish; check_reachable compares it). */
static int publish_host(const struct tcp_comm *c, const struct plx_comm_args *a)
{
    char key[32], hostname[256] = "localhost";
    gethostname(hostname, sizeof hostname - 1);
    snprintf(key, sizeof key, "rank_%d", c->rank);
    return c->host->store_set(a->store, key, hostname, strlen(hostname));
}

/* This rank's address list or record, under the key gloo uses. */
static int publish(const struct tcp_comm *c, const struct plx_comm_args *a, const unsigned char *blob, size_t len)
{
    char key[32];
    snprintf(key, sizeof key, "%d", c->rank);
    return c->host->store_set(a->store, key, blob, len);
}

/* Where rank i listens for this rank, as rank i published it. */
struct peer_ad {
    struct sockaddr_storage ss;
    int64_t seq;   /* gloo 2023: the identifier to write on dialing; -1 in 2022 */
    char host[256]; /* gloo 2023: its host name; "" in 2022 */
};

/* The marker in rank i's address: plexus of this version (eager), plexus of
 * another (an error naming both), or none (gloo). */
static int check_marker(struct mesh *m, int i, const unsigned char *addr, int fam)
{
    const unsigned char *theirs = addr + marker_at(fam);
    m->c->peers[i].eager = !memcmp(theirs, marker, sizeof marker);
    if (m->c->peers[i].eager || memcmp(theirs, MARKER_NAME, strlen(MARKER_NAME)))
        return 0;
    char version[sizeof marker + 1];
    memcpy(version, theirs, sizeof marker);
    version[sizeof marker] = '\0';
    for (char *v = version; *v; v++) /* only what prints */
        if (*v < 0x20 || *v > 0x7e)
            *v = '?';
    m->blame = i;
    return err(m->c, PLX_ERR_PROTOCOL,
               "tcp: rank %d speaks %s, this rank %s: every rank of a job needs the same plexus tcp wire "
               "(ranks started from different plexus installs?)",
               i, version, marker);
}

/* Rank i shares this rank's machine (a plexus peer that names the same
 * one after its marker): one more rank on its cores. */
static void count_machine(struct mesh *m, int i, const unsigned char *addr, int fam)
{
    uint64_t id;
    memcpy(&id, addr + marker_at(fam) + sizeof marker, sizeof id);
    m->c->machine_ranks += m->c->peers[i].eager && m->machine && id == m->machine;
}

/* Rank i's value in this rank's layout, parsed into out; *addr: its 136
 * bytes inside val. */
static int parse_ad(struct mesh *m, int i, const void *val, size_t len, struct peer_ad *out,
                    const unsigned char **addr)
{
    struct tcp_comm *c = m->c;
    int P = c->size, r = c->rank;
    struct tcp_rec rec;
    if (m->wire == TCP_WIRE_2023 && tcp__rec_decode(val, len, P, r, &rec) == 0) {
        out->ss = rec.ss;
        out->seq = rec.seq;
        snprintf(out->host, sizeof out->host, "%s", rec.host);
        *addr = rec.addr;
        return 0;
    }
    if (m->wire == TCP_WIRE_2022 && len == (size_t)(P - 1) * TCP_ADDR_BYTES) {
        *addr = (const unsigned char *)val + (size_t)(r > i ? r - 1 : r) * TCP_ADDR_BYTES;
        memcpy(&out->ss, *addr, sizeof out->ss);
        out->seq = -1;
        out->host[0] = '\0';
        return 0;
    }
    int theirs = tcp__wire_of(val, len, P);
    m->blame = i;
    if (theirs)
        return err(c, PLX_ERR_PROTOCOL, "tcp: rank %d publishes the layout of %s, this rank that of %s (set [tcp] "
                   "gloo_wire alike on every plexus rank, or leave it auto)", i, tcp__wire_name(theirs),
                   tcp__wire_name(m->wire));
    return err(c, PLX_ERR_PROTOCOL, "tcp: rank %d published a %zu-byte address, expected %s (a different world "
               "size?)", i, len, m->wire == TCP_WIRE_2023 ? "gloo 2023's rank record" : "gloo 2022's list");
}

/* Rank i's listener for this rank, out of what rank i published; marks
 * the peer eager when it carries plexus's marker (a gloo peer's does
 * not). t0: when this rank started waiting, for the timeout's message. */
static int peer_address(struct mesh *m, int i, uint64_t deadline, uint64_t t0, int fam, struct peer_ad *peer)
{
    struct tcp_comm *c = m->c;
    void *val = NULL;
    size_t len = 0;
    char key[32];
    snprintf(key, sizeof key, "%d", i);
    int64_t wait = left_ms(deadline);
    int grc = c->host->store_get(m->args->store, key, &val, &len, wait > 0 ? wait : 1);
    if (grc == PLX_ERR_TIMEOUT) {
        m->blame = i;
        return err(c, PLX_ERR_TIMEOUT, "tcp: rank %d never published its address (waited %lld ms)", i,
                   (long long)((c->host->clock_ns() - t0) / 1000000u));
    }
    if (grc) /* the store itself failed (the core adds its reason) */
        return err(c, grc, "tcp: rank %d lost the store while waiting for rank %d's address", c->rank, i);
    const unsigned char *addr = NULL;
    int rc = parse_ad(m, i, val, len, peer, &addr);
    if (rc == 0)
        rc = check_marker(m, i, addr, peer->ss.ss_family);
    if (rc == 0)
        count_machine(m, i, addr, peer->ss.ss_family);
    c->host->free(val);
    if (rc)
        return rc;
    if (peer->ss.ss_family != fam)
        return err(c, PLX_ERR_UNSUPPORTED,
                   "tcp: rank %d published an address of family %s, this rank one of %s (set [tcp] address or "
                   "ifname so that every rank uses the same IP version)",
                   i, peer->ss.ss_family == AF_INET6 ? "IPv6" : peer->ss.ss_family == AF_INET ? "IPv4" : "unknown",
                   fam == AF_INET6 ? "IPv6" : "IPv4");
    return 0;
}

/* gloo's connect rule (2022 Pair::connect, 2023 Device::isInitiator):
 * compare addresses, then the raw (network order) port values, then (2023)
 * the pair identifiers; the larger side connects. Above zero: this side
 * (mine) dials; below: it listens; zero: both are the same address. */
static int64_t pair_order(const struct sockaddr_storage *mine, int64_t my_seq, const struct sockaddr_storage *peer,
                          int64_t peer_seq)
{
    int cmp, mport, pport;
    if (mine->ss_family == AF_INET) {
        const struct sockaddr_in *m4 = (const struct sockaddr_in *)mine, *p4 = (const struct sockaddr_in *)peer;
        cmp = memcmp(&m4->sin_addr, &p4->sin_addr, sizeof(struct in_addr));
        mport = m4->sin_port;
        pport = p4->sin_port;
    } else {
        const struct sockaddr_in6 *m6 = (const struct sockaddr_in6 *)mine, *p6 = (const struct sockaddr_in6 *)peer;
        cmp = memcmp(&m6->sin6_addr, &p6->sin6_addr, sizeof(struct in6_addr));
        mport = m6->sin6_port;
        pport = p6->sin6_port;
    }
    return cmp != 0 ? cmp : mport != pport ? mport - pport : my_seq - peer_seq;
}

/* This rank is the larger side of the pair with rank i: it connects (in
 * gloo 2022 its listener for i closes; in 2023 it first names the pair with
 * the identifier i gave it); with a secret, the connection then goes
 * through the handshake, whose hello leaves now (the listener's clock runs
 * from its accept). */
static int dial_peer(struct mesh *m, int i, const struct peer_ad *peer, const struct tcp_addr *me, uint64_t deadline)
{
    struct tcp_comm *c = m->c;
    struct tcp_peer *p = &c->peers[i];
    if (m->lfd[i] >= 0)
        close(m->lfd[i]);
    m->lfd[i] = -1;
    int fd = -1, e = dial(c, &peer->ss, deadline, &fd);
    if (e == 0 && m->wire == TCP_WIRE_2023 &&
        send(fd, &peer->seq, sizeof peer->seq, MSG_NOSIGNAL) != (ssize_t)sizeof peer->seq) {
        e = errno ? errno : EPIPE;
        close(fd);
    }
    if (e) {
        m->blame = i;
        return err(c, e == ETIMEDOUT ? PLX_ERR_TIMEOUT : PLX_ERR_PEER_LOST,
                   "tcp: rank %d cannot connect to rank %d at %s: %s%s", c->rank, i, p->addr, strerror(e),
                   tcp__is_loopback((const struct sockaddr *)&peer->ss) &&
                           !tcp__is_loopback((const struct sockaddr *)&me->ss)
                       ? " (a loopback address: if that rank runs on another host, set [tcp] ifname or "
                         "address there, e.g. PLEXUS_TCP_IFNAME=eth0)"
                       : "");
    }
    if (!m->secret) {
        p->fd = fd;
        return 0;
    }
    int rc = shake_add(m, fd, i, PLX__AUTH_CLIENT, deadline, p->addr);
    return rc ? rc : shake_step(m, m->nsh - 1);
}

/* Every other rank's address, and for each pair the side that dials does
 * so now; the other side accepts it in connect_loop. */
static int meet_peers(struct mesh *m, const struct tcp_addr *me, const struct sockaddr_storage *mine,
                      uint64_t deadline)
{
    struct tcp_comm *c = m->c;
    uint64_t t0 = c->host->clock_ns();
    for (int i = 0; i < c->size; i++) {
        if (i == c->rank)
            continue;
        struct peer_ad peer;
        struct tcp_peer *p = &c->peers[i];
        int rc = peer_address(m, i, deadline, t0, me->ss.ss_family, &peer);
        if (rc)
            return rc;
        fmt_addr(p->addr, sizeof p->addr, &peer.ss);
        rc = check_reachable(c, m->args, i, m->wire == TCP_WIRE_2023 ? peer.host : NULL, me, &peer.ss, p->addr);
        if (rc)
            return rc;
        /* In 2023 this rank named its pair with i by i (tcp__rec_encode). */
        int64_t order = pair_order(&mine[i], m->wire == TCP_WIRE_2023 ? i : -1, &peer.ss, peer.seq);
        if (order == 0)
            return err(c, PLX_ERR_PROTOCOL, "tcp: rank %d published this rank's own address %s", i, p->addr);
        if (order < 0)
            m->accepting[i] = 1;
        else if ((rc = dial_peer(m, i, &peer, me, deadline)) != 0)
            return rc;
    }
    return 0;
}

/* After the rendezvous: on failure, the peers still connected hear which
 * rank it failed for; what the rendezvous opened closes; on success the
 * connections are set for the data path (no Nagle, non-blocking). */
static void finish_mesh(struct mesh *m, int rc)
{
    struct tcp_comm *c = m->c;
    int P = c->size, r = c->rank;
    /* Failed for want of a store or a peer nobody can name: a connected
     * peer that has gone is the likely cause (the store's host died). */
    int why = TCP_LOST_RENDEZVOUS;
    for (int i = 0; rc && m->blame < 0 && i < P; i++)
        if (i != r && tcp__hung_up(c->peers[i].fd)) {
            m->blame = i;
            why = TCP_LOST_CONNECTION;
        }
    if (rc && m->blame >= 0)
        tell_peers(c, m->blame, why);
    for (int k = 0; k < m->nsh; k++)
        shake_close(m, k);
    free(m->sh);
    if (m->one_fd >= 0)
        close(m->one_fd);
    for (int i = 0; i < P; i++) {
        if (m->lfd[i] >= 0)
            close(m->lfd[i]);
        struct tcp_peer *p = &c->peers[i];
        if (rc == 0 && i != r) {
            int one = 1;
            setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK);
        }
    }
}

/* The host name, the layout the job speaks, the listeners and this rank's
 * address, then every peer's. */
static int rendezvous(struct mesh *m, const struct tcp_addr *me, const char *shown, struct sockaddr_storage *mine,
                      unsigned char *blob, uint64_t deadline, int64_t conn_ms)
{
    size_t len = 0;
    int rc = publish_host(m->c, m->args);
    if (rc == 0)
        rc = tcp__choose_wire(m->c, m->args, deadline, &m->wire, &m->blame);
    if (rc == 0)
        rc = open_listeners(m, me, shown, mine, blob, &len);
    if (rc == 0)
        rc = publish(m->c, m->args, blob, len);
    if (rc == 0)
        rc = meet_peers(m, me, mine, deadline);
    if (rc == 0)
        rc = connect_loop(m, deadline, conn_ms);
    return rc;
}

int tcp__connect_mesh(struct tcp_comm *c, const struct plx_comm_args *a)
{
    int P = c->size, rc = 0;
    struct tcp_addr me;
    struct mesh m = {.c = c, .args = a, .blame = -1, .one_fd = -1, .machine = plx_common_machine_id()};
    c->machine_ranks = 1;
    if ((rc = tcp__choose_address(c->host, c->config, &me)) != 0 || (rc = job_secret(c, &m.secret)) != 0)
        return rc;
    char shown[80];
    fmt_addr(shown, sizeof shown, &me.ss);
    c->host->log(c->host->ctx, PLX_LOG_DEBUG, "rank %d publishes %s: %s", c->rank, shown, me.why);
    /* Within what is left of the init's deadline, whatever connect_timeout_ms says. */
    int64_t create_ms = plx_plugin_create_ms(a);
    int64_t conn_ms = plx_plugin_config_ms(c->host, c->config, "connect_timeout_ms", create_ms);
    if (create_ms >= 0 && (conn_ms <= 0 || conn_ms > create_ms))
        conn_ms = create_ms;
    m.auth_ms = plx_plugin_config_ms(c->host, c->config, "auth_timeout_ms", 10000);
    m.max_shakes = config_int(c, "max_handshakes", 8);
    if (m.max_shakes < 1)
        m.max_shakes = 1;
    m.lfd = malloc(sizeof(int) * (size_t)P);
    m.accepting = calloc((size_t)P, sizeof(int));
    struct sockaddr_storage *mine = calloc((size_t)P, sizeof *mine);
    size_t list = (size_t)(P > 1 ? P - 1 : 1) * TCP_ADDR_BYTES, rec = tcp__rec_size(P, 255);
    unsigned char *blob = calloc(1, list > rec ? list : rec);
    if (!m.lfd || !m.accepting || !mine || !blob) {
        free(m.lfd);
        free(m.accepting);
        free(mine);
        free(blob);
        return err(c, PLX_ERR_NOMEM, "tcp: out of memory");
    }
    for (int i = 0; i < P; i++)
        m.lfd[i] = -1;
    uint64_t deadline = plx_plugin_deadline(conn_ms > 0 ? conn_ms : create_ms);
    rc = rendezvous(&m, &me, shown, mine, blob, deadline, conn_ms);
    finish_mesh(&m, rc);
    free(m.accepting);
    free(m.lfd);
    free(mine);
    free(blob);
    return rc;
}
