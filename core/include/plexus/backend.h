/* backend.h - the plexus backend plugin ABI.
 *
 * Stability: stable ABI, major 1. Append-only within a major.
 *
 * A backend is a shared object that exports exactly one symbol per ABI major
 * it supports, e.g.
 *
 *     PLX_BACKEND_EXPORT int plx_backend_entry_v1(const struct plx_host *host,
 *                                                 uint32_t *abi_minor_inout,
 *                                                 const struct plx_backend **out);
 *
 * The core tries the newest major it knows first. Within a major the minor
 * is negotiated: the core passes its own minor in *abi_minor_inout and the
 * plugin writes back min(core minor, plugin minor); *out points at a static
 * struct plx_backend that lives as long as the process (plugins are never
 * unloaded).
 *
 * Rules every struct here follows:
 *  - It starts with uint32_t struct_size. Fields are only ever appended, and
 *    appending one bumps PLX_ABI_MINOR. A reader touches a field only if it
 *    lies inside struct_size (PLX_HAS_FIELD), else uses the documented
 *    default.
 *  - Output structs are sized by the caller: the callee zeroes/writes at most
 *    struct_size bytes.
 *  - Every function pointer except probe, get_caps, comm_create, comm_destroy,
 *    test and req_free may be NULL, meaning "not provided". The core checks
 *    once at load time: a missing collective is served by the core's generic
 *    algorithms over isend/irecv, or refused with PLX_ERR_UNSUPPORTED before
 *    any call reaches the plugin.
 *  - The operations table holds what every transport may provide. Hooks
 *    that only one kind of backend needs (a simulator's) are a named,
 *    versioned extension it hands out through extension() (ABI 1.11), so
 *    the table no longer grows for them.
 *  - Plugins never print, exit, setenv or install signal handlers. They
 *    report through host->log and explain failures with host->error.
 *  - Entry points return 0 or a negative PLX_ERR_* code (plexus.h).
 */
#ifndef PLEXUS_BACKEND_H
#define PLEXUS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "plexus.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLX_ABI_MAJOR 1
#define PLX_ABI_MINOR 14

/* The entry symbol of ABI major 1. */
#define PLX_BACKEND_ENTRY_V1 plx_backend_entry_v1
#define PLX_BACKEND_ENTRY_V1_NAME "plx_backend_entry_v1"

#define PLX_BACKEND_EXPORT __attribute__((visibility("default")))

/* PLX_HAS_FIELD (plexus.h) says whether a struct_size-versioned struct holds a field. */

/* Tags: user point-to-point tags are below 2^31. Tags with bit 63 set belong
 * to the core (generic collectives); plugins may use bit 62 internally. */
#define PLX_TAG_CORE_BIT (UINT64_C(1) << 63)
#define PLX_TAG_PLUGIN_BIT (UINT64_C(1) << 62)

enum plx_log_level {
    PLX_LOG_ERROR = 0,
    PLX_LOG_WARN = 1,
    PLX_LOG_INFO = 2,
    PLX_LOG_DEBUG = 3,
    PLX_LOG_TRACE = 4,
};

/* probe() outcome. */
enum plx_probe_state {
    PLX_PROBE_USABLE = 0,      /* can create communicators here */
    PLX_PROBE_UNAVAILABLE = 1, /* expected absence: no GPU, library missing,
                                  not under a launcher; listed quietly */
    PLX_PROBE_BROKEN = 2,      /* something is wrong; reported loudly */
};

/* Capability flags (struct plx_caps.flags). */
#define PLX_CAP_ASYNC (1u << 0)       /* work progresses without test/wait calls */
#define PLX_CAP_ABORT (1u << 1)       /* comm_abort unblocks pending work */
#define PLX_CAP_SPLIT (1u << 2)       /* native comm_split */
#define PLX_CAP_THREAD_SAFE (1u << 3) /* ops on one comm may come from several threads */
#define PLX_CAP_INPLACE (1u << 4)     /* native collectives accept send == recv */
#define PLX_CAP_MULTI_NODE (1u << 5)  /* ranks may live on different hosts */
#define PLX_CAP_ANY_SOURCE (1u << 6)  /* irecv accepts PLX_ANY_SOURCE */
#define PLX_CAP_IN_PROCESS (1u << 7)  /* all ranks are threads of one process */
#define PLX_CAP_P2P (1u << 8)         /* isend/irecv provided */
#define PLX_CAP_P2P_HEAD (1u << 9)    /* ABI 1.5: isend/irecv honour plx_p2p_args.head */
/* comm_create builds a communicator of any subset of a job's ranks (or
 * more ranks) from the store alone, while an older communicator of the same
 * processes is broken or revoked: plx_comm_shrink and plx_comm_grow work. */
#define PLX_CAP_SHRINK (1u << 10)
/* Timing only: a message carries its size, but only its first 128 bytes of
 * data (room for the core's fingerprint header and PLX_TIMING_EXACT_BYTES),
 * so collectives of up to PLX_TIMING_EXACT_BYTES per rank (the core's own:
 * a split's allgather) stay exact, and the core skips the reductions and
 * copies of larger ones, whose results are meaningless; their messages
 * come with buf NULL (a size and no data) and must not be copied. */
#define PLX_CAP_TIMING_ONLY (1u << 11)
/* ABI 1.8: comm_shrink builds the survivors' communicator out of the old
 * one by the backend's own means (ULFM's MPIX_Comm_shrink, ncclCommShrink),
 * so plx_comm_shrink works on a backend that bootstrapped without the
 * job's store too. Set only where the loaded library can do it. */
#define PLX_CAP_NATIVE_SHRINK (1u << 12)
/* ABI 1.8, with PLX_CAP_NATIVE_SHRINK: comm_shrink finds the survivors by
 * a fault-tolerant agreement of the backend's own (ULFM's), so the core
 * calls it with agreed 0 and does not agree through the store first. */
#define PLX_CAP_SHRINK_AGREES (1u << 14)
/* ABI 1.8: comm_create reads no store (args->store may be NULL): the
 * backend's library bootstraps itself from its launcher (MPI). The core
 * then opens the job's store after comm_create, so that library is the
 * first in the process to initialise the launcher's PMIx (Open MPI 5's
 * MPI_Init fails where PMIx was initialised before it). */
#define PLX_CAP_OWN_BOOTSTRAP (1u << 13)
#define PLX_TIMING_MESSAGE_BYTES 128
#define PLX_TIMING_EXACT_BYTES 64
/* Messages longer than this carry no data at all: the core puts its header
 * only in shorter ones. */
#define PLX_TIMING_SAMPLED_BYTES 16384

/* Bit helpers for the masks below. */
#define PLX_BIT(x) (1u << (x))

/* Capabilities. Caller-sized output. */
struct plx_caps {
    uint32_t struct_size;
    uint32_t flags;       /* PLX_CAP_* */
    uint32_t collectives; /* PLX_BIT(enum plx_coll) for each native collective */
    uint32_t dtypes;      /* PLX_BIT(enum plx_dtype) accepted natively */
    uint32_t redops;      /* PLX_BIT(enum plx_redop) accepted natively; BAND, BOR
                             and BXOR (ABI 1.13) only from a plugin of 1.13 on */
    uint32_t mem_kinds;   /* PLX_BIT(enum plx_mem_kind): HOST, CUDA; 0 means host only */
    uint64_t max_message_bytes; /* 0: no limit */
};

/* probe() result. Caller-sized output. */
struct plx_probe_result {
    uint32_t struct_size;
    int32_t state;     /* enum plx_probe_state */
    char reason[256];  /* why, always set; "ok" or a one-line explanation */
};

/* One configuration key a backend reads from its INI section; listed by
 * plexus-info. Arrays of these end with a {NULL} entry. */
struct plx_param {
    const char *key;
    const char *default_value;
    const char *help;
};

/* ABI 1.3: the type of a configuration key. The core validates every value
 * once, where it is read (a file's line, a variable, an API option), and
 * refuses a bad one with its origin; a plugin reads values already checked. */
enum plx_key_type {
    PLX_KEY_STRING = 0,   /* any text */
    PLX_KEY_BOOL = 1,     /* true or false (on/off, yes/no, 1/0 mean the same) */
    PLX_KEY_INT = 2,      /* a decimal integer, may be negative */
    PLX_KEY_UINT = 3,     /* a non-negative decimal integer */
    PLX_KEY_SIZE = 4,     /* bytes: 4096, 64K, 16M, 2G (powers of 1024) */
    PLX_KEY_DURATION = 5, /* 250ms, 30s, 2m, 100us, 5ns, 1h; a bare number is in the
                             unit the key's name ends with (_ns, _us, _ms, _s), else ms */
    PLX_KEY_ENUM = 6,     /* one of choices ("a|b|c") */
    PLX_KEY_LIST = 7,     /* comma-separated, no empty item; choices, if set, the allowed items */
};

/* ABI 1.3: one configuration key a backend reads, with its type. Arrays of
 * these end with a {NULL} entry. For INT, UINT, SIZE and DURATION, choices
 * may name words accepted besides numbers ("auto"). */
struct plx_key {
    const char *key;
    int32_t type;              /* enum plx_key_type */
    const char *default_value; /* NULL: unset unless configured */
    const char *choices;       /* ENUM, LIST: "a|b|c"; else extra words or NULL */
    const char *help;
};

/* ABI 1.3: a communicator's configuration (core-owned, opaque): the process
 * layers (files, drop-ins, variables) under the options that communicator
 * was created with. Valid until comm_destroy returns. NULL in the getters
 * means the process layers alone (probe, or a plugin-wide setting). */
struct plx_config;

/* The bootstrap key-value store of one communicator (core-owned, opaque).
 * Keys are already namespaced by the communicator's name. */
struct plx_store;

/* Services the core offers every plugin. Passed to the entry point; valid
 * for the process lifetime. */
struct plx_host {
    uint32_t struct_size;
    uint32_t abi_minor; /* the core's minor */
    void *ctx;          /* pass back as first argument of log/error/config_get */

    /* Log a message (printf format) under the backend's category. */
    void (*log)(void *ctx, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    /* Record a detailed message for the calling thread's last error and
     * return status, so plugins can write `return host->error(...)`. */
    int (*error)(void *ctx, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    /* The value of key in the backend's own INI section (after drop-ins and
     * PLEXUS_<SECTION>_<KEY> variables), or NULL if unset. Called from
     * comm_create or comm_split, it reads that communicator's configuration
     * (its options over the files; valid until comm_destroy); elsewhere the
     * process layers (process lifetime). ABI 1.3 plugins use config_str. */
    const char *(*config_get)(void *ctx, const char *key);
    /* Monotonic clock in nanoseconds. */
    uint64_t (*clock_ns)(void);
    /* inout[i] = inout[i] op in[i] for count elements, host memory. AVG
     * reduces like SUM (the caller divides with scale()). */
    int (*reduce)(void *inout, const void *in, size_t count, int dtype, int op);
    /* buf[i] /= divisor (AVG's final step), host memory. */
    int (*scale_div)(void *buf, size_t count, int dtype, uint64_t divisor);

    /* Bootstrap store. Every call takes a timeout (-1: the communicator's). */
    int (*store_set)(struct plx_store *s, const char *key, const void *val, size_t len);
    /* Wait for key, then return a copy; caller frees *val with host->free. */
    int (*store_get)(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms);
    /* Atomically add delta to the integer at key (created as 0); *result the new value. */
    int (*store_add)(struct plx_store *s, const char *key, int64_t delta, int64_t *result);
    int (*store_wait)(struct plx_store *s, const char *const *keys, size_t nkeys, int64_t timeout_ms);
    void (*free)(void *p);

    /* ---- ABI 1.3 ---- */
    /* Typed reads of key in the backend's section through cfg (see struct
     * plx_config). The value was validated against the backend's keys; an
     * unset key gives its declared default; 0, or PLX_ERR_NOT_FOUND when
     * neither is set (*out untouched). config_str's pointer lives as long as
     * cfg. Durations come in nanoseconds, sizes in bytes; a word from the
     * key's choices (such as "auto") reads as -1 through config_int. */
    int (*config_str)(void *ctx, const struct plx_config *cfg, const char *key, const char **out);
    int (*config_bool)(void *ctx, const struct plx_config *cfg, const char *key, int *out);
    int (*config_int)(void *ctx, const struct plx_config *cfg, const char *key, int64_t *out);

    /* ---- ABI 1.11 ---- */
    /* The message the calling thread's last error() recorded (the core keeps
     * one per thread), "" if none: a plugin that fails a request in one
     * thread and reports it in another (a worker's) carries the text over
     * with this, so it keeps no last-error state of its own. Valid until
     * the thread's next error(). */
    const char *(*last_error)(void *ctx);
};

/* What comm_create gets. Borrowed: valid during the call (copy what you keep),
 * except store, which is valid until comm_destroy returns. */
struct plx_comm_args {
    uint32_t struct_size;
    int32_t rank;
    int32_t size;
    int32_t local_rank;
    int32_t local_size;
    const char *name;        /* unique per communicator, identical on members */
    struct plx_store *store; /* namespaced by name */
    int64_t timeout_ms;      /* default timeout for blocking steps */
    /* ---- ABI 1.3 ---- */
    const struct plx_config *config; /* this communicator's configuration; valid until comm_destroy */
    /* ---- ABI 1.5 ---- */
    /* This communicator's instance of the host services: the same functions
     * as the entry point's, with a ctx of its own (log lines name the
     * communicator). Core-owned, valid until comm_destroy returns. A plugin
     * keeps it in its communicator and reaches the core through it in every
     * call on that communicator, so it needs no process-wide host. */
    const struct plx_host *host;
    /* ---- ABI 1.10 ---- */
    /* How long this call may wait for the other ranks (connects, handshakes,
     * the store): what is left of the one deadline of the init, split or
     * rebuild that calls it. timeout_ms stays the communicator's own, for
     * what it does later. plx_plugin_create_ms reads it (timeout_ms where
     * struct_size does not reach it, or it is 0: not given); a plugin of an
     * earlier minor gets timeout_ms set to this. */
    int64_t create_timeout_ms;
    /* ---- ABI 1.14 ---- */
    /* The ranks of the job on this machine (one kernel: its network
     * namespaces and containers count as one), which share its cores, where
     * the core knows them (a hierarchical communicator's children); 0:
     * unknown. local_size counts the ranks of a host, and hosts emulated in
     * namespaces of one machine share its cores: a backend that spins in
     * its waits while a core is free counts these. */
    int32_t machine_ranks;
};

/* A native collective. Borrowed during the call; buffers until completion. */
struct plx_coll_args {
    uint32_t struct_size;
    int32_t coll;      /* enum plx_coll */
    const void *send;  /* == recv for in place */
    void *recv;
    size_t count;      /* as in plexus.h for that collective */
    int32_t dtype;
    int32_t op;        /* enum plx_redop; AVG only if caps.redops has it */
    int32_t root;
    int32_t mem_kind;  /* resolved: PLX_MEM_HOST or PLX_MEM_CUDA */
    void *stream;
    int64_t timeout_ms;
    uint64_t seq;      /* per-communicator collective sequence number */
    /* ---- ABI 1.1 ---- */
    uint32_t flags;    /* PLX_COLL_FLAG_*; 0 when struct_size does not reach it */
    /* ---- ABI 1.4 ---- */
    /* The per-rank layout of PLX_COLL_ALLTOALLV and PLX_COLL_ALLGATHERV, in
     * elements, size entries each; NULL for every other collective. Owned by
     * the core and valid until the request completes (like the buffers): a
     * plugin reads them when it starts the collective and may keep the
     * pointers, never writes them. Displacements are never NULL here (the
     * core fills packed ones). The core checked them: every block fits the
     * address space and receive blocks do not overlap; it did not check that
     * other ranks agree (send_counts[j] here == recv_counts[rank] on j).
     *  - alltoallv: block j of send (send_counts[j] at send_displs[j]) goes
     *    to rank j; block i of recv (recv_counts[i] at recv_displs[i]) comes
     *    from rank i. count is 0. In place (send == recv): send_counts and
     *    send_displs equal the receive ones; needs PLX_CAP_INPLACE.
     *  - allgatherv: this rank sends recv_counts[rank] elements from send;
     *    count is 0; send_counts and send_displs are NULL. In place: send == recv +
     *    recv_displs[rank] elements; needs PLX_CAP_INPLACE.
     * A plugin of negotiated minor 4 or later may set PLX_BIT(PLX_COLL_ALLTOALLV)
     * and PLX_BIT(PLX_COLL_ALLGATHERV) in caps.collectives; the core routes
     * these collectives to a plugin of an older minor never, whatever its
     * mask says (their struct_size does not reach these fields), and runs
     * its generic algorithms over isend/irecv instead. */
    const size_t *send_counts;
    const size_t *send_displs;
    const size_t *recv_counts;
    const size_t *recv_displs;
};

/* plx_coll_args.flags */
#define PLX_COLL_FLAG_BLOCKING (1u << 0) /* the caller waits right away: a backend may
                                             finish the collective inside collective() */

/* How long the core waits for a native collective whose timeout is t ms
 * (the op's, else the communicator's; negative: none) before it fails the
 * communicator itself: a little longer than t, so that the backend's own
 * timeout error, which can name the missing rank, comes first. A plugin
 * that waits in the core's place (a prepared run queued behind others)
 * waits as long. */
static inline int64_t plx_coll_backstop_ms(int64_t t)
{
    return t < 0 ? PLX_TIMEOUT_INFINITE : t + t / 4 + 500;
}

/* A point-to-point transfer. Same lifetime rules as plx_coll_args. */
struct plx_p2p_args {
    uint32_t struct_size;
    int32_t peer;      /* PLX_ANY_SOURCE for irecv if PLX_CAP_ANY_SOURCE */
    void *buf;         /* const for isend */
    size_t bytes;
    uint64_t tag;
    int32_t mem_kind;
    void *stream;
    int64_t timeout_ms;
    /* ---- ABI 1.5 ---- */
    /* Only with PLX_CAP_P2P_HEAD (else NULL, 0): head_bytes bytes at head
     * travel in front of buf as one message. isend sends head then buf;
     * irecv puts the message's first head_bytes bytes at head and the rest
     * at buf. A message longer than head_bytes + bytes fills both, the rest
     * is discarded (the connection stays usable) and the receive completes
     * with PLX_ERR_INVALID_ARG: head then still holds what the sender put
     * first. Lets the core put its own header in front of a payload without
     * copying the payload next to it. head is const for isend. */
    void *head;
    size_t head_bytes;
};

/* The backend's description and operations. Static storage. */
struct plx_backend {
    uint32_t struct_size;
    uint32_t abi_minor;      /* minor the plugin was built for */
    const char *name;        /* [a-z0-9_-]+, must equal its drop-in section */
    const char *version;     /* the plugin's own version */
    const char *description; /* one line */
    const struct plx_param *params; /* config keys it reads; may be NULL */

    /* Required. Cheap, side-effect free: no communicator, thread or socket. */
    int (*probe)(struct plx_probe_result *out);
    /* Required. comm NULL: static capabilities; else that communicator's. */
    int (*get_caps)(void *comm, struct plx_caps *out);
    /* Optional fine predicate: 1 if coll can run natively with (dtype, op,
     * mem_kind), else 0. NULL: the masks in plx_caps decide. */
    int (*op_supported)(void *comm, int coll, int dtype, int op, int mem_kind);

    /* Required. Join the communicator described by args; *comm is the
     * plugin's handle. Must time out (args->timeout_ms) if ranks are missing. */
    int (*comm_create)(const struct plx_comm_args *args, void **comm);
    /* Required. Free comm; pending requests are failed first. */
    int (*comm_destroy)(void *comm);
    /* Optional: fail all pending and future requests with PLX_ERR_ABORTED,
     * from any thread. */
    int (*comm_abort)(void *comm);

    /* Optional point-to-point (PLX_CAP_P2P). Needed for generic collectives. */
    int (*isend)(void *comm, const struct plx_p2p_args *a, void **req);
    int (*irecv)(void *comm, const struct plx_p2p_args *a, void **req);
    /* Optional: start a native collective (see caps.collectives). */
    int (*collective)(void *comm, const struct plx_coll_args *a, void **req);

    /* Required. *done = 1 when complete; returns the request's status then. */
    int (*test)(void *comm, void *req, int *done);
    /* Optional blocking wait with timeout (ms, -2 infinite); NULL: the core
     * polls test() with back-off. PLX_ERR_TIMEOUT leaves the request pending. */
    int (*wait)(void *comm, void *req, int64_t timeout_ms);
    /* Required. Release a request. The core frees completed requests; it
     * frees a pending one only after a timeout or error, and then the plugin
     * must cancel it (the buffer is no longer borrowed after the call). */
    void (*req_free)(void *comm, void *req);

    /* ---- ABI 1.1 ---- */
    /* Optional native split (PLX_CAP_SPLIT). args describes the new
     * communicator (rank/size in it, name, store). color < 0: take no part
     * (*out = NULL). NULL: the core builds the child with comm_create. */
    int (*comm_split)(void *comm, int color, int key, const struct plx_comm_args *args, void **out);
    /* Optional: called once when the process finalizes plexus explicitly. */
    void (*finalize)(void);

    /* ---- ABI 1.2 ---- */
    /* Optional; any thread; never blocks. The peers this communicator has
     * lost or seen leave by itself, whether or not a request failed for it:
     * one line in msg (NUL-terminated, at most len bytes), one item per
     * peer separated by "; ", returning how many (0: nothing seen). A peer
     * that closed after destroying its own communicator may be listed too. The core adds the line to the
     * error of a related communicator (parent, child or sibling by split)
     * that failed by a loss or a timeout: such a failure is often the echo
     * of a rank that died in the relative, and the line names that rank. */
    int (*comm_losses)(void *comm, char *msg, size_t len);

    /* ---- ABI 1.3 ---- */
    /* The keys of the backend's section, typed (NULL-terminated); when set,
     * the core validates them and ignores params. A key not listed here nor
     * common to every section (library, priority, enabled, alias) is an error. */
    const struct plx_key *keys;
    /* Optional: wait for req until deadline_ns, an absolute time on the
     * host's clock_ns (CLOCK_MONOTONIC; UINT64_MAX: no deadline). Returns
     * the request's status once done, PLX_ERR_TIMEOUT leaving it pending
     * once the deadline passed, PLX_ERR_ABORTED when comm_abort ran. With
     * PLX_CAP_ABORT the core makes one call per wait while the wait is
     * short; a wait that passes 500 ms goes on in calls of about 100 ms to
     * the same deadline (the core publishes where its rank is between them),
     * so a PLX_ERR_TIMEOUT before the deadline must leave req intact. */
    int (*wait_until)(void *comm, void *req, uint64_t deadline_ns);

    /* ---- ABI 1.5 ---- */
    /* Bytes of the plugin's point-to-point request (at most 4096), or 0.
     * Non-zero: for isend and irecv the core passes *req pointing at
     * req_size bytes of its own memory (aligned for any type, contents
     * undefined) inside its record of the transfer, and the plugin builds
     * its request there instead of allocating one. req_free then ends the
     * request for good: once it returns, the plugin keeps no pointer to that
     * memory (a request still in the plugin's lists moves to memory of its
     * own there). collective() requests stay the plugin's own. */
    size_t req_size;
    /* Optional, both or neither: memory every rank of comm maps
     * (plx_mem_alloc). mem_alloc is collective over comm's ranks, same
     * bytes on each; *ptr is this rank's buffer, 64-byte aligned and
     * zeroed. mem_free is local and releases this rank's mapping; the
     * core frees what is left before comm_destroy. NULL: the core hands
     * out ordinary memory. */
    int (*mem_alloc)(void *comm, size_t bytes, void **ptr);
    int (*mem_free)(void *comm, void *ptr);
    /* Optional, any thread, never blocks long: fail every pending and
     * future request on comm with PLX_ERR_REVOKED, and tell every peer so
     * that theirs fail the same way (a peer that hears of it passes it on
     * or fails at once). NULL: plx_comm_revoke is PLX_ERR_UNSUPPORTED. */
    int (*comm_revoke)(void *comm);

    /* ---- ABI 1.6 ---- */
    /* Reserved since ABI 1.11: charge_reduce of ABI 1.6 to 1.10, now in the
     * "plexus.sim" extension (struct plx_ext_sim). Leave it NULL; the core
     * reads it only from a plugin that negotiated 1.6 to 1.10. */
    void (*reserved_1_6)(void *comm, size_t bytes);

    /* ---- ABI 1.7 ---- */
    /* Optional; any thread; never blocks: the ranks of comm this rank has
     * seen die (a process gone, a connection lost without a word from the
     * peer), whether or not a request failed for it. Sets dead[r] = 1 for
     * each (dead holds size bytes, the caller zeroes it) and returns how
     * many. Only what was seen: a rank that merely left or revoked is not
     * listed. The core's agreement (plx_comm_shrink) stops waiting for a
     * listed rank at once instead of after [core] shrink_wait_ms. NULL:
     * nothing is known. */
    int (*comm_lost_ranks)(void *comm, unsigned char *dead, int size);

    /* ---- ABI 1.8 ---- */
    /* Optional, with PLX_CAP_NATIVE_SHRINK; collective over the surviving
     * ranks of comm, never needs a dead rank: build comm's successor of
     * the survivors, ranks in the old order, into *out. alive holds
     * comm's size bytes. agreed != 0: alive is the set every survivor
     * agreed on (the core's agreement through the job's store); build
     * exactly that. agreed == 0 (PLX_CAP_SHRINK_AGREES): find the
     * survivors by the backend's own fault-tolerant agreement and write
     * them into alive (1 alive, 0 failed). args names the new communicator
     * (its rank and size are -1 where agreed == 0: they follow from alive).
     * Works on a revoked or failed comm; comm itself stays to be destroyed. */
    int (*comm_shrink)(void *comm, unsigned char *alive, int agreed, const struct plx_comm_args *args,
                       void **out);

    /* ---- ABI 1.9 ---- */
    /* Reserved since ABI 1.11: op_footprint of ABI 1.9 and 1.10, now in the
     * "plexus.sim" extension. Leave it NULL; the core reads it only from a
     * plugin that negotiated 1.9 or 1.10. */
    void (*reserved_1_9)(void *comm, size_t bytes);

    /* ---- ABI 1.11 ---- */
    /* Optional: the backend's extension called name (PLX_EXT_*), a struct
     * that opens with uint32_t struct_size and uint32_t version, of at
     * least version; NULL: the backend has none of that name or not that
     * new. Static storage, like this table. The core asks once per backend
     * at load time, for each extension it knows, and copies what it gets:
     * hooks that only some backends need (a simulator's) live there
     * instead of here, so a transport without them needs none of their
     * members (as libfabric's fi_open_ops). */
    const void *(*extension)(const char *name, uint32_t version);

    /* ---- ABI 1.12 ---- */
    /* Optional, all three or none: a collective prepared once and run many
     * times (plx_coll_prepare), so that what collective() does on every
     * call (look up types, pick the call, allocate a request) is done once.
     * coll_prepare gets the arguments of a blocking native call as
     * collective() would (PLX_COLL_FLAG_BLOCKING set, seq 0; the buffers
     * stay the same for every run) and builds *prep, or returns
     * PLX_ERR_UNSUPPORTED: the core then runs each time through
     * collective(). Not for the v-collectives. coll_run runs it once to
     * completion in the caller's thread, seq being this run's (a blocking
     * call: the timeout is the backend's, as for a blocking collective()).
     * A prepared collective runs one at a time. coll_unprepare frees prep;
     * the core calls it before comm_destroy for any still prepared. */
    int (*coll_prepare)(void *comm, const struct plx_coll_args *a, void **prep);
    int (*coll_run)(void *comm, void *prep, uint64_t seq);
    void (*coll_unprepare)(void *comm, void *prep);
};

/* ---- Named extensions (ABI 1.11) ---- */

#define PLX_EXT_SIM "plexus.sim"
#define PLX_EXT_SIM_VERSION 1

/* ABI 1.11: the "plexus.sim" extension, the hooks of a backend whose time
 * is modelled (sim). The core's generic algorithms tell it what they do
 * between messages, so that it can charge the rank's modelled clock; they
 * run also over PLX_CAP_TIMING_ONLY, where the work itself is skipped.
 * Append-only like every struct here (struct_size); version 1 has the
 * members below. */
struct plx_ext_sim {
    uint32_t struct_size;
    uint32_t version;
    /* Optional: the generic algorithm on comm has just reduced bytes bytes
     * (one input's) on this rank, or would have; the backend charges the
     * rank's clock for it. NULL: reductions take no modelled time. */
    void (*charge_reduce)(void *comm, size_t bytes);
    /* Optional: the generic algorithm is about to run an operation on comm
     * whose buffers on this rank span bytes bytes (input and output, once
     * where they overlap), so that the backend can price its messages'
     * copies by whether the host's ranks' buffers together still fit the
     * host's cache; with 0 once it has ended. NULL: nothing is told. */
    void (*op_footprint)(void *comm, size_t bytes);
};

typedef int (*plx_backend_entry_v1_fn)(const struct plx_host *host, uint32_t *abi_minor_inout,
                                       const struct plx_backend **out);

#ifdef __cplusplus
}
#endif
#endif
