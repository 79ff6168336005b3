/* sync.c - the barrier every phase ends with, and how a rank waits.
 *
 * A rank arrives by storing its new epoch (a futex word in its control
 * block) and waking sleepers, if any are registered. A waiter looks,
 * spins, yields, then sleeps on the futex of the rank it waits for, in
 * slices of at most SLICE_MS, as pace.c decides (it stops yielding while
 * foreign work takes the core for whole time slices). The futex sleep
 * keeps long waits (a slow peer, a rank computing) off the CPU.
 *
 * Between slices (and after every wake-up) it checks, for each rank it
 * still waits for: is the process alive (shm__peer_dead: pidfd, else kill(pid, 0) and its
 * /proc state), has it marked itself failed or gone, has this communicator
 * been aborted, has the deadline passed. A rank that died is named in
 * PLX_ERR_PEER_LOST on every rank that waits for it. */
#include <limits.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#define SLICE_MS 20

static void futex_wait(uint32_t *addr, uint32_t val, int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(uint32_t *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void shm__wake_all(struct shm_comm *c)
{
    for (int r = 0; r < c->size; r++)
        futex_wake(&shm__ctl(c, r)->epoch);
}

void shm__fail(struct shm_comm *c, int status, int lost_rank)
{
    c->failed = 1;
    if (!c->base)
        return;
    shm__mark_failed(c, status, lost_rank);
}

void shm__mark_failed(struct shm_comm *c, int status, int lost_rank)
{
    struct shm_ctl *me = shm__ctl(c, c->rank);
    /* A revoke is sticky: a later failure of this rank (its own abort or
     * timeout) must not hide it from the peers that have not seen it yet. */
    if (__atomic_load_n(&me->state, __ATOMIC_ACQUIRE) == SHM_STATE_FAILED && me->why_code == PLX_ERR_REVOKED)
        return;
    __atomic_store_n(&me->why_rank, lost_rank, __ATOMIC_RELAXED);
    __atomic_store_n(&me->why_code, status, __ATOMIC_RELAXED);
    __atomic_store_n(&me->state, SHM_STATE_FAILED, __ATOMIC_SEQ_CST);
    shm__wake_all(c);
}

/* The rank that revoked, as rank r (FAILED with REVOKED) names it: itself
 * when it revoked, else the one it heard of. */
static int revoker_named_by(struct shm_comm *c, int r)
{
    int by = shm__ctl(c, r)->why_rank;
    return by >= 0 && by < c->size ? by : r;
}

/* A rank that revoked comm, or heard of it, is FAILED with that code and
 * names the rank that revoked in why_rank: whoever sees any of them stops. */
int shm__revoked_by(struct shm_comm *c)
{
    for (int r = 0; r < c->size; r++) {
        struct shm_ctl *q = shm__ctl(c, r);
        if (__atomic_load_n(&q->state, __ATOMIC_ACQUIRE) == SHM_STATE_FAILED && q->why_code == PLX_ERR_REVOKED)
            return revoker_named_by(c, r);
    }
    return -1;
}

int shm__stop_status(struct shm_comm *c)
{
    return __atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE) ? PLX_ERR_REVOKED : PLX_ERR_ABORTED;
}

static int revoked(struct shm_op *o, int by)
{
    struct shm_comm *c = o->c;
    shm__fail(c, PLX_ERR_REVOKED, by);
    return shm__op_error(o, PLX_ERR_REVOKED, "%s(seq %llu): rank %d revoked the communicator while rank %d "
                         "waited on shm", o->what, (unsigned long long)o->a->seq, by, c->rank);
}

uint64_t shm__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t shm__coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t shm__deadline(struct shm_op *o)
{
    if (!o->deadline)
        o->deadline = plx_plugin_deadline(o->timeout_ms);
    return o->deadline;
}

/* Where every rank is, for a timeout: the latest round each published (its
 * slot header) and how long ago, and whether it reached this barrier. The
 * segment is read live, so nothing in it is stale. */
static void where(struct shm_comm *c, uint32_t target, char *out, size_t len)
{
    uint64_t now = shm__coarse_ns();
    size_t at = (size_t)snprintf(out, len, " [where the ranks are on shm:");
    for (int r = 0; r < c->size && at + 1 < len; r++) {
        struct shm_ctl *q = shm__ctl(c, r);
        uint64_t ns = __atomic_load_n(&q->pos_ns, __ATOMIC_ACQUIRE);
        uint32_t half = __atomic_load_n(&q->pos_half, __ATOMIC_RELAXED) & 1;
        struct shm_slot_hdr h;
        memcpy(&h, (const void *)&q->hdr[half], sizeof h);
        int here = (int32_t)(__atomic_load_n(&q->epoch, __ATOMIC_ACQUIRE) - target) >= 0;
        const char *sep = r ? ";" : "";
        if (!ns)
            at += (size_t)snprintf(out + at, len - at, "%s rank %d started no collective", sep, r);
        else
            at += (size_t)snprintf(out + at, len - at, "%s rank %d entered %s #%llu %.1f s ago%s", sep, r,
                                   shm__coll_name(h.coll), (unsigned long long)h.seq,
                                   (double)(now > ns ? now - ns : 0) * 1e-9, here ? ", at this barrier" : "");
    }
    if (at + 1 < len)
        snprintf(out + at, len - at, "]");
}

/* Every barrier ends in one verdict the ranks share, so that a rank that
 * gives up (a timeout, an abort, a lost or failed peer) just as the last
 * rank arrives does not fail an operation its peers complete. The word, in
 * rank 0's control block: barrier epoch << 32 | (rank + 1) << 8 | code,
 * code -status (0: passed) or VERDICT_DECIDING.
 *
 * A rank that saw every rank arrive passes on one read when the word names
 * no decision for this barrier (an older epoch): nothing is written on the
 * way that every operation takes. A rank that gives up decides instead: it
 * puts DECIDING with this epoch in the word (compare-and-swap: one decider
 * at a time), then reads every rank's epoch again, and settles the word:
 * passed if every rank has arrived, failed otherwise. Why that holds: a rank
 * that passed on an older word read it before the decider's swap, after it
 * saw every epoch reach this barrier, and epochs only grow; so the decider's
 * second look sees them too and settles "passed". The loads and the swaps
 * are sequentially consistent for that argument. A rank that finds DECIDING
 * waits for it to settle, and after a while decides in its place (the
 * decider may have died): any decider's answer is right, and the swap that
 * settles lets only one stand. A later epoch in the word means this barrier
 * passed: nobody decides a barrier that failed. Once in 2^20 barriers a
 * passing rank settles "passed" itself, so the word is never so old that
 * its epoch wraps past the current one. */
#define VERDICT_DECIDING 0xffu
#define VERDICT_TAKEOVER_LOOKS 100000u
#define VERDICT_REFRESH_MASK 0xfffffu

static uint64_t verdict_word(uint32_t target, int rank, unsigned code)
{
    return (uint64_t)target << 32 | (uint64_t)(uint32_t)(rank + 1) << 8 | (code & 0xffu);
}

static int all_arrived(struct shm_comm *c, uint32_t target)
{
    for (int r = 0; r < c->size; r++)
        if ((int32_t)(__atomic_load_n(&shm__ctl(c, r)->epoch, __ATOMIC_SEQ_CST) - target) < 0)
            return 0;
    return 1;
}

/* The settled verdict of barrier target; status 0: this rank saw every
 * rank arrive, else why it gives up. */
static uint64_t verdict(struct shm_comm *c, uint32_t target, int status)
{
    uint64_t *w = &shm__ctl(c, 0)->verdict;
    unsigned code = (unsigned)(uint8_t)-status, looks = 0;
    if (code == VERDICT_DECIDING)
        code = (unsigned)(uint8_t)-PLX_ERR_REMOTE;
    uint64_t v = __atomic_load_n(w, __ATOMIC_SEQ_CST);
    for (;;) {
        uint32_t at = (uint32_t)(v >> 32);
        if ((int32_t)(at - target) > 0)
            return (uint64_t)target << 32;
        int deciding = at == target && (v & 0xffu) == VERDICT_DECIDING;
        if (at == target && !deciding)
            return v;
        if (!deciding && !status && (target & VERDICT_REFRESH_MASK))
            return (uint64_t)target << 32;
        if (deciding && ++looks < VERDICT_TAKEOVER_LOOKS) {
            shm__cpu_relax();
            v = __atomic_load_n(w, __ATOMIC_SEQ_CST);
            continue;
        }
        uint64_t mine = verdict_word(target, c->rank, VERDICT_DECIDING);
        if (!__atomic_compare_exchange_n(w, &v, mine, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            continue;
        uint64_t settled = all_arrived(c, target) ? (uint64_t)target << 32 : verdict_word(target, c->rank, code);
        if (__atomic_compare_exchange_n(w, &mine, settled, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            return settled;
        v = mine; /* taken over: follow the word */
        looks = 0;
    }
}

static int verdict_status(uint64_t v)
{
    return -(int)(v & 0xff);
}

static int verdict_rank(uint64_t v)
{
    return (int)((v >> 8) & 0xffffff) - 1;
}

/* Rank r found that the ranks called different collectives, in this
 * round or the one before (a rank that only wrote in it, such as a
 * broadcast's root, learns of it in its next operation): name both calls
 * from the slot headers, which stay as they were written. */
static int mismatch_seen(struct shm_op *o, int r)
{
    struct shm_comm *c = o->c;
    char msg[300];
    shm__fail(c, PLX_ERR_MISMATCH, -1);
    for (int q = 0; q < c->size; q++)
        for (uint32_t half = 0; q != c->rank && half < 2; half++)
            if (shm__mismatch(c, q, half, msg, sizeof msg))
                return shm__op_error(o, PLX_ERR_MISMATCH, "%s", msg);
    return shm__op_error(o, PLX_ERR_MISMATCH, "%s(seq %llu): rank %d found that the ranks called different "
                         "collectives", o->what, (unsigned long long)o->a->seq, r);
}

static int lost(struct shm_op *o, int r, uint32_t target)
{
    struct shm_comm *c = o->c;
    if (c->lost_rank < 0) {
        c->lost_rank = r;
        snprintf(c->lost_msg, sizeof c->lost_msg, "rank %d (pid %d) died", r, (int)shm__ctl(c, r)->pid);
    }
    shm__fail(c, PLX_ERR_PEER_LOST, r);
    return shm__op_error(o, PLX_ERR_PEER_LOST, "%s(seq %llu): rank %d (pid %d) died while rank %d waited for it (phase %u) on shm",
                         o->what, (unsigned long long)o->a->seq, r, (int)shm__ctl(c, r)->pid, c->rank, target);
}

/* The slow checks for every rank this one still waits for. */
static int check(struct shm_op *o, uint32_t target)
{
    struct shm_comm *c = o->c;
    if (!__atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE)) {
        /* a revoke ends this barrier even when the revoking rank arrived */
        int by = shm__revoked_by(c);
        if (by >= 0 && verdict_status(verdict(c, target, PLX_ERR_REVOKED)))
            return revoked(o, by);
    }
    for (int r = 0; r < c->size; r++) {
        struct shm_ctl *q = shm__ctl(c, r);
        if (r == c->rank || (int32_t)(__atomic_load_n(&q->epoch, __ATOMIC_ACQUIRE) - target) >= 0)
            continue;
        int dead = shm__peer_dead(c, r);
        uint32_t st = __atomic_load_n(&q->state, __ATOMIC_ACQUIRE);
        if (!dead && st == SHM_STATE_ACTIVE)
            continue;
        /* Giving up takes the barrier's verdict first: when every rank
         * arrived meanwhile (and one of them saw it), this rank goes on. */
        int code = st == SHM_STATE_FAILED ? q->why_code : PLX_ERR_PEER_LOST;
        if (!verdict_status(verdict(c, target, code < 0 && code > -256 ? code : PLX_ERR_REMOTE)))
            return 0;
        if (dead)
            return lost(o, r, target);
        if (st == SHM_STATE_LEFT) {
            shm__fail(c, PLX_ERR_PEER_LOST, r);
            return shm__op_error(o, PLX_ERR_PEER_LOST, "%s(seq %llu): rank %d destroyed its communicator while rank %d waited for it on shm",
                                 o->what, (unsigned long long)o->a->seq, r, c->rank);
        }
        if (st == SHM_STATE_FAILED) {
            int why = q->why_rank;
            if (code == PLX_ERR_REVOKED) /* revoked since the look above */
                return revoked(o, revoker_named_by(c, r));
            shm__fail(c, code == PLX_ERR_MISMATCH || code == PLX_ERR_ABORTED ? code : PLX_ERR_REMOTE, why);
            if (code == PLX_ERR_MISMATCH)
                return mismatch_seen(o, r);
            if (code == PLX_ERR_ABORTED && why < 0)
                return shm__op_error(o, PLX_ERR_ABORTED, "%s(seq %llu): rank %d aborted the communicator while "
                                     "rank %d waited for it on shm", o->what, (unsigned long long)o->a->seq, r,
                                     c->rank);
            if (why >= 0 && why < c->size && why != c->rank && code == PLX_ERR_PEER_LOST)
                return shm__op_error(o, PLX_ERR_PEER_LOST, "%s(seq %llu): rank %d lost rank %d, so rank %d stopped waiting on shm",
                                     o->what, (unsigned long long)o->a->seq, r, why, c->rank);
            return shm__op_error(o, PLX_ERR_REMOTE, "%s(seq %llu): rank %d failed (%s) while rank %d waited for it on shm",
                                 o->what, (unsigned long long)o->a->seq, r, shm__status_name(code), c->rank);
        }
    }
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        int stop = shm__stop_status(c);
        if (!verdict_status(verdict(c, target, stop)))
            return 0;
        if (stop == PLX_ERR_REVOKED)
            return shm__op_error(o, PLX_ERR_REVOKED, "%s(seq %llu): rank %d revoked communicator '%s'",
                                 o->what, (unsigned long long)o->a->seq, c->rank, c->name);
        shm__fail(c, PLX_ERR_ABORTED, -1);
        return shm__op_error(o, PLX_ERR_ABORTED, "%s(seq %llu): communicator '%s' aborted on rank %d", o->what,
                             (unsigned long long)o->a->seq, c->name, c->rank);
    }
    if (c->host->clock_ns() >= shm__deadline(o)) {
        if (!verdict_status(verdict(c, target, PLX_ERR_TIMEOUT)))
            return 0;
        int r = 0;
        while (r < c->size && (r == c->rank || (int32_t)(shm__ctl(c, r)->epoch - target) >= 0))
            r++;
        shm__fail(c, PLX_ERR_TIMEOUT, -1);
        int64_t ms = o->a->timeout_ms >= 0 ? o->a->timeout_ms : c->timeout_ms;
        char pos[1024];
        where(c, target, pos, sizeof pos);
        return shm__op_error(o, PLX_ERR_TIMEOUT, "%s(seq %llu): rank %d waited %lld ms for rank %d (alive) on shm: timeout%s",
                             o->what, (unsigned long long)o->a->seq, c->rank, (long long)ms, r < c->size ? r : -1, pos);
    }
    return 0;
}

/* Every rank arrived, but one gave up waiting first (a timeout, an
 * abort): its caller got an error for this operation, so this rank must
 * not report success for it either. */
static int gave_up(struct shm_op *o, uint64_t v)
{
    struct shm_comm *c = o->c;
    int r = verdict_rank(v), code = verdict_status(v);
    shm__fail(c, code, r);
    if (code == PLX_ERR_REVOKED)
        return shm__op_error(o, PLX_ERR_REVOKED, "%s(seq %llu): rank %d revoked the communicator", o->what,
                             (unsigned long long)o->a->seq, r);
    if (code == PLX_ERR_ABORTED)
        return shm__op_error(o, PLX_ERR_ABORTED, "%s(seq %llu): rank %d aborted the communicator", o->what,
                             (unsigned long long)o->a->seq, r);
    return shm__op_error(o, code == PLX_ERR_TIMEOUT ? code : PLX_ERR_REMOTE,
                         "%s(seq %llu): rank %d gave up on it (%s) before rank %d arrived on shm", o->what,
                         (unsigned long long)o->a->seq, r, shm__status_name(code), c->rank);
}

int shm__barrier(struct shm_op *o)
{
    struct shm_comm *c = o->c;
    if (c->size == 1)
        return 0;
    uint32_t target = ++c->epoch;
    struct shm_ctl *me = shm__ctl(c, c->rank);
    shm__pace_arrive(c);
    __atomic_store_n(&me->epoch, target, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&me->sleepers, __ATOMIC_SEQ_CST))
        futex_wake(&me->epoch);

    struct shm_pace_wait w = {0};
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank)
            continue;
        struct shm_ctl *q = shm__ctl(c, r);
        w.looks = 0;
        for (unsigned k = 0;; k++) {
            uint32_t e = __atomic_load_n(&q->epoch, __ATOMIC_SEQ_CST); /* verdict()'s argument */
            if ((int32_t)(e - target) >= 0)
                break;
            if (k >= 64 && k % 256 == 0 && (__atomic_load_n(&c->aborted, __ATOMIC_RELAXED) || shm__revoked_by(c) >= 0)) {
                int rc = check(o, target);
                if (rc)
                    return rc;
            }
            if (shm__pace(c, &w) == SHM_PACE_AGAIN)
                continue;
            int rc = check(o, target);
            if (rc)
                return rc;
            __atomic_add_fetch(&q->sleepers, 1, __ATOMIC_SEQ_CST);
            e = __atomic_load_n(&q->epoch, __ATOMIC_SEQ_CST);
            if ((int32_t)(e - target) < 0)
                futex_wait(&q->epoch, e, SLICE_MS);
            __atomic_sub_fetch(&q->sleepers, 1, __ATOMIC_SEQ_CST);
        }
    }
    shm__pace_done(c, &w);
    uint64_t v = verdict(c, target, 0);
    return verdict_status(v) ? gave_up(o, v) : 0;
}

/* Why a wait for pieces cannot end: a peer died or failed (it may hold a
 * piece), a stop, the deadline; 0 while it still can. */
static int pieces_stalled(struct shm_op *o, int owner)
{
    struct shm_comm *c = o->c;
    for (int r = 0; r < c->size; r++) {
        struct shm_ctl *q = shm__ctl(c, r);
        if (r == c->rank)
            continue;
        if (shm__peer_dead(c, r)) {
            shm__fail(c, PLX_ERR_PEER_LOST, r);
            return shm__op_error(o, PLX_ERR_PEER_LOST, "%s(seq %llu): rank %d (pid %d) died while rank %d waited for "
                                 "rank %d's slice to be reduced on shm", o->what, (unsigned long long)o->a->seq, r,
                                 (int)q->pid, c->rank, owner);
        }
        if (__atomic_load_n(&q->state, __ATOMIC_ACQUIRE) == SHM_STATE_FAILED) {
            int code = q->why_code;
            if (code == PLX_ERR_REVOKED)
                return revoked(o, revoker_named_by(c, r));
            shm__fail(c, PLX_ERR_REMOTE, r);
            return shm__op_error(o, PLX_ERR_REMOTE, "%s(seq %llu): rank %d failed (%s) while rank %d waited for rank "
                                 "%d's slice to be reduced on shm", o->what, (unsigned long long)o->a->seq, r,
                                 shm__status_name(code), c->rank, owner);
        }
    }
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        int stop = shm__stop_status(c);
        shm__fail(c, stop, -1);
        return shm__op_error(o, stop, "%s(seq %llu): communicator '%s' %s on rank %d", o->what,
                             (unsigned long long)o->a->seq, c->name, stop == PLX_ERR_REVOKED ? "revoked" : "aborted",
                             c->rank);
    }
    if (c->host->clock_ns() >= shm__deadline(o)) {
        shm__fail(c, PLX_ERR_TIMEOUT, -1);
        return shm__op_error(o, PLX_ERR_TIMEOUT, "%s(seq %llu): rank %d timed out waiting for rank %d's slice to be "
                             "reduced on shm", o->what, (unsigned long long)o->a->seq, c->rank, owner);
    }
    return 0;
}

int shm__wait_pieces(struct shm_op *o, int owner, uint32_t half, uint32_t want)
{
    struct shm_comm *c = o->c;
    struct shm_ctl *q = shm__ctl(c, owner);
    struct shm_pace_wait w = {0};
    for (;;) {
        uint32_t d = __atomic_load_n(&q->done[half], __ATOMIC_ACQUIRE);
        if (d >= want) {
            shm__pace_done(c, &w);
            return 0;
        }
        if (shm__pace(c, &w) == SHM_PACE_AGAIN)
            continue;
        int rc = pieces_stalled(o, owner);
        if (rc)
            return rc;
        __atomic_add_fetch(&q->done_sleepers, 1, __ATOMIC_SEQ_CST);
        d = __atomic_load_n(&q->done[half], __ATOMIC_SEQ_CST);
        if (d < want)
            futex_wait(&q->done[half], d, SLICE_MS);
        __atomic_sub_fetch(&q->done_sleepers, 1, __ATOMIC_SEQ_CST);
    }
}

void shm__wake_pieces(struct shm_ctl *q, uint32_t half)
{
    if (__atomic_load_n(&q->done_sleepers, __ATOMIC_SEQ_CST))
        futex_wake(&q->done[half]);
}

const char *shm__coll_name(int coll)
{
    static const char *const names[PLX_COLL_COUNT] = {
#define COLL_NAME(kind, val, name, op, root, v) [val] = name,
        PLX_COLL_MAP(COLL_NAME)
#undef COLL_NAME
    };
    return coll >= 0 && coll < PLX_COLL_COUNT ? names[coll] : "?";
}

int shm__op_error(struct shm_op *o, int status, const char *fmt, ...)
{
    char msg[SHM_ERR_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (o->err)
        memcpy(o->err, msg, sizeof msg);
    const struct plx_host *host = o->c->host;
    return host->error(host->ctx, status, "%s", msg);
}

const char *shm__status_name(int status)
{
    switch (status) {
    case PLX_ERR_TIMEOUT: return "timeout";
    case PLX_ERR_PEER_LOST: return "peer lost";
    case PLX_ERR_ABORTED: return "aborted";
    case PLX_ERR_REVOKED: return "revoked";
    case PLX_ERR_PROTOCOL: return "protocol error";
    case PLX_ERR_REMOTE: return "a remote rank failed";
    default: return "error";
    }
}
