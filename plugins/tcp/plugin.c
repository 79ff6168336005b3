/* plugin.c - the tcp backend: point-to-point over Gloo's TCP pair protocol
 * (gen-1, as Debian's libgloo 2022 speaks it); every collective comes from
 * the core's generic algorithms over isend/irecv.
 *
 * One I/O thread per communicator (epoll, non-blocking sockets, TCP_NODELAY,
 * 4 MiB socket buffers). Payloads go out with their header in one sendmsg and
 * land straight in the user's buffer. The protocol is in wire*.c (wire.h
 * says which file does what), the rendezvous in bootstrap.c. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "hostid.h"
#include "tcp.h"

/* The entry point's services: probe runs before any communicator exists.
 * Everything else reaches the core through its communicator's instance. */
static const struct plx_host *entry_host;

static int probe(struct plx_probe_result *out)
{
    /* The address a communicator would publish, so plexus-info shows it and
     * why (the choice only reads interfaces and routes: no socket is bound). */
    struct tcp_addr a;
    char shown[80];
    out->state = PLX_PROBE_USABLE;
    if (tcp__choose_address(entry_host, NULL, &a) != 0) {
        /* A setting that names nothing here: every rank fails at once. */
        out->state = PLX_PROBE_BROKEN;
        snprintf(out->reason, sizeof out->reason, "no address to publish: %s", a.why);
        return 0;
    }
    tcp__fmt_ip(shown, sizeof shown, (const struct sockaddr *)&a.ss);
    snprintf(out->reason, sizeof out->reason, "TCP sockets (Gloo gen-1 pair protocol); publishes %.46s: %.150s",
             shown, a.why);
    return 0;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    uint32_t size = out->struct_size;
    struct plx_caps caps = {.struct_size = size,
                            .flags = PLX_CAP_ASYNC | PLX_CAP_ABORT | PLX_CAP_THREAD_SAFE | PLX_CAP_MULTI_NODE |
                                     PLX_CAP_ANY_SOURCE | PLX_CAP_P2P | PLX_CAP_P2P_HEAD | PLX_CAP_SHRINK,
                            .dtypes = PLX_BIT(PLX_DTYPE_COUNT) - 1,
                            .redops = PLX_BIT(PLX_REDOP_COUNT) - 1,
                            .mem_kinds = PLX_BIT(PLX_MEM_HOST)};
    memcpy(out, &caps, size < sizeof caps ? size : sizeof caps);
    return 0;
}

static void destroy(struct tcp_comm *c)
{
    if (c->io_started) {
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_mutex_unlock(&c->mu);
        uint64_t one = 1;
        if (write(c->evfd, &one, sizeof one) < 0) {
            /* the eventfd cannot be full here */
        }
        pthread_join(c->io, NULL);
    }
    pthread_mutex_lock(&c->mu);
    tcp__free_state(c);
    pthread_mutex_unlock(&c->mu);
    if (c->early_payloads)
        c->host->log(c->host->ctx, PLX_LOG_DEBUG,
                     "rank %d: %llu payload(s) (%llu bytes) came before their receive was posted, each copied twice",
                     c->rank, (unsigned long long)c->early_payloads, (unsigned long long)c->early_payload_bytes);
    for (int i = 0; i < c->size; i++) {
        struct tcp_peer *p = &c->peers[i];
        if (p->fd >= 0) {
            /* Unread input makes close() reset the connection, and a reset
             * discards what this side has not sent yet, a lost-peer notice
             * included: read what is there first (without waiting). */
            for (int k = 0; k < 64 && p->rxbuf; k++)
                if (recv(p->fd, p->rxbuf, TCP_RXBUF, MSG_DONTWAIT) <= 0)
                    break;
            close(p->fd);
        }
        free(p->rxbuf);
    }
    if (c->ep >= 0)
        close(c->ep);
    if (c->evfd >= 0)
        close(c->evfd);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    if (c->lead_ep >= 0)
        close(c->lead_ep);
    free(c->lead_ev);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->peers);
    free(c);
}

/* The spin budget for `sharing` ranks on this machine's cores (see below),
 * unless [tcp] busy_poll_us sets it. Beyond four ranks a core, nearly every
 * rank a yield could hand the core to is waiting too: spinners then take
 * turns on the cores that the one rank with work needs, so none spins. */
static long choose_spin(struct tcp_comm *c, int sharing)
{
    long cores = plx_common_usable_cores();
    c->spin_yield = sharing > 0 && cores > 0 && cores < sharing;
    int crowded = cores > 0 && sharing > 4 * cores;
    if (c->busy_poll_us < 0)
        c->spin_max_ns = crowded ? 0 : c->spin_yield ? 2000000u : sharing > 0 ? 1000000u : 0;
    c->spin_ns = c->spin_max_ns;
    return cores;
}

/* The mesh found more ranks on this machine than on this host: the spin
 * is theirs to share. */
static void spin_for_machine(struct tcp_comm *c, const struct plx_comm_args *a)
{
    /* The mesh counts this communicator's ranks; the core may know more of
     * the job's on this machine (a hierarchy's other children, ABI 1.14). */
    if (PLX_HAS_FIELD(a, struct plx_comm_args, machine_ranks) && a->machine_ranks > c->machine_ranks)
        c->machine_ranks = a->machine_ranks;
    if (c->machine_ranks <= a->local_size)
        return;
    long cores = choose_spin(c, c->machine_ranks);
    char host_ranks[32] = "the host's count unknown";
    if (a->local_size > 0)
        snprintf(host_ranks, sizeof host_ranks, "%d on this host", a->local_size);
    c->host->log(c->host->ctx, PLX_LOG_INFO, "rank %d: %d ranks share this machine's %ld cores (%s): %s", c->rank,
                 c->machine_ranks, cores, host_ranks,
                 c->spin_max_ns == 0 ? "waits sleep at once" : c->spin_yield ? "waits spin, yielding" : "waits spin");
}

/* [tcp] busy_poll_us, wait_slice and max_early_bytes, and the spin budget
 * they and this machine's cores imply. */
static void read_config(struct tcp_comm *c, const struct plx_comm_args *a)
{
    const struct plx_host *host = c->host;
    /* Spinning before sleeping saves a scheduler wake-up, a large part of a
     * small message's round trip. While every local rank has a core of its
     * own the spin is plain and long enough to cover the wait between two
     * segments of a large message too. Oversubscribed, a plain spin would
     * steal the peers' time, so the spin yields the core between looks: the
     * peer that shares it runs at once instead of after a sleep and a
     * wake-up. The cores are those this process may run on
     * (sched_getaffinity: taskset, cgroups' cpusets), not the machine's, and
     * the ranks those of the host until the mesh has counted the ranks on
     * this machine (hosts emulated in network namespaces, or containers,
     * share one machine's cores). On a machine busy with other work a fixed
     * spin holds a core the peer needs for a whole time slice, so auto
     * adapts the budget (spin_adapt). `sh bench/tuning.sh build spin`
     * measures each case, BUSY=1 the busy machine (bench/tuning.md). */
    c->config = a->config;
    int64_t bp = plx_plugin_config_int(host, c->config, "busy_poll_us", -1); /* ns; -1: auto */
    c->busy_poll_us = bp >= 0 ? (int)(bp / 1000) : -1;
    c->wait_slice_ns = (uint64_t)plx_plugin_config_int(host, c->config, "wait_slice", TCP_WAIT_SLICE_DEFAULT_NS);
    c->spin_max_ns = bp >= 0 ? (uint64_t)bp : 0;
    choose_spin(c, a->local_size);
    int64_t max_early = plx_plugin_config_int(host, c->config, "max_early_bytes", (int64_t)256 << 20);
    c->max_early_bytes = max_early > 0 ? (size_t)max_early : (size_t)256 << 20;
}

/* c's lock, epoll set, eventfds and per-peer buffers; 0, or an error
 * reported (destroy() frees what was made). */
static int open_io(struct tcp_comm *c, const struct plx_comm_args *a)
{
    const struct plx_host *host = c->host;
    pthread_mutex_init(&c->mu, NULL);
    plx_plugin_cond_init(&c->cv); /* CLOCK_MONOTONIC, as the deadlines */
    c->ep = epoll_create1(EPOLL_CLOEXEC);
    c->lead_ep = epoll_create1(EPOLL_CLOEXEC);
    c->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->lead_ev = calloc(TCP_LEAD_EVENTS, sizeof *c->lead_ev);
    int rc = 0;
    for (int i = 0; i < a->size; i++) {
        c->peers[i].fd = -1;
        c->peers[i].rank = i;
        if (i != a->rank && !(c->peers[i].rxbuf = malloc(TCP_RXBUF)))
            rc = host->error(host->ctx, PLX_ERR_NOMEM, "tcp: out of memory");
    }
    if (rc == 0 && !c->lead_ev)
        rc = host->error(host->ctx, PLX_ERR_NOMEM, "tcp: out of memory");
    if (rc == 0 && (c->ep < 0 || c->lead_ep < 0 || c->evfd < 0 || c->wake_fd < 0))
        rc = host->error(host->ctx, PLX_ERR_SYSTEM, "tcp: epoll/eventfd: %s", strerror(errno));
    return rc;
}

/* Once the mesh is up: the I/O thread watches its wake-up eventfd and every
 * peer's socket, and so does a leader (with wake_fd). 0, or an error reported. */
static int watch_peers(struct tcp_comm *c, const struct plx_comm_args *a)
{
    const struct plx_host *host = c->host;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    if (epoll_ctl(c->ep, EPOLL_CTL_ADD, c->evfd, &ev) || epoll_ctl(c->lead_ep, EPOLL_CTL_ADD, c->wake_fd, &ev))
        return host->error(host->ctx, PLX_ERR_SYSTEM, "tcp: epoll_ctl: %s", strerror(errno));
    for (int i = 0; i < a->size; i++) {
        if (i == a->rank)
            continue;
        ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = (uint64_t)i};
        if (epoll_ctl(c->ep, EPOLL_CTL_ADD, c->peers[i].fd, &ev) ||
            epoll_ctl(c->lead_ep, EPOLL_CTL_ADD, c->peers[i].fd, &ev))
            return host->error(host->ctx, PLX_ERR_SYSTEM, "tcp: epoll_ctl: %s", strerror(errno));
        c->peers[i].ev_mask = c->peers[i].lead_mask = EPOLLIN;
    }
    return 0;
}

static int comm_create(const struct plx_comm_args *a, void **out)
{
    /* A core of ABI 1.5 hands each communicator its own services and holds
     * the requests (req_size); an older one has only the entry's. */
    const struct plx_host *host =
        PLX_HAS_FIELD(a, struct plx_comm_args, host) && a->host ? a->host : entry_host;
    if (!a->store)
        return host->error(host->ctx, PLX_ERR_INVALID_USAGE,
                           "tcp: needs a rendezvous store (MASTER_ADDR/MASTER_PORT or PLEXUS_INIT)");
    struct tcp_comm *c = calloc(1, sizeof *c);
    if (!c || !(c->peers = calloc((size_t)a->size, sizeof *c->peers))) {
        free(c);
        return host->error(host->ctx, PLX_ERR_NOMEM, "tcp: out of memory");
    }
    c->host = host;
    c->core_reqs = host->abi_minor >= 5;
    c->rank = a->rank;
    c->size = a->size;
    c->lost_rank = -1;
    c->revoked_by = -1;
    c->gave_up_by = -1;
    c->aborted_by = -1;
    c->timeout_ms = a->timeout_ms;
    read_config(c, a);
    int rc = open_io(c, a);
    if (rc == 0)
        rc = tcp__connect_mesh(c, a);
    if (rc == 0)
        spin_for_machine(c, a);
    if (rc == 0)
        rc = watch_peers(c, a);
    if (rc == 0) {
        if (pthread_create(&c->io, NULL, tcp__io_main, c) == 0)
            c->io_started = 1;
        else
            rc = host->error(host->ctx, PLX_ERR_SYSTEM, "tcp: cannot start the I/O thread");
    }
    if (rc) {
        destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int comm_abort(void *comm)
{
    struct tcp_comm *c = comm;
    pthread_mutex_lock(&c->mu);
    if (!c->aborted) {
        c->aborted = 1;
        char msg[120];
        snprintf(msg, sizeof msg, "tcp: rank %d: communicator aborted", c->rank);
        tcp__fail_all(c, PLX_ERR_ABORTED, msg);
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static int comm_revoke(void *comm)
{
    struct tcp_comm *c = comm;
    pthread_mutex_lock(&c->mu);
    if (!c->broken) {
        c->revoked_by = c->rank;
        char msg[120];
        snprintf(msg, sizeof msg, "tcp: rank %d revoked the communicator", c->rank);
        tcp__fail_all(c, PLX_ERR_REVOKED, msg);
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* What this communicator lost by itself: the loss that broke it, then the
 * peers that closed a quiet connection (they died, or finished first). */
static int comm_losses(void *comm, char *msg, size_t len)
{
    struct tcp_comm *c = comm;
    int n = 0;
    size_t at = 0;
    msg[0] = '\0';
    pthread_mutex_lock(&c->mu);
    if (c->broken && c->lost_rank >= 0) {
        snprintf(msg, len, "%s", c->lost_msg);
        at = strlen(msg);
        n = 1;
    }
    for (int i = 0; i < c->size && at + 1 < len; i++) {
        const struct tcp_peer *p = &c->peers[i];
        if (i == c->rank || !p->closed || (c->broken && i == c->lost_rank))
            continue;
        snprintf(msg + at, len - at, "%stcp: rank %d (%s) closed its connection: %s", n ? "; " : "", p->rank,
                 p->addr, p->closed_why);
        at += strlen(msg + at);
        n++;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* The lost-ranks hint: the rank whose lost connection broke this
 * communicator, seen here or reported by the peer that saw it. Only that
 * cause: a peer that revoked, aborted or gave up says so before it closes,
 * and one that closed a quiet connection may just have finished. */
static int comm_lost_ranks(void *comm, unsigned char *dead, int size)
{
    struct tcp_comm *c = comm;
    int n = 0;
    pthread_mutex_lock(&c->mu);
    if (c->broken && c->broken_status == PLX_ERR_PEER_LOST && c->lost_rank >= 0 && c->lost_rank < size &&
        c->lost_rank != c->rank) {
        dead[c->lost_rank] = 1;
        n = 1;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

static int comm_destroy(void *comm)
{
    destroy(comm);
    return 0;
}

static int post(void *comm, const struct plx_p2p_args *a, void **out, int is_send)
{
    struct tcp_comm *c = comm;
    const struct plx_host *host = c->host;
    int has_head = PLX_HAS_FIELD(a, struct plx_p2p_args, head_bytes) && a->head_bytes;
    if (a->peer == c->rank || a->peer >= c->size || (a->peer < 0 && (is_send || a->peer != PLX_ANY_SOURCE)))
        return host->error(host->ctx, PLX_ERR_INVALID_ARG, "tcp: rank %d cannot %s rank %d (size %d)", c->rank,
                           is_send ? "send to" : "receive from", a->peer, c->size);
    if ((a->bytes && !a->buf) || (has_head && !a->head))
        return host->error(host->ctx, PLX_ERR_INVALID_ARG, "tcp: NULL buffer for %zu bytes", a->bytes);
    struct tcp_req *r = NULL;
    if (c->core_reqs) { /* the core's memory, in its record of the transfer */
        if (!(r = *out))
            return host->error(host->ctx, PLX_ERR_INVALID_USAGE, "tcp: no request memory (req_size) from the core");
        memset(r, 0, offsetof(struct tcp_req, err)); /* err is written before it is read */
        r->core_mem = 1;
    }
    pthread_mutex_lock(&c->mu);
    if (!r && !(r = tcp__req_get(c))) {
        pthread_mutex_unlock(&c->mu);
        return host->error(host->ctx, PLX_ERR_NOMEM, "tcp: out of memory");
    }
    r->is_send = is_send;
    r->peer = a->peer < 0 ? -1 : a->peer;
    r->slot = a->tag;
    r->buf = a->buf;
    r->bytes = a->bytes;
    if (has_head) {
        r->head = a->head;
        r->head_bytes = a->head_bytes;
    }
    int rc;
    if (c->broken)
        rc = host->error(host->ctx, c->broken_status, "%s", c->lost_msg);
    else if (r->peer >= 0 && (rc = tcp__peer_gone(c, &c->peers[r->peer], r)) != 0)
        ;
    else
        rc = is_send ? tcp__post_send(c, r) : tcp__post_recv(c, r);
    if (rc && r->linked == 0) {
        if (!r->core_mem)
            tcp__req_put(c, r);
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    pthread_mutex_unlock(&c->mu);
    *out = r;
    return 0;
}

static int isend(void *comm, const struct plx_p2p_args *a, void **out)
{
    return post(comm, a, out, 1);
}

static int irecv(void *comm, const struct plx_p2p_args *a, void **out)
{
    return post(comm, a, out, 0);
}

static int finish(const struct tcp_comm *c, struct tcp_req *r)
{
    return r->status ? c->host->error(c->host->ctx, r->status, "%s", r->err) : 0;
}

static int test(void *comm, void *req, int *done)
{
    struct tcp_req *r = req;
    *done = atomic_load_explicit(&r->done, memory_order_acquire);
    return *done ? finish(comm, r) : 0;
}

/* busy_poll_us=auto: adapt the spin budget after a wait that completed
 * (with c->mu held). A spin that lost its core (preempted: other work
 * wants the cores) halves the budget, down to none, and so does a wait that
 * slept for longer than twice the full spin (the peer was not running, or
 * is busy elsewhere: no spin would have caught it). A wait that slept but
 * ended within that counts towards doubling the budget again (up to the
 * configured spin): the full spin would have caught it. The bound is the
 * full spin, not the current one: once the budget is small, a wait that
 * sleeps pays the wake-up itself, longer than twice a small budget, so
 * such a bound would keep a budget that fell to none there for good (a
 * process preempted now and then, as a torch rank is, would pay a wake-up
 * on every operation from then on). An idle machine keeps the full spin, a
 * loaded one sleeps. */
static void spin_adapt(struct tcp_comm *c, int slept, int preempted, uint64_t waited_ns)
{
    uint64_t reach = 2 * (c->spin_max_ns > TCP_SPIN_MIN_NS ? c->spin_max_ns : TCP_SPIN_MIN_NS);
    if (preempted || (slept && waited_ns >= reach)) {
        c->spin_ns /= 2;
        if (c->spin_ns < TCP_SPIN_MIN_NS)
            c->spin_ns = 0;
        c->spin_regrow = 0;
    } else if (slept && c->spin_ns < c->spin_max_ns && ++c->spin_regrow >= TCP_SPIN_REGROW) {
        c->spin_ns = c->spin_ns ? c->spin_ns * 2 : TCP_SPIN_MIN_NS;
        if (c->spin_ns > c->spin_max_ns)
            c->spin_ns = c->spin_max_ns;
        c->spin_regrow = 0;
    }
}

/* Lead: read every connection from this thread until r is done or
 * deadline_ns passes (see tcp_comm.leader). Called with c->mu held and no
 * leader; returns with c->mu held. */
static void lead(struct tcp_comm *c, struct tcp_req *r, uint64_t deadline_ns)
{
    const struct plx_host *host = c->host;
    c->leader = 1;
    if (!c->in_off) {
        tcp__set_input(c, 0);
        uint64_t one = 1; /* the I/O thread now sleeps with a timeout, to turn input back on later */
        if (write(c->evfd, &one, sizeof one) < 0) {
            /* cannot overflow: the I/O thread drains it */
        }
    }
    tcp__flush_all(c);
    uint64_t t0 = host->clock_ns(), spin_until = t0 + c->spin_ns;
    int slept = 0, preempted = 0;
    while (!atomic_load_explicit(&r->done, memory_order_acquire) && !c->broken) {
        uint64_t now = host->clock_ns();
        if (now >= deadline_ns)
            break;
        uint64_t left = deadline_ns - now;
        if (now < spin_until) /* busy_poll_us: look without sleeping */
            left = 0;
        /* Whole milliseconds, rounded up: the deadline is checked again above. */
        uint64_t ms = (left + 999999u) / 1000000u;
        c->leader_sleeping = left > 0;
        slept |= left > 0;
        if (left > 0)
            plx__slice_shorten(c->wait_slice_ns); /* wait_until gives it back */
        pthread_mutex_unlock(&c->mu);
        if (left == 0 && c->spin_yield)
            sched_yield();
        int k = epoll_wait(c->lead_ep, c->lead_ev, TCP_LEAD_EVENTS, ms > INT_MAX ? INT_MAX : (int)ms);
        /* A look that took long: this thread lost its core while spinning.
         * Yielding counts too: a peer rank given the core hands it back
         * within microseconds; other work keeps it for a time slice, and a
         * spin that went on yielding to it would pay a slice per look. */
        if (left == 0 && c->busy_poll_us < 0 &&
            host->clock_ns() - now > (c->spin_yield ? TCP_SPIN_YIELD_NS : TCP_SPIN_PREEMPT_NS)) {
            preempted = 1;
            spin_until = 0; /* sleep from now on */
        }
        pthread_mutex_lock(&c->mu);
        c->leader_sleeping = 0;
        for (int i = 0; i < k && !c->broken; i++) {
            if (c->lead_ev[i].data.u64 == UINT64_MAX) {
                uint64_t v;
                if (read(c->wake_fd, &v, sizeof v) < 0) {
                    /* only the leader reads it */
                }
                continue;
            }
            tcp__progress(c, &c->peers[c->lead_ev[i].data.u64]);
        }
    }
    c->leader = 0;
    c->last_lead_ns = host->clock_ns();
    if (c->busy_poll_us < 0 && atomic_load_explicit(&r->done, memory_order_acquire))
        spin_adapt(c, slept, preempted, c->last_lead_ns - t0);
    pthread_cond_broadcast(&c->cv); /* a thread waiting meanwhile may lead now */
}

/* Wait for req until deadline_ns (absolute, host->clock_ns; UINT64_MAX:
 * none), leading the reads while no other thread does. */
static int wait_until(void *comm, void *req, uint64_t deadline_ns)
{
    struct tcp_comm *c = comm;
    const struct plx_host *host = c->host;
    struct tcp_req *r = req;
    if (atomic_load_explicit(&r->done, memory_order_acquire))
        return finish(c, r);
    uint64_t t0 = host->clock_ns();
    pthread_mutex_lock(&c->mu);
    int done;
    while (!(done = atomic_load(&r->done))) {
        if (host->clock_ns() >= deadline_ns)
            break;
        if (!c->leader && !c->broken) {
            lead(c, r, deadline_ns);
            continue;
        }
        /* Another thread leads: it (or the I/O thread) completes r and signals. */
        plx__slice_shorten(c->wait_slice_ns);
        plx_plugin_cond_wait_until(&c->cv, &c->mu, deadline_ns);
    }
    pthread_mutex_unlock(&c->mu);
    plx__slice_restore();
    if (done)
        return finish(c, r);
    return host->error(host->ctx, PLX_ERR_TIMEOUT, "tcp: rank %d waited %llu ms to %s rank %d (slot %#llx)", c->rank,
                       (unsigned long long)((host->clock_ns() - t0) / 1000000u), r->is_send ? "send to" : "receive from",
                       r->peer, (unsigned long long)r->slot);
}

/* The ABI 1.0 wait: a timeout in ms (PLX_TIMEOUT_INFINITE: none). */
static int wait_req(void *comm, void *req, int64_t timeout_ms)
{
    return wait_until(comm, req, plx_plugin_deadline(timeout_ms));
}

static void req_free(void *comm, void *req)
{
    struct tcp_comm *c = comm;
    struct tcp_req *r = req;
    pthread_mutex_lock(&c->mu);
    /* A request in the core's memory that the plugin still points at moves
     * to a record of its own first: the core reuses that memory at once. */
    if (r->linked && r->core_mem)
        r = tcp__detach(c, r);
    if (r && r->linked)
        tcp__cancel(c, r); /* freed when the last list or frame lets go of it */
    else if (r && !r->core_mem)
        tcp__req_put(c, r);
    pthread_mutex_unlock(&c->mu);
}

/* Every key tcp reads, typed: the core checks values where they are set. */
static const struct plx_key keys[] = {
    {"address", PLX_KEY_STRING, NULL, NULL, "IPv4 or IPv6 address to listen on and publish (overrides ifname)"},
    {"ifname", PLX_KEY_LIST, NULL, NULL,
     "interfaces to use, NCCL_SOCKET_IFNAME's rules: name prefixes (eth,ib), =exact names, ^ to exclude; the first "
     "match that is up, IPv4 before IPv6. Unset: listen on every address and publish the one that routes to the "
     "rendezvous host (MASTER_ADDR), else the first non-loopback interface"},
    {"sndbuf", PLX_KEY_SIZE, "4M", NULL, "SO_SNDBUF in bytes (0: kernel autotuning)"},
    {"rcvbuf", PLX_KEY_SIZE, "4M", NULL, "SO_RCVBUF in bytes (0: kernel autotuning)"},
    {"connect_timeout_ms", PLX_KEY_DURATION, NULL, NULL,
     "limit for the rendezvous and connections (default: the communicator's timeout)"},
    {"max_early_bytes", PLX_KEY_SIZE, "256M", NULL,
     "most bytes of eager messages kept per peer for receives not yet posted; more drops that peer"},
    {"wait_slice", PLX_KEY_DURATION, TCP_WAIT_SLICE_DEFAULT, NULL,
     "A wait about to sleep asks the scheduler for this time slice until it returns, and the I/O thread runs "
     "on it, so their wake-ups preempt foreign work on the core (custom slices for fair tasks: Linux 6.12 and "
     "later; plexus-info --backend shm says whether this kernel has them; 0 leaves the slice alone)"},
    {"busy_poll_us", PLX_KEY_DURATION, "auto", "auto",
     "spin this long (bare numbers: us) in wait() before sleeping, yielding the core between looks when local "
     "ranks outnumber the cores this process may use; auto: up to 1000 when every local rank has a core, 2000 "
     "when they outnumber the cores, halved whenever a spin loses its core (the machine is busy) or a wait "
     "outlasts twice the spin, doubled again after 8 waits that a doubled spin would have caught"},
    {"gloo_wire", PLX_KEY_ENUM, "auto", "auto|2022|2023",
     "the rendezvous layout: 2022 as gloo before mid-2023 (a listener per pair; Debian 12), 2023 as gloo since "
     "(one listener, pairs named by identifiers; Debian 13, sid); auto: what the job's gloo ranks publish, 2022 "
     "when every rank is plexus"},
    {"auth", PLX_KEY_ENUM, "auto", "auto|on|off",
     "authenticate peers with the job secret PLEXUS_JOB_SECRET: auto when it is set, on requires it, off speaks "
     "the plain Gloo pair protocol"},
    {"auth_timeout_ms", PLX_KEY_DURATION, "10000", NULL,
     "a connection that has not completed the handshake within this long is dropped (and logged)"},
    {"max_handshakes", PLX_KEY_UINT, "8", NULL,
     "most handshakes in progress at once on a listener; further connections wait until those end"},
    {NULL, 0, NULL, NULL, NULL},
};

static const struct plx_backend tcp_backend = {
    .struct_size = sizeof(struct plx_backend),
    .abi_minor = PLX_ABI_MINOR,
    .name = "tcp",
    .version = "0.2.0",
    .description = "TCP sockets speaking Gloo's pair protocol; collectives from the core",
    .keys = keys,
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
    .comm_losses = comm_losses,
    .wait_until = wait_until,
    .req_size = sizeof(struct tcp_req),
    .comm_revoke = comm_revoke,
    .comm_lost_ranks = comm_lost_ranks,
};

/* ABI 1.3 at least: tcp reads its keys typed, through the communicator's view. */
PLX_PLUGIN_ENTRY(tcp_backend, entry_host, 3)
