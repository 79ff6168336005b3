/* gloo_wire.c - the two layouts of gloo's tcp rendezvous, and which one a
 * job speaks.
 *
 * 2022 (gloo before mid-2023; Debian 12): under "<r>" the P-1 addresses of
 * rank r's per-pair listeners, 136 bytes each (struct {sockaddr_storage;
 * ssize_t seq = -1}), in ascending peer order, and "rank_<r>" = host name.
 * 2023 (gloo since 31b1f02/6d8b511; Debian 13's 2023-12 and sid's 2025-09,
 * same bytes): one listener per rank, and under "<r>" a record of native
 * words, size_t host length | host | size_t 136 | the listener's address
 * (seq -1) | P x ssize_t pair identifiers (none from a lazy gloo, or one run
 * with GLOO_ENABLE_RANK_AS_SEQUENCE_NUMBER: the dialer's rank serves). The
 * side that dials (gloo's isInitiator: address bytes, then the raw port
 * values, then the sequence numbers) first writes the 8-byte identifier the
 * listener gave the pair; the frames after are the same in both.
 *
 * A rank can read only the layout it expects, so a plexus rank learns the
 * job's before it publishes: it marks itself with store_add("plexus_tcp/<r>",
 * 1), the one store call that answers at once whether a key was set, and
 * looks (for TCP_MARK_GRACE_NS at most) until every other rank has marked
 * itself: then the job is plexus only and speaks 2022, as before (so does
 * a store that cannot add). Else it waits for the first unmarked rank's
 * "<i>", whose layout it takes (a gloo rank publishes without waiting for
 * plexus ones; a plexus rank that started late publishes the layout it
 * found). No cycle of waits: a rank waits only for one that marked itself
 * after it, which then finds it marked. Each rank records whom it waits
 * for, so a timed-out wait names the rank at the end of the chain. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp.h"

#define MARK_KEY "plexus_tcp/%d"
#define WAITS_KEY "plexus_tcp/%d/waits" /* 1 + the rank it waits for, or 0 */
#define TCP_MARK_GRACE_NS 300000000u      /* how long ranks may take to start apart */

static int64_t load_i64(const unsigned char *p)
{
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void store_i64(unsigned char *p, int64_t v)
{
    memcpy(p, &v, sizeof v);
}

static int family_ok(const unsigned char *addr)
{
    struct sockaddr_storage ss;
    memcpy(&ss, addr, sizeof ss);
    return ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
}

size_t tcp__rec_size(int P, size_t host_len)
{
    return 8 + host_len + 8 + TCP_ADDR_BYTES + (size_t)P * 8;
}

void tcp__rec_encode(unsigned char *out, const char *host, const unsigned char addr[TCP_ADDR_BYTES], int P)
{
    size_t hl = strlen(host);
    store_i64(out, (int64_t)hl);
    memcpy(out + 8, host, hl);
    out += 8 + hl;
    store_i64(out, TCP_ADDR_BYTES);
    memcpy(out + 8, addr, TCP_ADDR_BYTES);
    out += 8 + TCP_ADDR_BYTES;
    /* The pair with rank i is identified by i: a lazy gloo peer, which
     * reads no identifiers and writes its own rank, then finds it too. */
    for (int i = 0; i < P; i++)
        store_i64(out + 8 * (size_t)i, i);
}

int tcp__rec_decode(const void *val, size_t len, int P, int me, struct tcp_rec *out)
{
    const unsigned char *p = val;
    if (len < 16)
        return -1;
    uint64_t hl = (uint64_t)load_i64(p);
    if (hl > len - 16 || hl >= sizeof out->host)
        return -1;
    uint64_t al = (uint64_t)load_i64(p + 8 + hl);
    size_t rest = len - 16 - (size_t)hl;
    if (al != TCP_ADDR_BYTES || rest < TCP_ADDR_BYTES)
        return -1;
    size_t ids = rest - TCP_ADDR_BYTES;
    if (ids != 0 && ids != (size_t)P * 8)
        return -1;
    const unsigned char *addr = p + 16 + hl;
    if (!family_ok(addr))
        return -1;
    memcpy(out->host, p + 8, (size_t)hl);
    out->host[hl] = '\0';
    out->addr = addr;
    memcpy(&out->ss, addr, sizeof out->ss);
    out->seq = ids ? load_i64(addr + TCP_ADDR_BYTES + 8 * (size_t)me) : me;
    return 0;
}

int tcp__wire_of(const void *val, size_t len, int P)
{
    struct tcp_rec rec;
    if (P > 1 && len == (size_t)(P - 1) * TCP_ADDR_BYTES && family_ok(val))
        return TCP_WIRE_2022;
    return tcp__rec_decode(val, len, P, 0, &rec) == 0 ? TCP_WIRE_2023 : 0;
}

const char *tcp__wire_name(int wire)
{
    return wire == TCP_WIRE_2023 ? "gloo 2023 (one listener per rank, pair identifiers)"
                                 : "gloo 2022 (one listener per pair)";
}

/* The rank that a wait for rank i's address ends at: i, unless i is a
 * plexus rank itself waiting for another's (then that one's, and so on), so
 * a rank that never started is named by every rank, not only by those that
 * waited for it directly. */
static int chain_end(struct tcp_comm *c, const struct plx_comm_args *a, int i)
{
    for (int step = 0; step < c->size; step++) {
        char key[48];
        int64_t mark = 0, waits = 0;
        snprintf(key, sizeof key, MARK_KEY, i);
        if (c->host->store_add(a->store, key, 0, &mark) || mark <= 0)
            return i;
        snprintf(key, sizeof key, WAITS_KEY, i);
        if (c->host->store_add(a->store, key, 0, &waits) || waits <= 0 || waits > c->size)
            return i;
        i = (int)waits - 1;
    }
    return i;
}

/* Rank i's "<i>", waited for until deadline: the layout it shows. */
static int layout_of(struct tcp_comm *c, const struct plx_comm_args *a, int i, uint64_t deadline, int *wire,
                     int *blame)
{
    char key[32];
    void *val = NULL;
    size_t len = 0;
    snprintf(key, sizeof key, "%d", i);
    uint64_t now = plx_plugin_now_ns();
    int64_t ms = deadline > now ? (int64_t)((deadline - now) / 1000000u) : 0;
    int rc = c->host->store_get(a->store, key, &val, &len, ms > 0 ? ms : 1);
    if (rc == PLX_ERR_TIMEOUT) {
        int end = chain_end(c, a, i);
        *blame = end;
        if (end == i)
            return c->host->error(c->host->ctx, rc, "tcp: rank %d never published its address (waited %lld ms)", i,
                                  (long long)ms);
        return c->host->error(c->host->ctx, rc, "tcp: rank %d never published its address (waited %lld ms for rank "
                              "%d, a plexus rank waiting for it to learn the job's gloo layout)", end, (long long)ms,
                              i);
    }
    if (rc)
        return c->host->error(c->host->ctx, rc, "tcp: rank %d lost the store while waiting for rank %d's address",
                              c->rank, i);
    *wire = tcp__wire_of(val, len, c->size);
    c->host->free(val);
    if (!*wire) {
        *blame = i;
        return c->host->error(c->host->ctx, PLX_ERR_PROTOCOL,
                              "tcp: rank %d published a %zu-byte address under '%s', which is neither gloo 2022's "
                              "list (%d x %d bytes) nor gloo 2023's rank record (a different world size?)",
                              i, len, key, c->size - 1, TCP_ADDR_BYTES);
    }
    return 0;
}

/* The first rank that has not marked itself within TCP_MARK_GRACE_NS
 * (looking again and again, which no store call can time out on), or -1
 * when every rank did. Ranks of one job start within that of each other,
 * so the one left is a gloo rank, or one that never started: waiting for it
 * then names it, rather than a plexus rank that waits for it too. */
static int first_unmarked(struct tcp_comm *c, const struct plx_comm_args *a, uint64_t deadline, int *rc)
{
    uint64_t until = plx_plugin_now_ns() + TCP_MARK_GRACE_NS, pause_us = 1000;
    int from = 0; /* ranks below are marked */
    *rc = 0;
    for (;;) {
        for (; from < c->size; from++) {
            char key[48];
            int64_t v = 0;
            if (from == c->rank)
                continue;
            snprintf(key, sizeof key, MARK_KEY, from);
            if ((*rc = c->host->store_add(a->store, key, 0, &v)) != 0)
                return -1;
            if (v <= 0)
                break;
        }
        uint64_t now = plx_plugin_now_ns();
        if (from == c->size || now >= until || now >= deadline)
            return from == c->size ? -1 : from;
        usleep((useconds_t)pause_us);
        pause_us = pause_us < 4000 ? 2 * pause_us : pause_us;
    }
}

int tcp__choose_wire(struct tcp_comm *c, const struct plx_comm_args *a, uint64_t deadline, int *wire, int *blame)
{
    const char *set = plx_plugin_config_str(c->host, c->config, "gloo_wire");
    if (set && !strcmp(set, "2022")) {
        *wire = TCP_WIRE_2022;
        return 0;
    }
    if (set && !strcmp(set, "2023")) {
        *wire = TCP_WIRE_2023;
        return 0;
    }
    char key[48];
    int64_t v = 0;
    snprintf(key, sizeof key, MARK_KEY, c->rank);
    int rc = c->host->store_add(a->store, key, 1, &v);
    if (rc == PLX_ERR_UNSUPPORTED) { /* a host whose store cannot count: no probing */
        c->host->log(c->host->ctx, PLX_LOG_DEBUG, "rank %d speaks %s: the store has no add to learn the job's "
                     "layout with ([tcp] gloo_wire chooses)", c->rank, tcp__wire_name(TCP_WIRE_2022));
        *wire = TCP_WIRE_2022;
        return 0;
    }
    if (rc)
        return rc;
    int i = first_unmarked(c, a, deadline, &rc);
    if (rc)
        return rc;
    if (i >= 0) {
        snprintf(key, sizeof key, WAITS_KEY, c->rank);
        if ((rc = c->host->store_add(a->store, key, i + 1, &v)) != 0)
            return rc;
        if ((rc = layout_of(c, a, i, deadline, wire, blame)) != 0)
            return rc;
        c->host->log(c->host->ctx, PLX_LOG_DEBUG, "rank %d speaks %s, as rank %d publishes", c->rank,
                     tcp__wire_name(*wire), i);
        return 0;
    }
    *wire = TCP_WIRE_2022;
    return 0;
}
