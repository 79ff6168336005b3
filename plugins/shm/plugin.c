/* plugin.c - the shm backend's entry point and operations table. Ranks of
 * one host share a memory segment per communicator (segment.c), meet at
 * futex barriers (sync.c), run every collective natively through it
 * (coll.c) and send point-to-point through per-pair rings in it (p2p.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostid.h"
#include "p2p.h"
#include "slice.h"

/* The plugin's only state outside its communicators (shm.h), written
 * before the core calls anything but the entry point, read-only after:
 *
 * the entry point's services, which the SDK's entry macro keeps and
 * nothing reads: shm reaches the core through each communicator's own
 * instance (ABI 1.5, the minimum it takes); */
static const struct plx_host *entry_host;

/* the cma keys' help, which says whether single copy is possible here
 * (probed when the plugin loads), so plexus-info shows it with the reason; */
static char cma_help[320];
static char p2p_cma_help[400];
static char wait_slice_help[500];

/* and the description, which names this host's identity: the core keeps
 * no reason for a usable backend, and plexus-info prints the description. */
static char description[400];

/* Every key shm reads, typed: the core checks values where they are set,
 * and shm reads them through the communicator's view (segment.c). */
static const struct plx_key keys[] = {
    {"slot_bytes", PLX_KEY_SIZE, "1M", NULL,
     "Bytes of one half of a rank's slot: the size of one round of a large collective (each round ends in "
     "barriers, and each barrier waits for a peer to be scheduled: fewer rounds hold up when other work "
     "shares the cores)"},
    {"small_bytes", PLX_KEY_SIZE, "16K", NULL,
     "allreduce/reduce up to this size run in one phase (every rank reduces all)"},
    {"steal", PLX_KEY_BOOL, "false", NULL,
     "Larger allreduce rounds: a running rank also reduces the pieces of slices whose owner has not taken them "
     "yet, so a round waits for each rank once (its input) instead of twice (rank 0's value holds for the "
     "communicator; off by default: each rank's own slice is copied into the segment and stolen pieces out again, "
     "and a rank preempted while it holds a piece holds every rank's wait for that slice; bench/tuning.md)"},
    {"spin_ns", PLX_KEY_DURATION, "auto", "auto",
     "A waiting rank spins this long (bare numbers: ns) after its first few looks, ... (auto: only while no other "
     "rank of the communicator shares its CPU, up to twice the thread's scheduler slice, halved whenever a wait "
     "outlasts twice that, doubled again after 8 waits a full spin would have caught)"},
    {"yield_ns", PLX_KEY_DURATION, "0", NULL,
     "... then yields its core between looks this long (bare numbers: ns), then sleeps on the futex"},
    {"wait_slice", PLX_KEY_DURATION, SHM_WAIT_SLICE_DEFAULT, NULL, wait_slice_help},
    {"cma", PLX_KEY_BOOL, "false", NULL, cma_help},
    {"cma_min_bytes", PLX_KEY_SIZE, "256K", NULL,
     "allreduce, reduce_scatter, allgather, broadcast at least this big go single-copy"},
    {"corrupt_rank", PLX_KEY_INT, "-1", NULL, "Fault injection: this rank writes a corrupt slot header ..."},
    {"corrupt_at", PLX_KEY_UINT, "0", NULL, "... in the collective with this sequence number ..."},
    {"corrupt", PLX_KEY_ENUM, "header", "header|addr", "... header: its fields; addr: only its buffer addresses"},
    {"ring_bytes", PLX_KEY_SIZE, "256K", NULL,
     "Point-to-point: bytes of the ring from one rank to another (rounded to pages; shrunk so that the rings of a "
     "communicator take at most 512 MiB of address space)"},
    {"p2p_cma", PLX_KEY_BOOL, "false", NULL, p2p_cma_help},
    {"p2p_cma_min_bytes", PLX_KEY_SIZE, "1M", NULL,
     "Point-to-point messages at least this big go single-copy (when p2p_cma is on and every rank can)"},
    {"p2p_corrupt_rank", PLX_KEY_INT, "-1", NULL, "Fault injection: this rank writes a corrupt point-to-point frame ..."},
    {"p2p_corrupt_at", PLX_KEY_UINT, "0", NULL, "... as the header of its message number p2p_corrupt_at (from 1)"},
    {NULL, 0, NULL, NULL, NULL},
};

/* The description and the cma key's help are filled when the plugin is
 * loaded (dlopen), before the core reads either: the entry point is the
 * SDK's macro. */
__attribute__((constructor)) static void describe(void)
{
    char why[128];
    shm__cma_possible(why, sizeof why);
    char id[200];
    plx_common_host_identity(id, sizeof id);
    snprintf(description, sizeof description,
             "shared memory between the ranks of one host (memfd segment, futex waits); ranks share a "
             "communicator when their identity matches this host's: %.200s", id);
    snprintf(cma_help, sizeof cma_help,
             "Single-copy large collectives with process_vm_readv (off by default: it pins the peers' pages on "
             "every call, which can cost more than the second copy it saves); here: %s", why);
    char slice_why[160];
    plx__slice_probe(SHM_WAIT_SLICE_PROBE_NS, slice_why, sizeof slice_why);
    snprintf(wait_slice_help, sizeof wait_slice_help,
             "A rank about to sleep in a wait asks the scheduler for this time slice until its operation ends, so "
             "its wake-up preempts foreign work on its core (custom slices for fair tasks: EEVDF, Linux 6.12 and "
             "later; 0 leaves the slice alone); here: %s", slice_why);
    snprintf(p2p_cma_help, sizeof p2p_cma_help,
             "Single-copy large point-to-point messages: the receiver reads the sender's buffer with process_vm_readv "
             "(else two copies through the pair's ring; off by default: it pins the sender's pages on every call, "
             "which can cost more than the second copy it saves); here: %s", why);
}

static int probe(struct plx_probe_result *out)
{
    char id[160];
    plx_common_host_identity(id, sizeof id);
    out->state = PLX_PROBE_USABLE;
    snprintf(out->reason, sizeof out->reason, "every rank of a communicator must share %.160s", id);
    return 0;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    uint32_t size = out->struct_size;
    struct plx_caps caps = {.struct_size = size,
                            .flags = PLX_CAP_ASYNC | PLX_CAP_ABORT | PLX_CAP_INPLACE | PLX_CAP_P2P |
                                     PLX_CAP_ANY_SOURCE | PLX_CAP_THREAD_SAFE | PLX_CAP_SHRINK,
                            .collectives = PLX_BIT(PLX_COLL_SEND) - 1,
                            .dtypes = PLX_BIT(PLX_DTYPE_COUNT) - 1,
                            .redops = PLX_BIT(PLX_REDOP_COUNT) - 1,
                            .mem_kinds = PLX_BIT(PLX_MEM_HOST)};
    memcpy(out, &caps, size < sizeof caps ? size : sizeof caps);
    out->struct_size = size;
    return 0;
}

static void comm_free(struct shm_comm *c)
{
    if (c->pidfd)
        for (int r = 0; r < c->size; r++)
            if (c->pidfd[r] >= 0)
                close(c->pidfd[r]);
    free(c->pidfd);
    free(c->piece);
    shm__async_destroy(c);
    shm__sym_destroy(c);
    shm__p2p_destroy(c);
    shm__segment_leave(c);
    free(c);
}

/* After the first barrier every rank's pid is in the segment: watch them. */
static void watch_peers(struct shm_comm *c)
{
    for (int r = 0; r < c->size; r++) {
        int32_t pid = __atomic_load_n(&shm__ctl(c, r)->pid, __ATOMIC_ACQUIRE);
        int fd = -1;
#ifdef SYS_pidfd_open
        if (r != c->rank && pid > 0)
            fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#endif
        c->pidfd[r] = fd < 0 ? -1 : fd;
    }
}

static int comm_create(const struct plx_comm_args *args, void **out)
{
    const struct plx_host *host = args->host;
    struct shm_comm *c = calloc(1, sizeof *c);
    if (!c)
        return plx_plugin_error(host, PLX_ERR_NOMEM, "shm: out of memory");
    if (!args->store) {
        free(c);
        return plx_plugin_error(host, PLX_ERR_UNAVAILABLE, "shm: no rendezvous store to meet through (a launcher's own "
                                "bootstrap, without tcp:// or file://)");
    }
    if (args->size < 1 || args->size > SHM_MAX_RANKS) {
        free(c);
        return plx_plugin_error(host, PLX_ERR_UNSUPPORTED, "shm: %d ranks; this backend takes 1 to %d", args->size,
                                SHM_MAX_RANKS);
    }
    c->host = host;
    c->rank = args->rank;
    c->size = args->size;
    c->timeout_ms = args->timeout_ms;
    c->store = args->store;
    c->lost_rank = -1;
    c->memfd = -1;
    snprintf(c->name, sizeof c->name, "%s", args->name ? args->name : "?");
    shm__cfg_read(host, args->config, &c->cfg);
    /* The ranks that share this machine's cores: the job's where the core
     * knows them (ABI 1.14), else this communicator's. */
    int sharing = PLX_HAS_FIELD(args, struct plx_comm_args, machine_ranks) && args->machine_ranks > args->size
                      ? args->machine_ranks : args->size;
    shm__pace_init(c, sharing);
    if (!(c->pidfd = malloc((size_t)c->size * sizeof *c->pidfd))) {
        free(c);
        return plx_plugin_error(host, PLX_ERR_NOMEM, "shm: out of memory");
    }
    for (int r = 0; r < c->size; r++)
        c->pidfd[r] = -1;
    int rc = shm__async_create(c);
    if (rc) {
        comm_free(c);
        return rc;
    }
    rc = shm__segment_join(c, args);
    if (rc == 0) {
        struct plx_coll_args join = {.struct_size = sizeof join, .coll = PLX_COLL_BARRIER,
                                     .timeout_ms = plx_plugin_create_ms(args)};
        struct shm_op o = {.c = c, .a = &join, .what = "comm_create", .es = 1,
                           .deadline = plx_plugin_deadline(plx_plugin_create_ms(args)),
                           .timeout_ms = plx_plugin_create_ms(args)};
        __atomic_store_n(&shm__ctl(c, c->rank)->cma_addr, (uint64_t)(uintptr_t)&c->cma_word, __ATOMIC_RELEASE);
        c->cma_word = UINT64_C(0x636d612d70726f62) ^ (uint64_t)(uint32_t)getpid();
        rc = shm__barrier(&o);
        if (rc == 0)
            rc = shm__cma_agree(&o);
        if (rc == 0)
            rc = shm__p2p_create(c, &o);
        /* the join waits for processes to start: not what the spin is for */
        shm__pace_init(c, sharing);
    }
    if (rc) {
        comm_free(c);
        return rc;
    }
    watch_peers(c);
    if (sharing > c->size)
        host->log(host->ctx, PLX_LOG_INFO, "shm: rank %d: %d ranks of the job share this machine's %d cores (%d on "
                  "this host): %s", c->rank, sharing, c->pace.cores, c->size,
                  c->pace.crowded ? "waits sleep after their looks" : "waits may spin");
    *out = c;
    return 0;
}

static int comm_destroy(void *comm)
{
    struct shm_comm *c = comm;
    if (!c)
        return 0;
    /* A revoke stays in the segment: a peer still waiting must read
     * "revoked", not "left". */
    if (c->base && !c->failed && !__atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&shm__ctl(c, c->rank)->state, SHM_STATE_LEFT, __ATOMIC_SEQ_CST);
        shm__wake_all(c);
    }
    comm_free(c);
    return 0;
}

static int comm_abort(void *comm)
{
    struct shm_comm *c = comm;
    __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    if (c->base) /* the peers stop waiting for this rank, naming the abort */
        shm__mark_failed(c, PLX_ERR_ABORTED, -1);
    shm__wake_all(c); /* the sleeper in this process wakes and sees the flag */
    if (c->base && c->p2p)
        shm__bell_ring(c, c->rank); /* and a point-to-point waiter */
    return 0;
}

/* Peers see this rank FAILED with REVOKED (naming it) in their next slow
 * check, pass it on by failing the same way, and stop. */
static int comm_revoke(void *comm)
{
    struct shm_comm *c = comm;
    __atomic_store_n(&c->revoked, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    if (c->base)
        shm__mark_failed(c, PLX_ERR_REVOKED, c->rank);
    shm__wake_all(c);
    if (c->base && c->p2p)
        shm__bell_ring(c, c->rank);
    return 0;
}

static int collective(void *comm, const struct plx_coll_args *a, void **req)
{
    return shm__coll_start(comm, a, req);
}

/* Prepared collectives (ABI 1.12): collective() with nothing queued is
 * already the whole run, so what preparing saves is the core's part of each
 * call; prep is the arguments, kept. */
static int coll_prepare(void *comm, const struct plx_coll_args *a, void **prep)
{
    struct plx_coll_args *p = malloc(sizeof *p);
    if (!p)
        return plx_plugin_error(((struct shm_comm *)comm)->host, PLX_ERR_NOMEM, "shm: out of memory");
    *p = *a;
    *prep = p;
    return 0;
}

static int coll_run(void *comm, void *prep, uint64_t seq)
{
    struct shm_comm *c = comm;
    struct plx_coll_args *a = prep; /* one run at a time: its seq is this run's */
    a->seq = seq;
    void *req = NULL;
    int rc = shm__coll_start(c, a, &req);
    if (rc || req == comm)
        return rc;
    /* Queued behind nonblocking ones: the collective keeps its own
     * timeout; this deadline is the backstop the core's wait would be. */
    uint64_t deadline = plx_plugin_deadline(plx_coll_backstop_ms(a->timeout_ms >= 0 ? a->timeout_ms : c->timeout_ms));
    struct shm_creq *r = shm__creq_of(req);
    rc = shm__creq_wait_until(c, r, deadline);
    shm__creq_free(c, r);
    return rc;
}

static void coll_unprepare(void *comm, void *prep)
{
    (void)comm;
    free(prep);
}

static int isend(void *comm, const struct plx_p2p_args *a, void **req)
{
    return shm__p2p_isend(comm, a, req);
}

static int irecv(void *comm, const struct plx_p2p_args *a, void **req)
{
    return shm__p2p_irecv(comm, a, req);
}

/* A collective's request is the communicator itself when it completed in
 * collective(), a queued one (async.c), or a point-to-point request in the
 * core's memory (p2p.c). */
static int test(void *comm, void *req, int *done)
{
    if (req == comm) {
        *done = 1;
        return 0;
    }
    struct shm_creq *r = shm__creq_of(req);
    return r ? shm__creq_test(comm, r, done) : shm__p2p_test(comm, req, done);
}

static int wait_until(void *comm, void *req, uint64_t deadline_ns)
{
    if (req == comm)
        return 0;
    struct shm_creq *r = shm__creq_of(req);
    return r ? shm__creq_wait_until(comm, r, deadline_ns) : shm__p2p_wait_until(comm, req, deadline_ns);
}

static void req_free(void *comm, void *req)
{
    if (req == comm)
        return;
    struct shm_creq *r = shm__creq_of(req);
    if (r)
        shm__creq_free(comm, r);
    else
        shm__p2p_req_free(comm, req);
}

static int comm_losses(void *comm, char *msg, size_t len)
{
    struct shm_comm *c = comm;
    if (len)
        msg[0] = '\0';
    if (c->lost_rank < 0)
        return 0;
    snprintf(msg, len, "%s", c->lost_msg);
    return 1;
}

static int mem_alloc(void *comm, size_t bytes, void **ptr)
{
    return shm__sym_alloc(comm, bytes, ptr);
}

static int mem_free(void *comm, void *ptr)
{
    return shm__sym_free(comm, ptr);
}

static const struct plx_backend shm_backend = { /* description filled at entry */
    .struct_size = sizeof(struct plx_backend),
    .abi_minor = PLX_ABI_MINOR,
    .name = "shm",
    .version = "0.1.0",
    .description = description,
    .keys = keys,
    .probe = probe,
    .get_caps = get_caps,
    .comm_create = comm_create,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .isend = isend,
    .irecv = irecv,
    .collective = collective,
    .test = test,
    .req_free = req_free,
    .comm_losses = comm_losses,
    .wait_until = wait_until,
    .req_size = SHM_P2P_REQ_BYTES,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .comm_revoke = comm_revoke,
    .comm_lost_ranks = shm__lost_ranks,
    .coll_prepare = coll_prepare,
    .coll_run = coll_run,
    .coll_unprepare = coll_unprepare,
};

/* ABI 1.5 at least: shm reads its keys typed, through the communicator's
 * view (1.3), and reaches the core through the communicator's own host
 * (1.5). */
PLX_PLUGIN_ENTRY(shm_backend, entry_host, 5)
