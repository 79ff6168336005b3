/* address.c - which address a tcp rank listens on and publishes.
 *
 * Explicit settings win: [tcp] address (an IPv4 or IPv6 literal), then
 * [tcp] ifname with NCCL_SOCKET_IFNAME's rules (a comma list of name
 * prefixes; "=" before the list asks for exact names, "^" excludes the
 * listed ones). The listeners bind that one address, never every address:
 * peers dial only what was published, and nothing else need be exposed.
 *
 * Without them the rank publishes the address its kernel would use to reach
 * the rendezvous host
 * (MASTER_ADDR, or the host of PLEXUS_INIT=tcp://...), as gloo does: that is
 * the one the other hosts reach it by. A rendezvous host that is this
 * host's loopback means every rank is local, so loopback is right. With no
 * rendezvous host to route to (an embedded or file store) it takes the first
 * interface that is up, not loopback and not a container bridge, IPv4 before
 * IPv6, as NCCL does; loopback only when there is none. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resolve.h"
#include "tcp.h"

void tcp__fmt_sockaddr(char *out, size_t n, const struct sockaddr *sa)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
        snprintf(out, n, "[%s]:%d", ip, ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        snprintf(out, n, "%s:%d", ip, ntohs(s4->sin_port));
    }
}

void tcp__fmt_ip(char *out, size_t n, const struct sockaddr *sa)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof ip);
    else
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof ip);
    snprintf(out, n, "%s", ip);
}

socklen_t tcp__sockaddr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int tcp__is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))
            return a->s6_addr[12] == 127;
        return IN6_IS_ADDR_LOOPBACK(a);
    }
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
}

/* NCCL_SOCKET_IFNAME's rules: "eth,ib" prefixes, "=eth0" exact names,
 * "^docker,lo" everything but those prefixes. */
int tcp__ifname_match(const char *spec, const char *name)
{
    int exclude = 0, exact = 0;
    if (*spec == '^') {
        exclude = 1;
        spec++;
    }
    if (*spec == '=') {
        exact = 1;
        spec++;
    }
    int hit = 0;
    for (const char *p = spec; *p && !hit;) {
        size_t len = strcspn(p, ",");
        while (len && (*p == ' ')) {
            p++;
            len--;
        }
        size_t cmp = len;
        while (cmp && p[cmp - 1] == ' ')
            cmp--;
        if (cmp && !strncmp(name, p, cmp) && (!exact || name[cmp] == '\0'))
            hit = 1;
        p += len + (p[len] == ',');
    }
    return exclude ? !hit : hit;
}

static int usable_iface(const struct ifaddrs *i)
{
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
        return 0;
    if (i->ifa_addr->sa_family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
        return 0; /* needs a scope id that a peer on another host cannot use */
    return i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6;
}

/* The first address of an interface that spec (or, without one, the default
 * rule) accepts: IPv4 before IPv6. */
static int pick_iface(const struct ifaddrs *all, const char *spec, struct tcp_addr *out)
{
    static const int families[] = {AF_INET, AF_INET6};
    for (size_t f = 0; f < 2; f++)
        for (const struct ifaddrs *i = all; i; i = i->ifa_next) {
            if (!usable_iface(i) || i->ifa_addr->sa_family != families[f])
                continue;
            if (spec ? !tcp__ifname_match(spec, i->ifa_name)
                     : (tcp__is_loopback(i->ifa_addr) || (i->ifa_flags & IFF_LOOPBACK) ||
                        tcp__ifname_match("docker,virbr", i->ifa_name)))
                continue;
            memcpy(&out->ss, i->ifa_addr, tcp__sockaddr_len(i->ifa_addr));
            snprintf(out->ifname, sizeof out->ifname, "%s", i->ifa_name);
            return 1;
        }
    return 0;
}

static void name_iface(const struct ifaddrs *all, struct tcp_addr *out)
{
    const struct sockaddr *me = (const struct sockaddr *)&out->ss;
    for (const struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != me->sa_family)
            continue;
        int same = me->sa_family == AF_INET6
                       ? !memcmp(&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
                                 &((const struct sockaddr_in6 *)me)->sin6_addr, sizeof(struct in6_addr))
                       : ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
                             ((const struct sockaddr_in *)me)->sin_addr.s_addr;
        if (same) {
            snprintf(out->ifname, sizeof out->ifname, "%s", i->ifa_name);
            return;
        }
    }
}

/* The rendezvous host this process was told of, or NULL. Its own copy of
 * what the core's env:// and tcp:// rendezvous read, so a plugin whose store
 * came from elsewhere still routes toward the job's host when one is named. */
const char *tcp__rendezvous_host(char *buf, size_t n, const char **from)
{
    const char *init = getenv("PLEXUS_INIT"), *ma = getenv("MASTER_ADDR");
    if (init && !strncmp(init, "tcp://", 6)) {
        const char *h = init + 6, *end;
        if (*h == '[') {
            h++;
            end = strchr(h, ']');
        } else {
            end = strrchr(h, ':');
        }
        size_t len = end ? (size_t)(end - h) : strlen(h);
        if (len && len < n) {
            memcpy(buf, h, len);
            buf[len] = '\0';
            *from = "PLEXUS_INIT";
            return buf;
        }
    }
    if (ma && *ma && strlen(ma) < n) {
        snprintf(buf, n, "%s", ma);
        *from = "MASTER_ADDR";
        return buf;
    }
    return NULL;
}

/* The longest the route's name lookup may take: the probe runs in every
 * process before init, with no deadline of its own, and a name server that
 * does not answer would hold it for the resolver's retries. By the time a
 * communicator is made the store has resolved the same name. */
#define ROUTE_LOOKUP_MS 2000

/* The local address the kernel picks to reach host (a connected UDP socket
 * sends nothing). 0, or an errno (ETIMEDOUT: the name lookup took too long). */
static int route_to(const char *hostname, struct tcp_addr *out, char *peer_ip, size_t n)
{
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *res = NULL;
    int e = plx_common_resolve(hostname, "9", &hints, ROUTE_LOOKUP_MS, &res);
    if (e)
        return e == EAI_SYSTEM || (e == EAI_AGAIN && errno == ETIMEDOUT) ? errno : EHOSTUNREACH;
    int rc = EHOSTUNREACH;
    for (struct addrinfo *a = res; a && rc; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        socklen_t sl = sizeof out->ss;
        if (!connect(fd, a->ai_addr, a->ai_addrlen) && !getsockname(fd, (struct sockaddr *)&out->ss, &sl)) {
            tcp__fmt_ip(peer_ip, n, a->ai_addr);
            rc = 0;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return rc;
}

int tcp__choose_address(const struct plx_host *host, const struct plx_config *cfg, struct tcp_addr *out)
{
    const char *addr = plx_plugin_config_str(host, cfg, "address");
    const char *ifn = plx_plugin_config_str(host, cfg, "ifname");
    memset(out, 0, sizeof *out);
    char ip[INET6_ADDRSTRLEN];
    if (addr && *addr) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&out->ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->ss;
        if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
            s4->sin_family = AF_INET;
        } else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
            s6->sin6_family = AF_INET6;
        } else {
            snprintf(out->why, sizeof out->why, "[tcp] address '%s' is neither an IPv4 nor an IPv6 address", addr);
            return host->error(host->ctx, PLX_ERR_CONFIG, "tcp: %s", out->why);
        }
        snprintf(out->why, sizeof out->why, "[tcp] address");
        return 0;
    }
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all))
        return host->error(host->ctx, PLX_ERR_SYSTEM, "tcp: cannot list network interfaces: %s",
                                strerror(errno));
    if (ifn && *ifn) {
        if (pick_iface(all, ifn, out)) {
            snprintf(out->why, sizeof out->why, "[tcp] ifname '%s' matched interface %s", ifn, out->ifname);
            freeifaddrs(all);
            return 0;
        }
        char have[256] = "";
        for (struct ifaddrs *i = all; i; i = i->ifa_next)
            if (usable_iface(i)) {
                tcp__fmt_ip(ip, sizeof ip, i->ifa_addr);
                size_t l = strlen(have);
                snprintf(have + l, sizeof have - l, "%s%s (%s)", l ? ", " : "", i->ifa_name, ip);
            }
        freeifaddrs(all);
        snprintf(out->why, sizeof out->why, "[tcp] ifname '%s' matches no interface that is up (interfaces: %s)", ifn,
                 *have ? have : "none");
        return host->error(host->ctx, PLX_ERR_CONFIG, "tcp: %s", out->why);
    }
    char hbuf[256], peer[INET6_ADDRSTRLEN] = "";
    const char *from = NULL, *rdv = tcp__rendezvous_host(hbuf, sizeof hbuf, &from);
    int route = rdv ? route_to(rdv, out, peer, sizeof peer) : EHOSTUNREACH;
    if (route == 0) {
        name_iface(all, out);
        freeifaddrs(all);
        ((struct sockaddr_in *)&out->ss)->sin_port = 0; /* sin6_port lies at the same offset */
        snprintf(out->why, sizeof out->why, "the route to the rendezvous host %s (%s = %s) leaves through %s", peer,
                 from, rdv, *out->ifname ? out->ifname : "?");
        return 0;
    }
    if (pick_iface(all, NULL, out)) {
        char slow[96];
        snprintf(slow, sizeof slow, "the rendezvous host's name did not resolve within %d ms", ROUTE_LOOKUP_MS);
        snprintf(out->why, sizeof out->why,
                 "%s; the first interface that is up and not loopback is %s (set [tcp] ifname to choose)",
                 !rdv ? "no rendezvous host named" : route == ETIMEDOUT ? slow : "no route to the rendezvous host",
                 out->ifname);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&out->ss;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        snprintf(out->ifname, sizeof out->ifname, "lo");
        snprintf(out->why, sizeof out->why, "no interface but loopback is up: this host's ranks only");
    }
    freeifaddrs(all);
    return 0;
}
