/* segment.c - who is on this host, and the shared segment of one
 * communicator.
 *
 * Co-location is learned through the rendezvous: every rank publishes its
 * host identity (core/common/hostid.h: boot id, UTS host name, the inodes
 * of its network and PID namespaces, its uid) and reads everyone's. Ranks that differ in any part
 * cannot share the segment (another kernel, another abstract-socket
 * namespace, pids that mean something else), so the communicator is
 * refused with PLX_ERR_UNAVAILABLE and the reason, the same on every rank.
 *
 * Rank 0 creates the segment as a memfd (no name in any file system, so a
 * rank killed with SIGKILL leaves nothing in /dev/shm and no earlier job's
 * segment can be found by a new one), listens on an abstract Unix socket
 * with a random name it publishes in the store, checks each caller's uid
 * with SO_PEERCRED and hands the memfd over with SCM_RIGHTS. The listener
 * closes once every rank has its copy. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "hostid.h"
#include "shm.h"


_Static_assert(sizeof(struct shm_ctl) <= SHM_CTL_BYTES, "shm_ctl outgrew its block");
_Static_assert(SHM_CTL_BYTES % 64 == 0 && offsetof(struct shm_ctl, fast_data) + sizeof(((struct shm_ctl *)0)->fast_data) <= 64,
               "a rank's epoch and fast-path halves share one cache line");
_Static_assert(offsetof(struct shm_ctl, verdict) % 64 == 0 && offsetof(struct shm_ctl, hdr) % 64 == 0,
               "the verdict every rank writes and the slot headers have lines of their own");
_Static_assert(sizeof(struct shm_seg_header) <= SHM_HDR_BYTES, "segment header outgrew its page");

void shm__cfg_read(const struct plx_host *host, const struct plx_config *config, struct shm_cfg *cfg)
{
    cfg->slot_bytes = (size_t)plx_plugin_config_int(host, config, "slot_bytes", 1 << 20);
    cfg->small_bytes = (size_t)plx_plugin_config_int(host, config, "small_bytes", 16 << 10);
    cfg->steal = plx_plugin_config_bool(host, config, "steal", 0);
    int64_t spin = plx_plugin_config_int(host, config, "spin_ns", -1); /* -1: auto */
    cfg->spin_auto = spin < 0;
    cfg->spin_ns = spin < 0 ? 0 : (uint64_t)spin;
    cfg->yield_ns = (uint64_t)plx_plugin_config_int(host, config, "yield_ns", 0);
    cfg->wait_slice_ns = (uint64_t)plx_plugin_config_int(host, config, "wait_slice", 0);
    cfg->cma = plx_plugin_config_bool(host, config, "cma", 0);
    cfg->cma_min_bytes = (size_t)plx_plugin_config_int(host, config, "cma_min_bytes", 256 << 10);
    cfg->corrupt_rank = (int)plx_plugin_config_int(host, config, "corrupt_rank", -1);
    cfg->corrupt_at = (uint64_t)plx_plugin_config_int(host, config, "corrupt_at", 0);
    const char *what = plx_plugin_config_str(host, config, "corrupt");
    cfg->corrupt_addr = what && !strcmp(what, "addr");
    cfg->ring_bytes = (size_t)plx_plugin_config_int(host, config, "ring_bytes", 256 << 10);
    cfg->p2p_cma = plx_plugin_config_bool(host, config, "p2p_cma", 0);
    cfg->p2p_cma_min_bytes = (size_t)plx_plugin_config_int(host, config, "p2p_cma_min_bytes", 1 << 20);
    cfg->p2p_corrupt_rank = (int)plx_plugin_config_int(host, config, "p2p_corrupt_rank", -1);
    cfg->p2p_corrupt_at = (uint64_t)plx_plugin_config_int(host, config, "p2p_corrupt_at", 0);
}

/* The rings of P * P pairs take at most this much (address space: pages
 * are only touched by the pairs that talk); a bigger ring_bytes shrinks. */
#define SHM_RINGS_MAX_BYTES ((size_t)512 << 20)

/* Every rank's identity through the store; 0 if all equal ours. */
static int check_colocated(struct shm_comm *c, const struct plx_comm_args *args)
{
    char mine[320], key[64];
    plx_common_host_identity(mine, sizeof mine);
    snprintf(key, sizeof key, "shm/host/%d", c->rank);
    int rc = c->host->store_set(args->store, key, mine, strlen(mine) + 1);
    if (rc)
        return plx_plugin_error(c->host, rc, "shm: publishing this host's identity failed");
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank)
            continue;
        void *v = NULL;
        size_t n = 0;
        snprintf(key, sizeof key, "shm/host/%d", r);
        if ((rc = c->host->store_get(args->store, key, &v, &n, plx_plugin_create_ms(args))) != 0)
            return plx_plugin_error(c->host, rc, "shm: rank %d never published its host identity (waited %lld ms)", r,
                                    (long long)plx_plugin_create_ms(args));
        int same = n == strlen(mine) + 1 && !memcmp(v, mine, n);
        char theirs[320];
        snprintf(theirs, sizeof theirs, "%.*s", (int)(n < sizeof theirs ? n : sizeof theirs - 1), (char *)v);
        c->host->free(v);
        if (!same)
            return plx_plugin_error(c->host, PLX_ERR_UNAVAILABLE,
                                    "shm: rank %d is on another host or namespace (%s; this rank %d: %s): shm needs "
                                    "every rank of the communicator on this host",
                                    r, theirs, c->rank, mine);
    }
    return 0;
}

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

static int map_segment(struct shm_comm *c, size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd, 0);
    if (p == MAP_FAILED)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: mmap of %zu bytes failed: %s", bytes, strerror(errno));
    c->base = p;
    c->map_bytes = bytes;
    c->seg = p;
    return 0;
}

static int create_segment(struct shm_comm *c)
{
    size_t slot = round_up(c->cfg.slot_bytes < 4096 ? 4096 : c->cfg.slot_bytes, 4096);
    size_t ctl_off = SHM_HDR_BYTES, slot_off = round_up(ctl_off + (size_t)c->size * SHM_CTL_BYTES, 4096);
    size_t P = (size_t)c->size, pairs = P * P;
    size_t ring = round_up(c->cfg.ring_bytes < 4096 ? 4096 : c->cfg.ring_bytes, 4096);
    if (ring > SHM_RINGS_MAX_BYTES / pairs)
        ring = SHM_RINGS_MAX_BYTES / pairs / 4096 * 4096 < 4096 ? 4096 : SHM_RINGS_MAX_BYTES / pairs / 4096 * 4096;
    size_t p2p_off = slot_off + P * 2 * slot;
    size_t ring_off = round_up(p2p_off + P * SHM_P2P_CTL_BYTES + pairs * SHM_RING_HDR_BYTES, 4096);
    size_t total = ring_off + pairs * ring;
    c->memfd = memfd_create("plexus-shm", MFD_CLOEXEC);
    if (c->memfd < 0)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: memfd_create failed: %s", strerror(errno));
    fchmod(c->memfd, 0600);
    if (ftruncate(c->memfd, (off_t)total) != 0)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: sizing the segment to %zu bytes failed: %s", total,
                                strerror(errno));
    int rc = map_segment(c, total);
    if (rc)
        return rc;
    struct shm_seg_header *h = c->seg;
    h->magic = SHM_MAGIC;
    h->nranks = (uint32_t)c->size;
    h->slot_bytes = slot;
    h->small_bytes = c->cfg.small_bytes;
    h->steal = c->cfg.steal ? 1 : 0;
    h->ctl_off = ctl_off;
    h->slot_off = slot_off;
    h->total_bytes = total;
    h->ring_bytes = ring;
    h->p2p_off = p2p_off;
    h->ring_off = ring_off;
    for (int r = 0; r < c->size; r++)
        shm__ctl(c, r)->why_rank = -1;
    __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
    return 0;
}

/* The header came from another process: check it describes a layout that
 * fits the segment before anything is read through it. */
static int validate_segment(struct shm_comm *c, size_t real)
{
    const struct shm_seg_header *h = c->seg;
    size_t P = (size_t)c->size;
    if (h->magic != SHM_MAGIC || !__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE))
        return plx_plugin_error(c->host, PLX_ERR_PROTOCOL, "shm: the segment from rank 0 has a bad magic or is not ready");
    if (h->nranks != P || h->slot_bytes < 4096 || h->slot_bytes % 64 || h->slot_bytes > (SIZE_MAX / 4) / P ||
        h->ctl_off < SHM_HDR_BYTES || h->ctl_off % 64 || h->ctl_off > real ||
        P * SHM_CTL_BYTES > real - h->ctl_off || h->slot_off % 64 || h->slot_off < h->ctl_off + P * SHM_CTL_BYTES ||
        h->slot_off > real || 2 * P * h->slot_bytes > real - h->slot_off || h->total_bytes != real ||
        h->ring_bytes < 4096 || h->ring_bytes % 4096 || h->ring_bytes > SHM_RINGS_MAX_BYTES / (P * P) ||
        h->p2p_off % 64 || h->p2p_off < h->slot_off + 2 * P * h->slot_bytes || h->p2p_off > real ||
        h->ring_off % 64 || h->ring_off < h->p2p_off || h->ring_off > real ||
        P * (SHM_P2P_CTL_BYTES + P * SHM_RING_HDR_BYTES) > h->ring_off - h->p2p_off ||
        P * P * h->ring_bytes > real - h->ring_off)
        return plx_plugin_error(c->host, PLX_ERR_PROTOCOL,
                                "shm: the segment header from rank 0 describes a layout (%u ranks, slots of %llu bytes, "
                                "%llu bytes in all) that does not fit %zu ranks in its %zu bytes",
                                h->nranks, (unsigned long long)h->slot_bytes, (unsigned long long)h->total_bytes, P, real);
    return 0;
}

static int wait_fd(int fd, short ev, uint64_t deadline)
{
    for (;;) {
        uint64_t now = shm__mono_ns();
        if (now >= deadline)
            return PLX_ERR_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = ev};
        int64_t ms = (int64_t)((deadline - now) / 1000000) + 1;
        int n = poll(&p, 1, ms > 1000 ? 1000 : (int)ms);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return PLX_ERR_SYSTEM;
    }
}

static int send_fd(int sock, int fd)
{
    char byte = 'S', cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    return sendmsg(sock, &m, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
    char byte, cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1 || byte != 'S')
        return -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int)))
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    return fd;
}

static socklen_t abstract_addr(struct sockaddr_un *a, const char *name)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(a->sun_path + 1, name, n); /* sun_path[0] = 0: the abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Rank 0: listen, publish the name, hand the memfd to every other rank. */
static int serve(struct shm_comm *c, const struct plx_comm_args *args, uint64_t deadline)
{
    unsigned char rnd[12];
    if (getentropy(rnd, sizeof rnd) != 0)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: getentropy failed: %s", strerror(errno));
    char name[64];
    int at = snprintf(name, sizeof name, "plexus-shm-%d-", (int)getpid());
    for (size_t i = 0; i < sizeof rnd; i++)
        at += snprintf(name + at, sizeof name - (size_t)at, "%02x", rnd[i]);
    int ls = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ls < 0)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: socket failed: %s", strerror(errno));
    struct sockaddr_un sa;
    socklen_t sl = abstract_addr(&sa, name);
    int rc = 0;
    if (bind(ls, (struct sockaddr *)&sa, sl) != 0 || listen(ls, c->size) != 0) {
        rc = plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: listening on @%s failed: %s", name, strerror(errno));
        goto out;
    }
    if ((rc = c->host->store_set(args->store, "shm/sock", name, strlen(name) + 1)) != 0) {
        rc = plx_plugin_error(c->host, rc, "shm: publishing the segment's socket failed");
        goto out;
    }
    for (int served = 1; served < c->size;) {
        if (wait_fd(ls, POLLIN, deadline) != 0) {
            rc = plx_plugin_error(c->host, PLX_ERR_TIMEOUT, "shm: rank 0 waited %lld ms for %d rank(s) to fetch the segment",
                                  (long long)plx_plugin_create_ms(args), c->size - served);
            goto out;
        }
        int s = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (s < 0)
            continue;
        struct ucred cr;
        socklen_t cl = sizeof cr;
        int32_t who = -1;
        if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.uid != getuid()) {
            c->host->log(c->host->ctx, PLX_LOG_WARN, "shm: refused a caller on @%s: not uid %u", name,
                      (unsigned)getuid());
            close(s);
            continue;
        }
        if (wait_fd(s, POLLIN, deadline) != 0 || recv(s, &who, sizeof who, 0) != sizeof who || who <= 0 ||
            who >= c->size || send_fd(s, c->memfd) != 0) {
            c->host->log(c->host->ctx, PLX_LOG_WARN, "shm: a caller on @%s (pid %d) broke off", name, (int)cr.pid);
            close(s);
            continue;
        }
        close(s);
        served++;
    }
out:
    close(ls);
    return rc;
}

static int fetch(struct shm_comm *c, const struct plx_comm_args *args, uint64_t deadline)
{
    void *v = NULL;
    size_t n = 0;
    int rc = c->host->store_get(args->store, "shm/sock", &v, &n, plx_plugin_create_ms(args));
    if (rc)
        return plx_plugin_error(c->host, rc, "shm: rank 0 never published the segment (waited %lld ms)",
                                (long long)plx_plugin_create_ms(args));
    char name[108];
    snprintf(name, sizeof name, "%.*s", (int)(n < 100 ? n : 100), (char *)v);
    c->host->free(v);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: socket failed: %s", strerror(errno));
    struct sockaddr_un sa;
    socklen_t sl = abstract_addr(&sa, name);
    int32_t me = c->rank;
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (connect(s, (struct sockaddr *)&sa, sl) != 0) {
        rc = plx_plugin_error(c->host, PLX_ERR_SYSTEM, "shm: connecting to rank 0's @%s failed: %s", name, strerror(errno));
    } else if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.uid != getuid()) {
        rc = plx_plugin_error(c->host, PLX_ERR_AUTH, "shm: @%s is not served by uid %u", name, (unsigned)getuid());
    } else if (send(s, &me, sizeof me, MSG_NOSIGNAL) != sizeof me || wait_fd(s, POLLIN, deadline) != 0 ||
               (c->memfd = recv_fd(s)) < 0) {
        rc = plx_plugin_error(c->host, PLX_ERR_PEER_LOST, "shm: rank 0 did not hand over the segment on @%s", name);
    }
    close(s);
    if (rc)
        return rc;
    struct stat st;
    if (fstat(c->memfd, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 077) ||
        st.st_size < SHM_HDR_BYTES)
        return plx_plugin_error(c->host, PLX_ERR_PROTOCOL, "shm: the segment from rank 0 is not a private memfd of this uid");
    if ((rc = map_segment(c, (size_t)st.st_size)) != 0)
        return rc;
    return validate_segment(c, (size_t)st.st_size);
}

int shm__segment_join(struct shm_comm *c, const struct plx_comm_args *args)
{
    uint64_t deadline = plx_plugin_deadline(plx_plugin_create_ms(args));
    c->memfd = -1;
    int rc = check_colocated(c, args);
    if (rc)
        return rc;
    rc = c->rank == 0 ? create_segment(c) : 0;
    if (rc == 0 && c->size > 1)
        rc = c->rank == 0 ? serve(c, args, deadline) : fetch(c, args, deadline);
    if (rc)
        return rc;
    struct shm_ctl *me = shm__ctl(c, c->rank);
    __atomic_store_n(&me->pid, (int32_t)getpid(), __ATOMIC_RELEASE);
    return 0;
}

void shm__segment_leave(struct shm_comm *c)
{
    if (c->base)
        munmap(c->base, c->map_bytes);
    if (c->memfd >= 0)
        close(c->memfd);
    c->base = NULL;
    c->memfd = -1;
}
