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
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#define host shm__host
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
    struct shm_ctl *me = shm__ctl(c, c->rank);
    me->why_rank = lost_rank;
    me->why_code = status;
    __atomic_store_n(&me->state, SHM_STATE_FAILED, __ATOMIC_SEQ_CST);
    shm__wake_all(c);
}

static int lost(struct shm_op *o, int r, uint32_t target)
{
    struct shm_comm *c = o->c;
    if (c->lost_rank < 0) {
        c->lost_rank = r;
        snprintf(c->lost_msg, sizeof c->lost_msg, "rank %d (pid %d) died", r, (int)shm__ctl(c, r)->pid);
    }
    shm__fail(c, PLX_ERR_PEER_LOST, r);
    return plx_plugin_error(host, PLX_ERR_PEER_LOST, "%s(seq %llu): rank %d (pid %d) died while rank %d waited for it (phase %u) on shm",
                            o->what, (unsigned long long)o->a->seq, r, (int)shm__ctl(c, r)->pid, c->rank, target);
}

/* The slow checks for every rank this one still waits for. */
static int check(struct shm_op *o, uint32_t target)
{
    struct shm_comm *c = o->c;
    for (int r = 0; r < c->size; r++) {
        struct shm_ctl *q = shm__ctl(c, r);
        if (r == c->rank || (int32_t)(__atomic_load_n(&q->epoch, __ATOMIC_ACQUIRE) - target) >= 0)
            continue;
        if (shm__peer_dead(c, r))
            return lost(o, r, target);
        uint32_t st = __atomic_load_n(&q->state, __ATOMIC_ACQUIRE);
        if (st == SHM_STATE_LEFT) {
            shm__fail(c, PLX_ERR_PEER_LOST, r);
            return plx_plugin_error(host, PLX_ERR_PEER_LOST, "%s(seq %llu): rank %d destroyed its communicator while rank %d waited for it on shm",
                                    o->what, (unsigned long long)o->a->seq, r, c->rank);
        }
        if (st == SHM_STATE_FAILED) {
            int why = q->why_rank, code = q->why_code;
            shm__fail(c, PLX_ERR_REMOTE, why);
            if (why >= 0 && why < c->size && why != c->rank && code == PLX_ERR_PEER_LOST)
                return plx_plugin_error(host, PLX_ERR_PEER_LOST, "%s(seq %llu): rank %d lost rank %d, so rank %d stopped waiting on shm",
                                        o->what, (unsigned long long)o->a->seq, r, why, c->rank);
            return plx_plugin_error(host, PLX_ERR_REMOTE, "%s(seq %llu): rank %d failed (%s) while rank %d waited for it on shm",
                                    o->what, (unsigned long long)o->a->seq, r, shm__status_name(code), c->rank);
        }
    }
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        shm__fail(c, PLX_ERR_ABORTED, -1);
        return plx_plugin_error(host, PLX_ERR_ABORTED, "%s(seq %llu): communicator '%s' aborted on rank %d", o->what,
                                (unsigned long long)o->a->seq, c->name, c->rank);
    }
    if (host->clock_ns() >= o->deadline) {
        int r = 0;
        while (r < c->size && (r == c->rank || (int32_t)(shm__ctl(c, r)->epoch - target) >= 0))
            r++;
        shm__fail(c, PLX_ERR_TIMEOUT, -1);
        int64_t ms = o->a->timeout_ms >= 0 ? o->a->timeout_ms : c->timeout_ms;
        return plx_plugin_error(host, PLX_ERR_TIMEOUT, "%s(seq %llu): rank %d waited %lld ms for rank %d (alive) on shm: timeout",
                                o->what, (unsigned long long)o->a->seq, c->rank, (long long)ms, r < c->size ? r : -1);
    }
    return 0;
}

int shm__barrier(struct shm_op *o)
{
    struct shm_comm *c = o->c;
    if (c->size == 1)
        return 0;
    uint32_t target = ++c->epoch;
    struct shm_ctl *me = shm__ctl(c, c->rank);
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
            uint32_t e = __atomic_load_n(&q->epoch, __ATOMIC_ACQUIRE);
            if ((int32_t)(e - target) >= 0)
                break;
            if (k >= 64 && k % 256 == 0 && __atomic_load_n(&c->aborted, __ATOMIC_RELAXED)) {
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
    return 0;
}

const char *shm__coll_name(int coll)
{
    static const char *const names[PLX_COLL_COUNT] = {"allreduce", "broadcast", "reduce", "allgather",
                                                      "reduce_scatter", "gather", "scatter", "alltoall",
                                                      "barrier", "send", "recv"};
    return coll >= 0 && coll < PLX_COLL_COUNT ? names[coll] : "?";
}

const char *shm__status_name(int status)
{
    switch (status) {
    case PLX_ERR_TIMEOUT: return "timeout";
    case PLX_ERR_PEER_LOST: return "peer lost";
    case PLX_ERR_ABORTED: return "aborted";
    case PLX_ERR_PROTOCOL: return "protocol error";
    case PLX_ERR_REMOTE: return "a remote rank failed";
    default: return "error";
    }
}
