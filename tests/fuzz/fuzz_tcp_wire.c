/* fuzz_tcp_wire.c - the tcp plugin's frame decoder and per-slot notify
 * state machine (plugins/tcp/wire_recv.c and the rest of wire*.c), linked
 * in directly with a fake host.
 *
 * A communicator of 2 ranks is built by hand; rank 1's connection is one
 * end of a socketpair and the harness plays rank 1 on the other end. The
 * input is a script:
 *   byte 0       flags: 1 eager peer (plexus extension), 2 run the real I/O
 *                thread (else the harness calls tcp__progress itself, which
 *                is deterministic), 4 tear down before releasing requests
 *   then commands, one byte each (low 4 bits) with operands:
 *     0 LEN16 BYTES  write raw bytes (frames, garbage) as rank 1
 *     1 SLOT SIZE    post a receive from rank 1
 *     2 SLOT SIZE    post a receive from any rank
 *     3 SLOT SIZE    post a send to rank 1
 *     4 IDX          release request IDX as the core's req_free does
 *     5, 11..15      progress (or let the I/O thread run)
 *     6              read what the plugin wrote to rank 1 and check it
 *     7              abort the communicator
 *     8              rank 1 stops writing (EOF): it has finished
 *     9              input off, as while a waiting thread leads (plugin.c)
 *     10             rank 1 hangs up both ways: rank 0's writes fail
 * At the end rank 1 closes its end; the plugin must notice within a bound
 * (no hang), and teardown must free everything (LSan) without touching a
 * released buffer (ASan).
 *
 * Checks beyond "no crash": what the plugin writes is well-formed Gloo
 * frames (known opcode, notifications of 48 bytes, data frames whose nbytes
 * matches their length, a lost-peer notice only to a plexus peer and only
 * as the last frame) and never more data frames or RECV_READYs on a slot
 * than sends or receives were posted on it; tcp__free_state completes every
 * pending request. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fake_host.h"
#include "fuzz_check.h"
#include "tcp.h"

/* The services every harness communicator gets (plugin.c would take its
 * communicator's instance; this harness does not link plugin.c). */
static const struct plx_host *tcp__host;

static void quiet_log(void *ctx, int level, const char *fmt, ...)
{
    (void)ctx, (void)level, (void)fmt; /* malformed frames are logged at WARN: too loud here */
}

static struct plx_host quiet_host;

#define MAX_REQS 64
#define MAX_CMDS 256
#define QUIET_NS 2000000000ull /* an EOF must be noticed within 2 s */

struct req_slot {
    struct tcp_req *r;
    char *buf;
    int released;
};

struct harness {
    struct tcp_comm *c;
    int other;               /* rank 1's end */
    int threaded;
    int eager;               /* rank 1 speaks plexus's extensions */
    int notice_seen;         /* the plugin sent a lost-peer notice */
    struct req_slot reqs[MAX_REQS];
    int nreqs;
    /* Checking what the plugin writes: posts and frames per slot (< 256). */
    unsigned sends_posted[256], recvs_posted[256], data_seen[256], rr_seen[256], sr_seen[256];
    size_t max_send;
    unsigned char hdr[TCP_HDR_BYTES];
    size_t hdr_got;
    uint64_t payload_left;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct tcp_comm *comm_new(int eager, int *other)
{
    struct tcp_comm *c = calloc(1, sizeof *c);
    FUZZ_CHECK(c && (c->peers = calloc(2, sizeof *c->peers)));
    c->host = tcp__host;
    c->rank = 0;
    c->size = 2;
    c->timeout_ms = 1000;
    c->max_early_bytes = 256u << 10; /* small, so inputs reach the limit too */
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->ep = epoll_create1(EPOLL_CLOEXEC);
    c->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->lead_ep = epoll_create1(EPOLL_CLOEXEC);
    FUZZ_CHECK(c->ep >= 0 && c->lead_ep >= 0 && c->evfd >= 0 && c->wake_fd >= 0);
    int sv[2];
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
    *other = sv[1];
    c->peers[0] = (struct tcp_peer){.rank = 0, .fd = -1};
    struct tcp_peer *p = &c->peers[1];
    p->rank = 1;
    p->fd = sv[0];
    p->eager = eager;
    snprintf(p->addr, sizeof p->addr, "fuzz-peer");
    FUZZ_CHECK(p->rxbuf = malloc(TCP_RXBUF));
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    FUZZ_CHECK(epoll_ctl(c->ep, EPOLL_CTL_ADD, c->evfd, &ev) == 0);
    ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = 1};
    FUZZ_CHECK(epoll_ctl(c->ep, EPOLL_CTL_ADD, p->fd, &ev) == 0);
    FUZZ_CHECK(epoll_ctl(c->lead_ep, EPOLL_CTL_ADD, p->fd, &ev) == 0);
    p->ev_mask = p->lead_mask = EPOLLIN;
    return c;
}

/* Stop the I/O thread and free what the plugin holds, as plugin.c's
 * destroy does; the comm itself is freed by comm_free. */
static void comm_stop(struct tcp_comm *c)
{
    if (c->io_started) {
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_mutex_unlock(&c->mu);
        uint64_t one = 1;
        FUZZ_CHECK(write(c->evfd, &one, sizeof one) == sizeof one);
        pthread_join(c->io, NULL);
        c->io_started = 0;
    }
    pthread_mutex_lock(&c->mu);
    tcp__free_state(c);
    pthread_mutex_unlock(&c->mu);
}

static void comm_free(struct tcp_comm *c)
{
    for (int i = 0; i < c->size; i++) {
        if (c->peers[i].fd >= 0)
            close(c->peers[i].fd);
        free(c->peers[i].rxbuf);
    }
    close(c->ep);
    close(c->evfd);
    close(c->wake_fd);
    close(c->lead_ep);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->peers);
    free(c);
}

/* ---- requests, as plugin.c's post() and req_free() handle them ---------- */

static void post(struct harness *h, int is_send, int peer, unsigned slot, size_t bytes)
{
    if (h->nreqs == MAX_REQS)
        return;
    struct tcp_comm *c = h->c;
    struct tcp_req *r = calloc(1, sizeof *r);
    char *buf = malloc(bytes ? bytes : 1);
    FUZZ_CHECK(r && buf);
    memset(buf, 0x5a, bytes);
    r->is_send = is_send;
    r->peer = peer;
    r->slot = slot;
    r->buf = buf;
    r->bytes = bytes;
    pthread_mutex_lock(&c->mu);
    int rc;
    if (c->broken)
        rc = c->broken_status;
    else if (r->peer >= 0 && (rc = tcp__peer_gone(c, &c->peers[r->peer], r)) != 0)
        ;
    else
        rc = is_send ? tcp__post_send(c, r) : tcp__post_recv(c, r);
    if (rc == 0) {
        if (is_send) {
            h->sends_posted[slot]++;
            h->max_send = bytes > h->max_send ? bytes : h->max_send;
        } else {
            h->recvs_posted[slot]++;
        }
    }
    if (rc && r->linked == 0) {
        pthread_mutex_unlock(&c->mu);
        free(r);
        free(buf);
        return;
    }
    pthread_mutex_unlock(&c->mu);
    h->reqs[h->nreqs++] = (struct req_slot){.r = r, .buf = buf};
}

/* req_free: a linked (pending) request is cancelled, after which the
 * plugin must not touch its buffer, so the buffer is freed right away. */
static void release(struct harness *h, struct req_slot *s)
{
    if (s->released)
        return;
    struct tcp_comm *c = h->c;
    pthread_mutex_lock(&c->mu);
    if (s->r->linked)
        tcp__cancel(c, s->r);
    else
        free(s->r);
    pthread_mutex_unlock(&c->mu);
    free(s->buf);
    s->released = 1;
}

/* ---- what the plugin writes to rank 1 ----------------------------------- */

static void check_frame(struct harness *h)
{
    uint64_t v[6];
    memcpy(v, h->hdr, sizeof v);
    uint64_t nbytes = le64toh(v[0]), op = le64toh(v[1]), slot = le64toh(v[2]), len = le64toh(v[4]);
    FUZZ_CHECK(!h->notice_seen); /* a notice is the last frame before the shutdown */
    if (op == OP_PLX_LOST) {
        /* To a plexus peer only, naming a rank of this communicator. */
        FUZZ_CHECK(h->eager && nbytes == TCP_HDR_BYTES && slot < 2);
        h->notice_seen = 1;
        return;
    }
    FUZZ_CHECK(slot < 256);
    switch (op) {
    case OP_NOTIFY_SEND_READY:
        FUZZ_CHECK(nbytes == TCP_HDR_BYTES);
        FUZZ_CHECK(++h->sr_seen[slot] <= h->sends_posted[slot]);
        break;
    case OP_NOTIFY_RECV_READY:
        FUZZ_CHECK(nbytes == TCP_HDR_BYTES);
        FUZZ_CHECK(++h->rr_seen[slot] <= h->recvs_posted[slot]);
        break;
    case OP_SEND_UNBOUND:
        FUZZ_CHECK(nbytes == TCP_HDR_BYTES + len && len <= h->max_send);
        FUZZ_CHECK(++h->data_seen[slot] <= h->sends_posted[slot]);
        h->payload_left = len;
        break;
    default:
        FUZZ_CHECK(!"the plugin wrote an unknown opcode");
    }
}

static void drain(struct harness *h)
{
    unsigned char buf[4096];
    for (;;) {
        ssize_t k = recv(h->other, buf, sizeof buf, MSG_DONTWAIT);
        if (k <= 0)
            return;
        for (size_t i = 0; i < (size_t)k;) {
            if (h->payload_left) {
                size_t n = (size_t)k - i < h->payload_left ? (size_t)k - i : (size_t)h->payload_left;
                h->payload_left -= n;
                i += n;
                continue;
            }
            size_t n = TCP_HDR_BYTES - h->hdr_got;
            n = n < (size_t)k - i ? n : (size_t)k - i;
            memcpy(h->hdr + h->hdr_got, buf + i, n);
            h->hdr_got += n;
            i += n;
            if (h->hdr_got == TCP_HDR_BYTES) {
                h->hdr_got = 0;
                check_frame(h);
            }
        }
    }
}

/* ---- the script ---------------------------------------------------------- */

static void progress(struct harness *h)
{
    struct tcp_comm *c = h->c;
    if (h->threaded) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
        return;
    }
    pthread_mutex_lock(&c->mu);
    tcp__progress(c, &c->peers[1]);
    tcp__flush_all(c);
    pthread_mutex_unlock(&c->mu);
}

static size_t take_size(unsigned b)
{
    /* Small sizes byte-exact, large ones across the 4 KiB direct-read and
     * 64 KiB eager limits. */
    return b & 0x80 ? (size_t)(b & 0x7f) * 1024 : b;
}

/* What a hang looked like, for the report. */
static void dump(struct harness *h)
{
    struct tcp_comm *c = h->c;
    pthread_mutex_lock(&c->mu);
    struct tcp_peer *p = &c->peers[1];
    fprintf(stderr, "rank 1 closed its end, but rank 0 has not noticed: broken %d, closed %d, in_off %d, "
            "ev_mask %#x, tx %s, hdr_got %zu, in_payload %d (%zu of %zu), staged %zu..%zu, io thread %d\n",
            c->broken, p->closed, c->in_off, p->ev_mask, p->tx ? "queued" : "empty", p->hdr_got, p->in_payload,
            p->pay_got, p->pay_len, p->rx_pos, p->rx_len, c->io_started);
    pthread_mutex_unlock(&c->mu);
}

static int peer_settled(struct tcp_comm *c)
{
    pthread_mutex_lock(&c->mu);
    int done = c->broken || c->peers[1].closed;
    pthread_mutex_unlock(&c->mu);
    return done;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tcp__host) {
        quiet_host = fake_host;
        quiet_host.log = quiet_log;
        tcp__host = &quiet_host;
    }
    if (size < 1)
        return 0;
    struct harness *h = calloc(1, sizeof *h);
    FUZZ_CHECK(h);
    unsigned flags = data[0];
    h->threaded = !!(flags & 2);
    h->eager = flags & 1;
    h->c = comm_new(h->eager, &h->other);
    struct tcp_comm *c = h->c;
    if (h->threaded) {
        FUZZ_CHECK(pthread_create(&c->io, NULL, tcp__io_main, c) == 0);
        c->io_started = 1;
    }

    size_t i = 1;
#define TAKE() (i < size ? data[i++] : 0u)
    for (int n = 0; n < MAX_CMDS && i < size; n++) {
        unsigned cmd = TAKE() & 15;
        switch (cmd) {
        case 0: {
            size_t len = TAKE();
            len |= (size_t)TAKE() << 8;
            len = len < size - i ? len : size - i;
            if (len && send(h->other, data + i, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
                /* rank 0 dropped us, or the socket is full: the bytes are lost, as on a network */
            }
            i += len;
            if (!h->threaded)
                progress(h);
            break;
        }
        case 1:
        case 2:
        case 3: {
            unsigned slot = TAKE();
            size_t bytes = take_size(TAKE());
            post(h, cmd == 3, cmd == 2 ? -1 : 1, slot, bytes);
            break;
        }
        case 4:
            if (h->nreqs)
                release(h, &h->reqs[TAKE() % (unsigned)h->nreqs]);
            break;
        case 6:
            drain(h);
            break;
        case 7:
            pthread_mutex_lock(&c->mu);
            if (!c->aborted) {
                c->aborted = 1;
                tcp__fail_all(c, PLX_ERR_ABORTED, "tcp: rank 0: communicator aborted");
            }
            pthread_mutex_unlock(&c->mu);
            break;
        case 8:
            shutdown(h->other, SHUT_WR);
            break;
        case 9:
            /* As lead() does: the I/O thread, woken, then sleeps with a
             * timeout and turns input back on 1 ms after the last lead. */
            pthread_mutex_lock(&c->mu);
            c->last_lead_ns = tcp__host->clock_ns();
            if (!c->in_off) {
                tcp__set_input(c, 0);
                uint64_t one = 1;
                FUZZ_CHECK(write(c->evfd, &one, sizeof one) == sizeof one);
            }
            pthread_mutex_unlock(&c->mu);
            break;
        case 10:
            shutdown(h->other, SHUT_RDWR);
            break;
        default:
            progress(h);
            break;
        }
    }
#undef TAKE

    /* Rank 1 leaves: the plugin must see it within the bound. */
    drain(h);
    shutdown(h->other, SHUT_WR);
    uint64_t deadline = now_ns() + QUIET_NS;
    while (!peer_settled(c)) {
        if (now_ns() >= deadline)
            dump(h);
        FUZZ_CHECK(now_ns() < deadline); /* a hang: the EOF was never noticed */
        progress(h);
        drain(h);
    }
    drain(h);

    if (flags & 4) {
        /* Teardown first: every pending request must come out completed. */
        comm_stop(c);
        for (int k = 0; k < h->nreqs; k++)
            if (!h->reqs[k].released)
                FUZZ_CHECK(atomic_load(&h->reqs[k].r->done) && h->reqs[k].r->linked == 0);
        for (int k = 0; k < h->nreqs; k++)
            release(h, &h->reqs[k]);
    } else {
        for (int k = 0; k < h->nreqs; k++)
            release(h, &h->reqs[k]);
        comm_stop(c);
    }
    comm_free(c);
    close(h->other);
    free(h);
    return 0;
}
