/* bootstrap.c - Gloo gen-1 connectFullMesh: one listener per pair, 136-byte
 * addresses under the store keys gloo uses ("rank_<r>" = hostname, "<r>" =
 * the P-1 addresses in ascending peer order), and gloo's connect-role rule,
 * so a plexus rank and libgloo ranks can share a job at the transport level.
 *
 * Address blob (gloo transport/tcp/address.h, struct {sockaddr_storage;
 * ssize_t seq;}): bytes 0..127 the sockaddr, 128..135 seq = -1. libgloo
 * leaves bytes 16..127 of an IPv4 address uninitialised and never reads them;
 * plexus writes a marker at 16..31 so two plexus ranks can agree on eager
 * small sends (see tcp.h). */
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
#include <sys/epoll.h>
#include <unistd.h>

#include "tcp.h"

static const char marker[16] = "plexus-tcp/1\0\0\0";

static int err(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int err(int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tcp__host->error(tcp__host->ctx, status, "%s", msg);
}

static int64_t config_int(const char *key, int64_t def)
{
    const char *v = tcp__host->config_get(tcp__host->ctx, key);
    return v && *v ? strtoll(v, NULL, 0) : def;
}

/* [tcp] address, else the first interface of [tcp] ifname (comma list) that
 * has an IPv4 address, else 127.0.0.1. */
static int choose_address(struct in_addr *out)
{
    const char *addr = tcp__host->config_get(tcp__host->ctx, "address");
    const char *ifn = tcp__host->config_get(tcp__host->ctx, "ifname");
    if (addr && *addr) {
        if (inet_pton(AF_INET, addr, out) != 1)
            return err(PLX_ERR_CONFIG, "tcp: [tcp] address '%s' is not an IPv4 address", addr);
        return 0;
    }
    if (!ifn || !*ifn) {
        out->s_addr = htonl(INADDR_LOOPBACK);
        return 0;
    }
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all))
        return err(PLX_ERR_SYSTEM, "tcp: cannot list network interfaces: %s", strerror(errno));
    char names[256];
    snprintf(names, sizeof names, "%s", ifn);
    int found = 0;
    for (char *save = NULL, *n = strtok_r(names, ",", &save); n && !found; n = strtok_r(NULL, ",", &save))
        for (struct ifaddrs *i = all; i && !found; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, n)) {
                *out = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
                found = 1;
            }
    if (found) {
        freeifaddrs(all);
        return 0;
    }
    char have[256] = "";
    for (struct ifaddrs *i = all; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof ip);
            size_t l = strlen(have);
            snprintf(have + l, sizeof have - l, "%s%s (%s)", l ? ", " : "", i->ifa_name, ip);
        }
    freeifaddrs(all);
    return err(PLX_ERR_CONFIG, "tcp: [tcp] ifname '%s': no such interface has an IPv4 address (interfaces with one: %s)",
               ifn, *have ? have : "none");
}

static void set_bufs(int fd)
{
    int snd = (int)config_int("sndbuf", 4 << 20), rcv = (int)config_int("rcvbuf", 4 << 20);
    if (snd > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof snd);
    if (rcv > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
}

static void fmt_addr(char *out, size_t n, const struct sockaddr_in *sa)
{
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof ip);
    snprintf(out, n, "%s:%d", ip, ntohs(sa->sin_port));
}

static int64_t left_ms(uint64_t deadline)
{
    uint64_t now = tcp__host->clock_ns();
    return now >= deadline ? 0 : (int64_t)((deadline - now) / 1000000u);
}

/* Non-blocking connect with retries until the deadline (the listener exists
 * once the address is published, but SYNs can be lost or refused briefly). */
static int dial(const struct sockaddr_in *to, uint64_t deadline, int *out)
{
    int last = ETIMEDOUT;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return errno;
        set_bufs(fd);
        int rc = connect(fd, (const struct sockaddr *)to, sizeof *to);
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

int tcp__connect_mesh(struct tcp_comm *c, const struct plx_comm_args *a)
{
    int P = c->size, r = c->rank, rc = 0;
    struct in_addr ip;
    if ((rc = choose_address(&ip)) != 0)
        return rc;
    int64_t conn_ms = config_int("connect_timeout_ms", a->timeout_ms);
    int *lfd = malloc(sizeof(int) * (size_t)P);
    struct sockaddr_in *mine = calloc((size_t)P, sizeof *mine);
    unsigned char *blob = calloc((size_t)(P > 1 ? P - 1 : 1), TCP_ADDR_BYTES);
    if (!lfd || !mine || !blob) {
        free(lfd);
        free(mine);
        free(blob);
        return err(PLX_ERR_NOMEM, "tcp: out of memory");
    }
    for (int i = 0; i < P; i++)
        lfd[i] = -1;
    /* One listener per pair (gloo gen-1), on the chosen address only. */
    for (int i = 0, k = 0; i < P && rc == 0; i++) {
        if (i == r)
            continue;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = ip};
        socklen_t sl = sizeof sa;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd >= 0)
            set_bufs(fd); /* accepted sockets inherit them */
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 1) ||
            getsockname(fd, (struct sockaddr *)&sa, &sl)) {
            char ipt[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &ip, ipt, sizeof ipt);
            rc = err(PLX_ERR_SYSTEM, "tcp: rank %d cannot listen on %s: %s", r, ipt, strerror(errno));
            if (fd >= 0)
                close(fd);
            break;
        }
        lfd[i] = fd;
        mine[i] = sa;
        unsigned char *slice = blob + (size_t)k++ * TCP_ADDR_BYTES;
        memcpy(slice, &sa, sizeof sa);
        memcpy(slice + 16, marker, sizeof marker);
        memset(slice + 128, 0xff, 8); /* seq = -1 */
    }
    char key[32], hostname[256] = "localhost";
    gethostname(hostname, sizeof hostname - 1);
    if (rc == 0) {
        snprintf(key, sizeof key, "rank_%d", r);
        rc = tcp__host->store_set(a->store, key, hostname, strlen(hostname));
    }
    if (rc == 0) {
        snprintf(key, sizeof key, "%d", r);
        rc = tcp__host->store_set(a->store, key, blob, (size_t)(P - 1) * TCP_ADDR_BYTES);
    }
    uint64_t t0 = tcp__host->clock_ns();
    uint64_t deadline = t0 + (uint64_t)(conn_ms > 0 ? conn_ms : a->timeout_ms) * 1000000u;
    int *accepting = calloc((size_t)P, sizeof(int));
    for (int i = 0; i < P && rc == 0; i++) {
        if (i == r)
            continue;
        void *val = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "%d", i);
        int64_t wait = left_ms(deadline);
        if (tcp__host->store_get(a->store, key, &val, &len, wait > 0 ? wait : 1)) {
            rc = err(PLX_ERR_TIMEOUT, "tcp: rank %d never published its address (waited %lld ms)", i,
                     (long long)((tcp__host->clock_ns() - t0) / 1000000u));
            break;
        }
        if (len != (size_t)(P - 1) * TCP_ADDR_BYTES) {
            tcp__host->free(val);
            rc = err(PLX_ERR_PROTOCOL, "tcp: rank %d published a %zu-byte address list, expected %d x %d bytes "
                                       "(a gloo gen-2 peer, or a different world size?)",
                     i, len, P - 1, TCP_ADDR_BYTES);
            break;
        }
        const unsigned char *slice = (const unsigned char *)val + (size_t)(r > i ? r - 1 : r) * TCP_ADDR_BYTES;
        struct sockaddr_in peer;
        memcpy(&peer, slice, sizeof peer);
        struct tcp_peer *p = &c->peers[i];
        p->eager = !memcmp(slice + 16, marker, sizeof marker);
        tcp__host->free(val);
        if (peer.sin_family != AF_INET) {
            rc = err(PLX_ERR_UNSUPPORTED, "tcp: rank %d published an address of family %d; only IPv4 is supported", i,
                     peer.sin_family);
            break;
        }
        fmt_addr(p->addr, sizeof p->addr, &peer);
        /* gloo Pair::connect: compare addresses, then the raw (network
         * order) port values; the larger side connects. */
        int cmp = memcmp(&mine[i].sin_addr, &peer.sin_addr, sizeof peer.sin_addr);
        if (cmp == 0)
            cmp = (int)mine[i].sin_port - (int)peer.sin_port;
        if (cmp == 0) {
            rc = err(PLX_ERR_PROTOCOL, "tcp: rank %d published this rank's own address %s", i, p->addr);
            break;
        }
        if (cmp > 0) {
            close(lfd[i]);
            lfd[i] = -1;
            int e = dial(&peer, deadline, &p->fd);
            if (e) {
                rc = err(e == ETIMEDOUT ? PLX_ERR_TIMEOUT : PLX_ERR_PEER_LOST,
                         "tcp: rank %d cannot connect to rank %d at %s: %s", r, i, p->addr, strerror(e));
                break;
            }
        } else {
            accepting[i] = 1;
        }
    }
    /* Accept on the pairs where this rank listens (the first connection wins,
     * as in gloo: there is no handshake on the wire). */
    while (rc == 0) {
        struct pollfd pf[256];
        int who[256], n = 0;
        for (int i = 0; i < P && n < 256; i++)
            if (accepting[i] && c->peers[i].fd < 0) {
                pf[n] = (struct pollfd){lfd[i], POLLIN, 0};
                who[n++] = i;
            }
        if (n == 0)
            break;
        int64_t ms = left_ms(deadline);
        int k = ms > 0 ? poll(pf, (nfds_t)n, (int)ms) : 0;
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            char miss[160] = "";
            for (int j = 0; j < n; j++) {
                size_t l = strlen(miss);
                snprintf(miss + l, sizeof miss - l, "%s%d", l ? ", " : "", who[j]);
            }
            rc = err(PLX_ERR_TIMEOUT, "tcp: rank %d waited %lld ms for rank(s) %s to connect", r, (long long)conn_ms,
                     miss);
            break;
        }
        for (int j = 0; j < n; j++) {
            if (!(pf[j].revents & POLLIN))
                continue;
            int fd = accept4(lfd[who[j]], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0)
                continue;
            c->peers[who[j]].fd = fd;
            close(lfd[who[j]]);
            lfd[who[j]] = -1;
        }
    }
    for (int i = 0; i < P; i++) {
        if (lfd[i] >= 0)
            close(lfd[i]);
        struct tcp_peer *p = &c->peers[i];
        if (rc == 0 && i != r) {
            int one = 1;
            setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK);
        }
    }
    free(accepting);
    free(lfd);
    free(mine);
    free(blob);
    return rc;
}
