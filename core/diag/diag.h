/* diag.h - naming what went wrong: collective fingerprints (fingerprint.c)
 * and the per-communicator ledger of recent operations (ledger.c). This
 * layer sits above comm: comm reaches it only through the hook tables
 * (diag_hooks.c) it puts in c->dh, whose type is comm's
 * (comm/diag_hooks.h).
 *
 * A fingerprint is what every rank must agree on for one collective: its
 * sequence number, kind, dtype, reduction op, count and root. Where the core
 * owns the wire (the generic algorithms, hence tcp and sim without native
 * collectives) it travels in-band on the first message each rank sends each
 * peer in the operation; for native collectives of backends the core does
 * not own ([core] fingerprint_native) it is compared through the store when
 * a wait fails, or by one small allgather before every operation.
 * Stability: internal. */
#ifndef PLX_CORE_DIAG_H
#define PLX_CORE_DIAG_H

#include <stddef.h>
#include <stdint.h>

#include "diag_hooks.h"
#include "plexus/ledger.h"

enum plx__fp_native { PLX__FP_NATIVE_OFF, PLX__FP_NATIVE_TIMEOUT, PLX__FP_NATIVE_EVERY };

/* Per-communicator state (NULL-safe: diag may be absent): the open and
 * close hooks. job names the job in the ledger; from: a communicator whose
 * job c shares (a split, a rebuild), or NULL. */
int plx__diag_create(struct plx_comm *c, const struct plx_comm *from, const char *job);
void plx__diag_destroy(struct plx_comm *c);
/* The table c's configuration asks for (c->diag made): full, or none. */
extern const struct plx__diag_hooks plx__diag_full;
const struct plx__diag_hooks *plx__diag_pick(const struct plx_comm *c);

/* In-band check of the generic algorithms. Dispatch and the p2p adapter
 * reach it, and the ledger's post and state below, only through the hook
 * table (comm/diag_hooks.h). The generic collective that runs now (fp
 * NULL: none). */
void plx__fp_begin(struct plx_comm *c, const struct plx__fp *fp);
/* Does this message carry the running collective's fingerprint? */
int plx__fp_wants(const struct plx_comm *c, int is_send, int peer, uint64_t tag);
/* Start the first message to / from peer of the running collective with its
 * fingerprint (post: the adapter's plain isend/irecv). */
int plx__fp_start(struct plx_comm *c, int is_send, int peer, void *buf, size_t bytes, uint64_t tag, plx__post_fn post,
                  plx__free_fn release, struct plx__fp_io **out);
/* Wait for it; a receive checks the peer's fingerprint: PLX_ERR_MISMATCH
 * names both calls. Always releases io. */
int plx__fp_wait(struct plx_comm *c, struct plx__fp_io *io, uint64_t deadline_ns, plx__wait_fn wait,
                 plx__free_fn release);
void plx__fp_discard(struct plx_comm *c, struct plx__fp_io *io, plx__free_fn release);

/* Native collectives: mode [core] fingerprint_native. every: allgather the
 * fingerprints first (through the backend) and fail on every rank alike. */
int plx__fp_native_mode(const struct plx_comm *c);
int plx__fp_native_check(struct plx_comm *c, const struct plx__fp *fp);

/* A mismatch found here: published so the other ranks, which may be waiting
 * on this one rather than talking to the mismatched rank, fail with it too. */
void plx__diag_publish_mismatch(struct plx_comm *c, const char *msg);
/* 1 and the message in msg (len bytes) if some rank published a mismatch. */
int plx__diag_mismatch_published(struct plx_comm *c, char *msg, size_t len);

/* One posted operation, by seq % PLX__DIAG_RECENT: a seqlock (lock odd
 * while its only writer, the thread that posts, writes it), so neither the
 * poster nor the completer takes a lock and a reader (a slow wait, a
 * publication) retries a torn read. */
#define PLX__DIAG_RECENT 16
struct plx__diag_slot {
    uint32_t lock;
    struct plx__fp fp;
    uint64_t bytes, since_ns;
};

/* Per-communicator state of both files, behind the part comm reads
 * (c->diag points at pub). */
struct plx__diag_state {
    struct plx__diag pub;
    int inband;               /* [core] fingerprint */
    int records;              /* inband or a ledger wanted: the full hook table (diag_hooks.h) */
    int native_mode;          /* [core] fingerprint_native */
    /* In-band check: the generic collective running now, and per peer the
     * seq + 1 of the last collective whose first message went / came. */
    struct plx__fp cur;
    int cur_on;
    /* The call its messages carry and compare: cur's, or the one cur
     * stands for (plx_comm.stands_for); tags and seqs stay cur's. */
    struct plx__fp ident;
    uint64_t *sent, *rcvd;
    char **sbounce, **rbounce; /* per peer: fingerprint.c's io + bounce buffer */
    /* Position, as published to the store ("diag/pos/<rank>"). */
    uint64_t publish_ns;      /* [core] diag_publish_ms */
    uint64_t last_pub_ns, next_poll_ns;
    /* The newest posted and the newest completed seq + 1 (0: none yet),
     * raised with a CAS; their calls are in recent[]. Running: *posted1 >
     * *done1, the call of *posted1 - 1; last completed: that of *done1 - 1.
     * They point into the ledger file where there is one (plexus-top reads
     * them there), else at own_: one CAS each per operation, not two. */
    uint64_t *posted1, *done1;
    uint64_t own_posted1, own_done1;
    uint64_t published_done1;
    int store_off;            /* a diagnostic store call failed or was slow: use the store no more */
    /* The awaited peer's position as a slow wait last read it (text as in
     * the store; seen_lock guards it), and the seq of the operation that
     * waited: when the store is gone by the time that operation fails (its
     * host, rank 0, failed first and left), the error still says where that
     * peer was. */
    int seen_lock, seen_rank; /* seen_rank -1: none read */
    uint64_t seen_seq;
    char seen[256];
    struct plx__diag_slot recent[PLX__DIAG_RECENT];
    /* The ledger file (ledger.c). */
    struct plx_ledger_file *lf;
    size_t map_bytes;
    char path[512];
    char job[128];            /* names the job in the ledger (store URL) */
};

static inline struct plx__diag_state *plx__diag_of(const struct plx_comm *c)
{
    return (struct plx__diag_state *)c->diag;
}

/* The store for diagnosis: 0 once a call failed or took over 2 s (its
 * host stopped or gone), so an error path never waits on it twice. done()
 * records a call that started at t0 (plx__clock_ns) with status rc. */
int plx__diag_store_usable(const struct plx_comm *c);
void plx__diag_store_done(struct plx_comm *c, uint64_t t0, int rc);

/* ---- ledger and positions (ledger.c) ---------------------------------- */
void plx__ledger_post(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes);
/* plx__ledger_post, then plx__ledger_state(RUNNING), in one write. */
void plx__ledger_post_running(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes);
void plx__ledger_state(struct plx_comm *c, uint64_t seq, int state);
/* Called from waits every ~100 ms; cheap until the wait is slow: then it
 * publishes this rank's position to the store, looks for a mismatch
 * another rank published, and compares its call with what peer (the rank
 * waited for, -1: unknown) says it runs or last completed: a peer that
 * never receives from this rank cannot see its fingerprint in-band (a
 * broadcast's tree against an allreduce's pairs). Returns 0 or an error to
 * end the wait with. */
int plx__ledger_slow_wait(struct plx_comm *c, uint64_t waited_ns, int peer);
/* For a failure (timeout, loss, mismatch): add to msg where the other ranks
 * are, as the store says, and turn a timeout into a mismatch when two ranks
 * report different calls for one sequence number. Returns the status to
 * report (status, or PLX_ERR_MISMATCH). */
int plx__ledger_explain(struct plx_comm *c, int status, char *msg, size_t len);

#endif
