/* bootstrap.c - Gloo gen-1 connectFullMesh: one listener per pair, 136-byte
 * addresses under the store keys gloo uses ("rank_<r>" = hostname, "<r>" =
 * the P-1 addresses in ascending peer order), and gloo's connect-role rule,
 * so a plexus rank and libgloo ranks can share a job at the transport level.
 *
 * Address blob (gloo transport/tcp/address.h, struct {sockaddr_storage;
 * ssize_t seq;}): bytes 0..127 the sockaddr, 128..135 seq = -1. libgloo
 * leaves the bytes past the sockaddr uninitialised and never reads them;
 * plexus writes a marker there (16..31 after an IPv4 address, 32..47 after
 * an IPv6 one) so two plexus ranks can agree on eager small sends (tcp.h),
 * with the version of the frames they send each other: a rank that meets
 * another plexus version fails at once, naming both, instead of misreading
 * its frames mid-job (a job across hosts with different installs).
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

/* A connection in its handshake. */
struct shake {
    int fd, peer, role; /* peer: the rank dialed, or whose listener accepted it */
    int dead;           /* finished or dropped; removed by shake_compact */
    uint64_t deadline;
    char addr[64];
    struct plx__auth a;
};

/* Everything the connect phase of one rank holds. */
struct mesh {
    struct tcp_comm *c;
    const struct plx_comm_args *args;
    const char *secret;  /* NULL: plain Gloo */
    int *lfd;            /* listener per peer, -1 once closed */
    int *accepting;      /* this rank listens for that peer */
    struct shake *sh;
    int nsh, capsh;
    int64_t auth_ms, max_shakes;
    int blame;           /* the rank this rendezvous failed waiting for, or -1 */
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

static int shake_add(struct mesh *m, int fd, int peer, int role, uint64_t deadline, const char *addr)
{
    if (m->nsh == m->capsh) {
        int cap = m->capsh ? 2 * m->capsh : 16;
        struct shake *p = realloc(m->sh, sizeof *p * (size_t)cap);
        if (!p) {
            close(fd);
            return err(m->c, PLX_ERR_NOMEM, "tcp: out of memory");
        }
        m->sh = p;
        m->capsh = cap;
    }
    struct shake *h = &m->sh[m->nsh];
    char ctx[96];
    int me = m->c->rank;
    shake_ctx(m, role == PLX__AUTH_CLIENT ? me : peer, role == PLX__AUTH_CLIENT ? peer : me, ctx, sizeof ctx);
    *h = (struct shake){.fd = fd, .peer = peer, .role = role, .deadline = deadline};
    snprintf(h->addr, sizeof h->addr, "%s", addr);
    if (plx__auth_init(&h->a, role, m->secret, ctx) != 0) {
        close(fd);
        return err(m->c, PLX_ERR_SYSTEM, "tcp: %s", h->a.why);
    }
    m->nsh++;
    return 0;
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

/* Advance handshake k after poll said it may; returns an error only for a
 * connection this rank dialed (its peer is then unusable). */
static int shake_step(struct mesh *m, int k)
{
    struct shake *h = &m->sh[k];
    if (h->dead)
        return 0;
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
        if (cap < P + m->nsh) {
            cap = 2 * (P + m->nsh);
            free(pf);
            free(who);
            pf = malloc(sizeof *pf * (size_t)cap);
            who = malloc(sizeof *who * (size_t)cap);
            if (!pf || !who) {
                rc = err(m->c, PLX_ERR_NOMEM, "tcp: out of memory");
                break;
            }
        }
        /* who[j] >= 0: listener of that peer; -1 - k: handshake k. */
        int n = 0;
        uint64_t now = m->c->host->clock_ns(), next = deadline;
        for (int i = 0; i < P; i++)
            if (m->accepting[i] && c->peers[i].fd < 0 && m->lfd[i] >= 0 &&
                (!m->secret || pending_on(m, i) < m->max_shakes)) {
                pf[n] = (struct pollfd){m->lfd[i], POLLIN, 0};
                who[n++] = i;
            }
        for (int k = 0; k < m->nsh; k++) {
            pf[n] = (struct pollfd){m->sh[k].fd, plx__auth_events(&m->sh[k].a), 0};
            who[n++] = -1 - k;
            if (m->sh[k].deadline < next)
                next = m->sh[k].deadline;
        }
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
            if (who[j] >= 0 && (pf[j].revents & POLLIN) && m->lfd[who[j]] >= 0)
                rc = accept_on(m, who[j]);
    }
    free(pf);
    free(who);
    return rc;
}

/* A peer that published a loopback address cannot be reached from another
 * host: say so at once, naming what to set, instead of failing the connect
 * (or waiting the whole timeout on the other side). */
static int check_reachable(const struct tcp_comm *c, const struct plx_comm_args *a, int peer,
                           const struct tcp_addr *me, const struct sockaddr_storage *addr, const char *shown)
{
    if (!tcp__is_loopback((const struct sockaddr *)addr) || tcp__is_loopback((const struct sockaddr *)&me->ss))
        return 0;
    char key[32], mine[256] = "localhost";
    gethostname(mine, sizeof mine - 1);
    snprintf(key, sizeof key, "rank_%d", peer);
    void *val = NULL;
    size_t len = 0;
    if (c->host->store_get(a->store, key, &val, &len, a->timeout_ms) != 0)
        return 0; /* the connect attempt then says what happened */
    int same = len == strlen(mine) && !memcmp(val, mine, len);
    char theirs[256];
    snprintf(theirs, sizeof theirs, "%.*s", (int)(len < 255 ? len : 255), (const char *)val);
    c->host->free(val);
    if (same)
        return 0;
    return err(c, PLX_ERR_CONFIG,
               "tcp: rank %d on host '%s' published the loopback address %s, which rank %d on host '%s' cannot reach: "
               "set [tcp] ifname (PLEXUS_TCP_IFNAME, e.g. eth0) or [tcp] address on rank %d's host, or give every rank "
               "a routable MASTER_ADDR",
               peer, theirs, shown, c->rank, mine, peer);
}

/* One listener per pair (gloo gen-1), on the chosen address only, each
 * listener's address written into this rank's slice of the list it
 * publishes. The backlog leaves room for strangers ahead of the peer. */
static int open_listeners(struct mesh *m, const struct tcp_addr *me, const char *shown, struct sockaddr_storage *mine,
                          unsigned char *blob)
{
    struct tcp_comm *c = m->c;
    int fam = me->ss.ss_family;
    socklen_t alen = tcp__sockaddr_len((const struct sockaddr *)&me->ss);
    for (int i = 0, k = 0; i < c->size; i++) {
        if (i == c->rank)
            continue;
        struct sockaddr_storage sa = me->ss;
        socklen_t sl = sizeof sa;
        int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd >= 0)
            set_bufs(c, fd); /* accepted sockets inherit them */
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, alen) || listen(fd, m->secret ? 16 : 1) ||
            getsockname(fd, (struct sockaddr *)&sa, &sl)) {
            int rc = err(c, PLX_ERR_SYSTEM, "tcp: rank %d cannot listen on %s (%s): %s", c->rank, shown, me->why,
                         strerror(errno));
            if (fd >= 0)
                close(fd);
            return rc;
        }
        m->lfd[i] = fd;
        mine[i] = sa;
        unsigned char *slice = blob + (size_t)k++ * TCP_ADDR_BYTES;
        memcpy(slice, &sa, alen);
        memcpy(slice + marker_at(fam), marker, sizeof marker);
        memset(slice + 128, 0xff, 8); /* seq = -1 */
    }
    return 0;
}

/* This rank's host name (which check_reachable compares) and its address
 * list, under the keys gloo uses. */
static int publish(const struct tcp_comm *c, const struct plx_comm_args *a, const unsigned char *blob)
{
    char key[32], hostname[256] = "localhost";
    gethostname(hostname, sizeof hostname - 1);
    snprintf(key, sizeof key, "rank_%d", c->rank);
    int rc = c->host->store_set(a->store, key, hostname, strlen(hostname));
    if (rc == 0) {
        snprintf(key, sizeof key, "%d", c->rank);
        rc = c->host->store_set(a->store, key, blob, (size_t)(c->size - 1) * TCP_ADDR_BYTES);
    }
    return rc;
}

/* Rank i's listener for this rank, out of the list rank i published; marks
 * the peer eager when the list carries plexus's marker (a gloo peer's does
 * not). t0: when this rank started waiting, for the timeout's message. */
static int peer_address(struct mesh *m, int i, uint64_t deadline, uint64_t t0, int fam,
                        struct sockaddr_storage *peer)
{
    struct tcp_comm *c = m->c;
    int P = c->size, r = c->rank;
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
        return err(c, grc, "tcp: rank %d lost the store while waiting for rank %d's address", r, i);
    if (len != (size_t)(P - 1) * TCP_ADDR_BYTES) {
        c->host->free(val);
        return err(c, PLX_ERR_PROTOCOL, "tcp: rank %d published a %zu-byte address list, expected %d x %d bytes "
                                        "(a gloo gen-2 peer, or a different world size?)",
                   i, len, P - 1, TCP_ADDR_BYTES);
    }
    const unsigned char *slice = (const unsigned char *)val + (size_t)(r > i ? r - 1 : r) * TCP_ADDR_BYTES;
    memcpy(peer, slice, sizeof *peer);
    const unsigned char *theirs = slice + marker_at(peer->ss_family);
    c->peers[i].eager = !memcmp(theirs, marker, sizeof marker);
    if (!c->peers[i].eager && !memcmp(theirs, MARKER_NAME, strlen(MARKER_NAME))) {
        char version[sizeof marker + 1];
        memcpy(version, theirs, sizeof marker);
        version[sizeof marker] = '\0';
        for (char *v = version; *v; v++) /* only what prints */
            if (*v < 0x20 || *v > 0x7e)
                *v = '?';
        c->host->free(val);
        m->blame = i;
        return err(c, PLX_ERR_PROTOCOL,
                   "tcp: rank %d speaks %s, this rank %s: every rank of a job needs the same plexus tcp wire "
                   "(ranks started from different plexus installs?)",
                   i, version, marker);
    }
    c->host->free(val);
    if (peer->ss_family != fam)
        return err(c, PLX_ERR_UNSUPPORTED,
                   "tcp: rank %d published an address of family %s, this rank one of %s (set [tcp] address or "
                   "ifname so that every rank uses the same IP version)",
                   i, peer->ss_family == AF_INET6 ? "IPv6" : peer->ss_family == AF_INET ? "IPv4" : "unknown",
                   fam == AF_INET6 ? "IPv6" : "IPv4");
    return 0;
}

/* gloo Pair::connect: compare addresses, then the raw (network order) port
 * values; the larger side connects. Above zero: this side (mine) dials;
 * below: it listens; zero: both are the same address. */
static int pair_order(const struct sockaddr_storage *mine, const struct sockaddr_storage *peer)
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
    return cmp != 0 ? cmp : mport - pport;
}

/* This rank is the larger side of the pair with rank i: its listener for i
 * closes and it connects; with a secret, the connection first goes through
 * the handshake, whose hello leaves now (the listener's clock runs from its
 * accept). */
static int dial_peer(struct mesh *m, int i, const struct sockaddr_storage *peer, const struct tcp_addr *me,
                     uint64_t deadline)
{
    struct tcp_comm *c = m->c;
    struct tcp_peer *p = &c->peers[i];
    close(m->lfd[i]);
    m->lfd[i] = -1;
    int fd = -1, e = dial(c, peer, deadline, &fd);
    if (e) {
        m->blame = i;
        return err(c, e == ETIMEDOUT ? PLX_ERR_TIMEOUT : PLX_ERR_PEER_LOST,
                   "tcp: rank %d cannot connect to rank %d at %s: %s%s", c->rank, i, p->addr, strerror(e),
                   tcp__is_loopback((const struct sockaddr *)peer) && !tcp__is_loopback((const struct sockaddr *)&me->ss)
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
        struct sockaddr_storage peer;
        struct tcp_peer *p = &c->peers[i];
        int rc = peer_address(m, i, deadline, t0, me->ss.ss_family, &peer);
        if (rc)
            return rc;
        fmt_addr(p->addr, sizeof p->addr, &peer);
        if ((rc = check_reachable(c, m->args, i, me, &peer, p->addr)) != 0)
            return rc;
        int order = pair_order(&mine[i], &peer);
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

int tcp__connect_mesh(struct tcp_comm *c, const struct plx_comm_args *a)
{
    int P = c->size, rc = 0;
    struct tcp_addr me;
    struct mesh m = {.c = c, .args = a, .blame = -1};
    if ((rc = tcp__choose_address(c->host, c->config, &me)) != 0 || (rc = job_secret(c, &m.secret)) != 0)
        return rc;
    char shown[80];
    fmt_addr(shown, sizeof shown, &me.ss);
    c->host->log(c->host->ctx, PLX_LOG_DEBUG, "rank %d publishes %s: %s", c->rank, shown, me.why);
    /* Durations come in nanoseconds. */
    int64_t conn_ms = config_int(c, "connect_timeout_ms", a->timeout_ms * 1000000) / 1000000;
    m.auth_ms = config_int(c, "auth_timeout_ms", (int64_t)10000 * 1000000) / 1000000;
    m.max_shakes = config_int(c, "max_handshakes", 8);
    if (m.max_shakes < 1)
        m.max_shakes = 1;
    m.lfd = malloc(sizeof(int) * (size_t)P);
    m.accepting = calloc((size_t)P, sizeof(int));
    struct sockaddr_storage *mine = calloc((size_t)P, sizeof *mine);
    unsigned char *blob = calloc((size_t)(P > 1 ? P - 1 : 1), TCP_ADDR_BYTES);
    if (!m.lfd || !m.accepting || !mine || !blob) {
        free(m.lfd);
        free(m.accepting);
        free(mine);
        free(blob);
        return err(c, PLX_ERR_NOMEM, "tcp: out of memory");
    }
    for (int i = 0; i < P; i++)
        m.lfd[i] = -1;
    rc = open_listeners(&m, &me, shown, mine, blob);
    if (rc == 0)
        rc = publish(c, a, blob);
    uint64_t deadline = plx_plugin_deadline(conn_ms > 0 ? conn_ms : a->timeout_ms);
    if (rc == 0)
        rc = meet_peers(&m, &me, mine, deadline);
    if (rc == 0)
        rc = connect_loop(&m, deadline, conn_ms);
    finish_mesh(&m, rc);
    free(m.accepting);
    free(m.lfd);
    free(mine);
    free(blob);
    return rc;
}
