/* plugin.c - the sim backend's entry point, operations table, probe and
 * capabilities. How to run it: every rank is a thread of one process that
 * calls plx_comm_init with backend "sim", init "mem://NAME", its rank and the
 * size; the ranks find each other through that in-process store. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

/* Every key sim reads, typed: the core checks values where they are set. */
static const struct plx_key keys[] = {
    {"native_collectives", PLX_KEY_BOOL, "true", NULL,
     "Run collectives in the plugin (shared memory); false: point-to-point only, so the core's generic "
     "algorithms run"},
    {"fail_op", PLX_KEY_ENUM, NULL,
     "allreduce|broadcast|reduce|allgather|reduce_scatter|gather|scatter|alltoall|barrier|send|recv|any",
     "Fault injection: a collective name, send, recv or any"},
    {"fail_after", PLX_KEY_UINT, "0", NULL, "Fault injection: the Nth matching operation fails (0: never)"},
    {"fail_rank", PLX_KEY_INT, "-1", NULL, "Fault injection: the rank that fails (-1: every rank)"},
    {"delay_rank", PLX_KEY_INT, "-1", NULL, "Delay this rank before each operation (-1: none)"},
    {"delay_ms", PLX_KEY_DURATION, "0", NULL, "The delay (bare numbers: milliseconds)"},
    {"absent_rank", PLX_KEY_INT, "-1", NULL, "This rank never joins (its comm_create fails), so the others time out"},
    {"model", PLX_KEY_BOOL, "false", NULL,
     "Network model: messages take virtual time (alpha + beta * bytes per link), never slept; the core's "
     "generic algorithms run (native collectives off)"},
    {"model_ranks_per_host", PLX_KEY_UINT, "0", NULL, "Model: consecutive ranks per host (0: one host)"},
    {"model_cores_per_host", PLX_KEY_UINT, "0", NULL,
     "Model: CPU cores of a host (0: unlimited). With more ranks on a host, they share its cores fairly: "
     "what they do on them (messages within the host, reductions) takes ranks/cores times as long"},
    {"model_machine_cores", PLX_KEY_UINT, "0", NULL,
     "Model: the cores of the one machine every host runs on (hosts emulated in network namespaces; 0: "
     "each host is a machine). All ranks share them, and a message across hosts costs them its bytes as "
     "one within a host does, besides its time on the NIC"},
    {"model_yielding_waits", PLX_KEY_BOOL, "false", NULL,
     "Model, with model_cores_per_host: a waiting rank gives its core to the others (tcp yields between "
     "looks when oversubscribed) instead of spinning on its share (shm spins first), so a message's latency "
     "is not time-shared; its copy and reductions still are"},
    {"model_wake_latency", PLX_KEY_DURATION, "0", NULL,
     "Model, with model_cores_per_host: on a host with more ranks than cores, a message within it finds its "
     "receiver off the cores (it waited for a peer that was not running, so it slept or was descheduled) "
     "for the share of the time the cores cannot hold it, (ranks - cores) / ranks, and then reaches it this "
     "much later: the wake-up and the switch to it; each message pays it times that share, and a native "
     "collective's barrier (model_intra_native) one per round of switching the ranks off the cores back in"},
    {"model_wake_cpu", PLX_KEY_DURATION, "0", NULL,
     "Model, with model_cores_per_host or model_machine_cores: the core time the wake-up of "
     "model_wake_latency takes (the kernel's wake-up, the switches to the receiver and back), which the "
     "host's ranks share like the rest of their work: each message pays it times (ranks - cores) / cores, "
     "so it grows with the ranks a core holds where model_wake_latency does not"},
    {"model_intra_latency", PLX_KEY_DURATION, "0", NULL, "Model: per-message latency within a host (alpha)"},
    {"model_intra_bandwidth", PLX_KEY_SIZE, "0", NULL,
     "Model: bytes per second of a link within a host (1/beta; 0: infinite)"},
    {"model_intra_cache", PLX_KEY_SIZE, "0", NULL,
     "Model, with model_intra_memory_bandwidth: the bytes of a message within a host that its copies "
     "(sender to kernel or segment, then to the receiver) keep in the CPU's cache"},
    {"model_intra_memory_bandwidth", PLX_KEY_SIZE, "0", NULL,
     "Model: a message within a host larger than model_intra_cache streams its bytes beyond it through "
     "memory instead of the cache; each such byte costs 1/this more than model_intra_bandwidth's "
     "(0: nothing more)"},
    {"model_host_cache", PLX_KEY_SIZE, "0", NULL,
     "Model, with model_host_memory_bandwidth: the cache a host's ranks share for the buffers of the "
     "operation they run together (the core's generic algorithms tell each rank's; a native collective "
     "(model_intra_native) adds the slots in use); the share of a larger set beyond it comes from memory"},
    {"model_host_memory_bandwidth", PLX_KEY_SIZE, "0", NULL,
     "Model: each byte copied within a host costs 1/this more than model_intra_bandwidth's times the share "
     "of the operation's buffers on the host beyond model_host_cache (0: nothing more)"},
    {"model_intra_head", PLX_KEY_SIZE, "0", NULL,
     "Model, with model_intra_head_bandwidth: the first bytes of every copy within a host (a message's, or "
     "each piece a native collective copies), which run at the latency of their cache lines rather than "
     "their bandwidth: lines the other core just wrote, before the prefetchers run ahead (shm), or the "
     "first socket-buffer chunk, copied in before the receiver can start copying out (loopback tcp)"},
    {"model_intra_head_bandwidth", PLX_KEY_SIZE, "0", NULL,
     "Model: each byte of a copy's head (model_intra_head) costs 1/this more than model_intra_bandwidth's "
     "(0: nothing more)"},
    {"model_intra_private_cache", PLX_KEY_SIZE, "0", NULL,
     "Model, with model_intra_private_bandwidth: the cache each core has to itself (L2). Bytes one core "
     "wrote and another reads come from the writer's cache while the working set fits it (each core's "
     "share of a native collective's set; a message's own bytes), beyond it in that proportion; the rest "
     "were evicted to the cache the cores share"},
    {"model_intra_private_bandwidth", PLX_KEY_SIZE, "0", NULL,
     "Model: each byte read from another core's own cache (model_intra_private_cache) costs 1/this more "
     "than model_intra_bandwidth's (0: nothing more)"},
    {"model_intra_ack", PLX_KEY_DURATION, "0", NULL,
     "Model: the CPU time a message within a host costs its receiver where the receiver, sending to another "
     "rank in the same step, does not answer it (a ring): loopback tcp's acknowledgement then goes as a "
     "segment of its own instead of riding on the reply, on a busy rank (one that only waits, as in a fold "
     "or a tree, has it done meanwhile); shared on a time-shared host; 0: none"},
    {"model_intra_serial_copies", PLX_KEY_BOOL, "false", NULL,
     "Model: within a host a rank's core makes both its sends' and its receives' copies, one after the "
     "other (loopback tcp: each end copies through the kernel), so a rank that sends and receives at once "
     "takes both copies' time; false: a rank's way in and way out are separate links"},
    {"model_eager_limit", PLX_KEY_SIZE, "0", NULL,
     "Model: a message larger than this leaves only once the receiver's notice that it posted the receive "
     "has reached the sender (tcp's rendezvous above its eager limit of 64 KiB; MPI's above its eager "
     "limit); 0: every message leaves when sent"},
    {"model_rendezvous_overhead", PLX_KEY_DURATION, "0", NULL,
     "Model: the CPU time a message above model_eager_limit costs its sender beyond its bytes and the "
     "latency: handling its receiver's ready notice, a small message of its own, before the payload goes "
     "(tcp's rendezvous); a pipeline's next segment cannot overlap it as it does the latency; shared on a "
     "time-shared host; 0: none"},
    {"model_inter_latency", PLX_KEY_DURATION, "0", NULL, "Model: per-message latency across hosts (alpha)"},
    {"model_inter_bandwidth", PLX_KEY_SIZE, "0", NULL,
     "Model: bytes per second of a host's NIC, shared by its ranks (0: infinite)"},
    {"model_inter_burst", PLX_KEY_SIZE, "0", NULL,
     "Model: a host's NIC is a token bucket of this many bytes, in and out, refilled at model_inter_bandwidth "
     "(Linux's tbf burst): a message passes as fast as its tokens last, then at the rate; 0: every byte at the "
     "rate"},
    {"model_injection_bandwidth", PLX_KEY_SIZE, "0", NULL,
     "Model: bytes per second one rank injects, shared by its concurrent messages (0: no limit)"},
    {"model_reduce_bandwidth", PLX_KEY_SIZE, "0", NULL,
     "Model: bytes per second one rank reduces in the core's generic algorithms (1/gamma, charged to the "
     "rank's clock per reduction; 0: reductions take no time)"},
    {"model_intra_native", PLX_KEY_ENUM, "none", "none|shm",
     "Model, where every rank is on one host: none: every collective runs the core's generic algorithms "
     "over the modelled messages; shm: allreduce and allgather run as plexus's shm transport runs them "
     "natively, through its slots (1 MiB rounds; a barrier per round, two for an allreduce over 16 KiB; "
     "every byte copied in and out), priced from that schedule with the same latency (per barrier), "
     "bandwidth (per byte copied), reduction cost, wake-up and memory keys"},
    {"model_payload", PLX_KEY_BOOL, "true", NULL,
     "Model: messages carry their bytes (false: timing only, sizes and virtual times and only the first "
     "128 bytes of each message, and the core skips the reductions and copies of collectives over 64 "
     "bytes per rank, for thousands of ranks; their results are then meaningless)"},
    {"model_trace", PLX_KEY_STRING, "", NULL,
     "Model: write every message (sender, receiver, bytes, when it left and arrived in virtual time) to this "
     "file as Chrome trace JSON, for chrome://tracing or Perfetto; one file per process"},
    {"abi_minor", PLX_KEY_UINT, NULL, NULL,
     "Tests: present the operations table of this older plugin ABI minor (0-10); read at load, from "
     "PLEXUS_SIM_ABI_MINOR only"},
    {NULL, 0, NULL, NULL, NULL},
};


int sim_error(const struct impl *c, int status, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return c->host->error(c->host->ctx, status, "%s", msg);
}

const char *sim_last_error(const struct impl *c)
{
    return plx_plugin_last_error(c->host);
}

size_t sim_dtype_size(int dtype)
{
    static const size_t sizes[PLX_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
    return dtype >= 0 && dtype < PLX_DTYPE_COUNT ? sizes[dtype] : 0;
}

const char *sim_coll_name(int coll)
{
    static const char *const names[PLX_COLL_COUNT] = {
#define COLL_NAME(kind, val, name, op, root, v) [val] = name,
        PLX_COLL_MAP(COLL_NAME)
#undef COLL_NAME
    };
    return coll >= 0 && coll < PLX_COLL_COUNT ? names[coll] : "?";
}

static int probe(struct plx_probe_result *out)
{
    out->state = PLX_PROBE_USABLE;
    strcpy(out->reason, "in-process simulation");
    return 0;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    const struct impl *c = comm;
    struct plx_caps caps = {
        .struct_size = sizeof caps,
        .flags = PLX_CAP_ASYNC | PLX_CAP_ABORT | PLX_CAP_THREAD_SAFE | PLX_CAP_INPLACE | PLX_CAP_ANY_SOURCE |
                 PLX_CAP_IN_PROCESS | PLX_CAP_P2P | PLX_CAP_P2P_HEAD,
        .collectives = (PLX_BIT(PLX_COLL_SEND) - 1),
        .dtypes = PLX_BIT(PLX_DTYPE_COUNT) - 1,
        .redops = PLX_BIT(PLX_REDOP_COUNT) - 1,
        .mem_kinds = PLX_BIT(PLX_MEM_HOST),
    };
    if (c && !c->cfg.native)
        caps.collectives = 0;
    if (c && c->model->on)
        caps.collectives = (sim_model_native(c, PLX_COLL_ALLREDUCE) ? PLX_BIT(PLX_COLL_ALLREDUCE) : 0) |
                           (sim_model_native(c, PLX_COLL_ALLGATHER) ? PLX_BIT(PLX_COLL_ALLGATHER) : 0);
    /* Shrink and grow rebuild through the job's store under new keys, a new
     * world; coroutine ranks cannot, as the survivors' agreement sleeps and
     * runs a heartbeat thread, which would block their only thread. The
     * backend's own caps (no communicator) are those of thread ranks. */
    if (!c || !c->fiber)
        caps.flags |= PLX_CAP_SHRINK;
    if (c && c->model->on && !c->model->payload)
        caps.flags |= PLX_CAP_TIMING_ONLY;
    size_t n = out->struct_size < sizeof caps ? out->struct_size : sizeof caps;
    uint32_t size = out->struct_size;
    memcpy(out, &caps, n);
    out->struct_size = size;
    return 0;
}

/* Requests are reused through a per-rank free list (w->mu guards it), so
 * an operation costs no malloc once the list has warmed up. */
struct sim_req *sim_req_new(struct impl *c)
{
    sim_lock(c->w);
    struct sim_req *r = c->free_reqs;
    if (r)
        c->free_reqs = r->next;
    sim_unlock(c->w);
    if (!r)
        return calloc(1, sizeof *r);
    memset(r, 0, offsetof(struct sim_req, err)); /* one per message: not its 256-byte message */
    r->err[0] = '\0';
    return r;
}

void sim_req_release_locked(struct impl *c, struct sim_req *r)
{
    r->next = c->free_reqs;
    c->free_reqs = r;
}

void sim_req_free_all(struct impl *c)
{
    while (c->free_reqs) {
        struct sim_req *r = c->free_reqs;
        c->free_reqs = r->next;
        free(r);
    }
}

static int comm_create(const struct plx_comm_args *args, void **out)
{
    /* The entry point refused cores older than ABI 1.5: every
     * communicator comes with its own instance of the host. */
    const struct plx_host *host = args->host;
    struct impl *c = calloc(1, sizeof *c);
    if (!c)
        return host->error(host->ctx, PLX_ERR_NOMEM, "sim: out of memory");
    c->host = host;
    c->rank = args->rank;
    c->size = args->size;
    c->timeout_ms = args->timeout_ms;
    sim_config_read(host, args->config, &c->cfg);
    c->model = &c->cfg.model; /* until it joins (world_take_seat) */
    c->injects = sim_fault_injects(&c->cfg, c->rank);
    c->clock_ns = &c->own_clock_ns;
    c->model_rank = c->rank;
    c->last_to = c->last_from = -1;
    if ((c->fiber = sim_fiber_self()) != NULL) { /* native collectives need a thread per rank */
        c->cfg.native = 0;
        c->clock_ns = sim_fiber_clock(c->fiber);
        c->model_rank = sim_fiber_rank(c->fiber);
    }
    if (c->cfg.native && !(c->small = malloc(SIM_SMALL_BYTES))) {
        free(c);
        return host->error(host->ctx, PLX_ERR_NOMEM, "sim: out of memory");
    }
    if (c->cfg.absent_rank == c->rank) {
        free(c->small);
        free(c);
        return host->error(host->ctx, PLX_ERR_UNAVAILABLE,
                           "sim: rank %d is configured absent ([sim] absent_rank) and does not join", args->rank);
    }
    plx_plugin_cond_init(&c->cv); /* CLOCK_MONOTONIC, as the deadlines */
    int rc = sim_world_join(args, c);
    if (rc == 0 && c->cfg.native && (rc = sim_worker_start(c)) != 0)
        sim_world_leave(c);
    if (rc) {
        pthread_cond_destroy(&c->cv);
        free(c->small);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int comm_abort(void *comm)
{
    struct impl *c = comm;
    struct world *w = c->w;
    pthread_mutex_lock(&w->mu);
    c->aborted = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&w->mu);
    sim_wake_all(w);
    return 0;
}

static int comm_destroy(void *comm)
{
    struct impl *c = comm;
    sim_worker_stop(c);
    sim_req_free_all(c); /* under no lock: the worker is gone and the core freed its requests */
    sim_world_leave(c);
    pthread_cond_destroy(&c->cv);
    free(c->scratch);
    free(c->small);
    free(c);
    return 0;
}

static int test(void *comm, void *req, int *done)
{
    struct impl *c = comm;
    struct sim_req *r = req;
    sim_lock(c->w);
    *done = r->done;
    if (r->done)
        sim_model_complete(c, r);
    int st = r->status;
    if (r->done && st)
        sim_error(c, st, "%s", r->err);
    sim_unlock(c->w);
    return *done ? st : 0; /* read under the lock: another rank's thread completes r */
}

static int wait_op(void *comm, void *req, int64_t timeout_ms)
{
    return sim_wait_req(comm, req, timeout_ms);
}

static void req_free(void *comm, void *req)
{
    struct impl *c = comm;
    struct sim_req *r = req;
    if (!r->is_coll) {
        sim_p2p_cancel(c, r);
        return;
    }
    sim_lock(c->w);
    if (r->done)
        sim_req_release_locked(c, r);
    else
        r->freed = 1; /* still queued or running: execute() releases it */
    sim_unlock(c->w);
}

/* The hooks of a modelled backend, which the core's generic algorithms call. */
static const struct plx_ext_sim sim_ext = {
    .struct_size = sizeof(struct plx_ext_sim),
    .version = PLX_EXT_SIM_VERSION,
    .charge_reduce = sim_model_charge_reduce,
    .op_footprint = sim_model_op_footprint,
};

static const void *extension(const char *name, uint32_t version)
{
    return !strcmp(name, PLX_EXT_SIM) && version <= PLX_EXT_SIM_VERSION ? &sim_ext : NULL;
}

static const struct plx_backend sim_backend = {
    .struct_size = sizeof(struct plx_backend),
    .abi_minor = PLX_ABI_MINOR,
    .name = "sim",
    .version = "0.1.0",
    .description = "in-process simulated world: ranks are threads (init mem://NAME) or coroutines of one thread; "
                   "shrink and grow only on thread ranks: on coroutines the survivors' agreement would block the "
                   "only thread",
    .keys = keys,
    .probe = probe,
    .get_caps = get_caps,
    .comm_create = comm_create,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .comm_revoke = sim_revoke,
    .isend = sim_isend,
    .irecv = sim_irecv,
    .collective = sim_collective,
    .test = test,
    .wait = wait_op,
    .req_free = req_free,
    .extension = extension,
};

/* Tests: the table as a plugin of an older minor had it (PLEXUS_SIM_ABI_MINOR
 * = 0..10): shorter, and from 1.6 to 1.10 with the model's hooks in the
 * slots those minors gave them instead of the extension. */
static struct plx_backend sim_backend_old;

static const struct plx_backend *present_minor(unsigned minor)
{
    static const size_t end_of[] = {
        offsetof(struct plx_backend, comm_split),      offsetof(struct plx_backend, comm_losses),
        offsetof(struct plx_backend, keys),            offsetof(struct plx_backend, req_size),
        offsetof(struct plx_backend, req_size),        offsetof(struct plx_backend, reserved_1_6),
        offsetof(struct plx_backend, comm_lost_ranks), offsetof(struct plx_backend, comm_shrink),
        offsetof(struct plx_backend, reserved_1_9),    offsetof(struct plx_backend, extension),
        offsetof(struct plx_backend, extension),
    };
    sim_backend_old = sim_backend;
    sim_backend_old.struct_size = (uint32_t)end_of[minor];
    sim_backend_old.abi_minor = minor;
    sim_backend_old.extension = NULL;
    if (minor >= 6)
        sim_backend_old.reserved_1_6 = sim_model_charge_reduce;
    if (minor >= 9)
        sim_backend_old.reserved_1_9 = sim_model_op_footprint;
    return &sim_backend_old;
}

/* sim keeps no host of its own: probe needs none, and each communicator
 * reaches the core through the instance comm_create gets (ABI 1.5). */
PLX_BACKEND_EXPORT int plx_backend_entry_v1(const struct plx_host *host, uint32_t *abi_minor_inout,
                                            const struct plx_backend **out)
{
    if (*abi_minor_inout < 5)
        return host->error(host->ctx, PLX_ERR_UNSUPPORTED, "sim needs plugin ABI 1.5; this plexus has 1.%u",
                           (unsigned)*abi_minor_inout);
    const char *old = getenv("PLEXUS_SIM_ABI_MINOR");
    if (old && *old) {
        char *end;
        unsigned long minor = strtoul(old, &end, 10);
        if (*end || minor >= PLX_ABI_MINOR)
            return host->error(host->ctx, PLX_ERR_CONFIG, "PLEXUS_SIM_ABI_MINOR=%s: not a minor of 0 to %d", old,
                               PLX_ABI_MINOR - 1);
        *abi_minor_inout = (uint32_t)minor;
        *out = present_minor((unsigned)minor);
        return 0;
    }
    if (*abi_minor_inout > PLX_ABI_MINOR)
        *abi_minor_inout = PLX_ABI_MINOR;
    *out = &sim_backend;
    return 0;
}
