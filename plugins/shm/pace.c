/* pace.c - how a waiting rank spends the time until what it waits for
 * arrives: look, spin, yield, sleep, adapted at run time to who else wants
 * the core.
 *
 * A rank first looks 64 times with a pause between, then spins for
 * spin_ns, then looks between sched_yield()s for yield_ns, then sleeps on
 * a futex (the caller's). Both spin_ns and yield_ns are 0 by default: a
 * futex sleeper is woken as soon as its peer arrives, which serves ranks
 * that outnumber cores and ranks beside foreign work alike. Yielding, when
 * set, hands the core to a peer rank, which gives it back as soon as it
 * waits in turn.
 *
 * Yielding goes wrong when the other runnable task is foreign work (a
 * compute process, a training job's intra-op threads): it keeps the core
 * for its whole time slice, milliseconds, on every wait of every phase,
 * while a futex sleeper is woken (and preempts it) as soon as its peer
 * arrives. So each yield is timed: one that lost the core for longer than
 * SHM_PACE_LOST_NS (well below any scheduler's time slice, well above a
 * peer rank's hand-back) stops yielding for backoff_ns of clock time, in
 * which waits go from the spin straight to the futex. The backoff doubles
 * with each lost yield (up to SHM_PACE_BACKOFF_MAX_NS) and halves with each
 * yield that came back in time (down to SHM_PACE_BACKOFF_MIN_NS): a yield
 * that happened to find no foreign task beside it (the scheduler moved
 * it) must not bring back a yield per wait while the foreign work goes on,
 * and once it is gone a rank returns to yielding within a few backoffs.
 * Clock time, not a count of waits: how often a rank waits depends on the
 * sizes it moves, the cost of a lost yield does not.
 *
 * A sleeping wait may also shorten its thread's scheduler slice ([shm]
 * wait_slice, core/common/slice.c); shm__collective and the point-to-point
 * wait give it back when they return. */
#include <sched.h>

#include "shm.h"
#include "slice.h"

#define host shm__host
#define SHM_PACE_LOST_NS 200000u
#define SHM_PACE_BACKOFF_MIN_NS (20 * UINT64_C(1000000))
#define SHM_PACE_BACKOFF_MAX_NS (2 * UINT64_C(1000000000))

/* The fields of struct shm_pace are hints shared by the threads that wait
 * on one communicator (a collective, point-to-point): relaxed atomics, a
 * lost update only shifts when yielding is tried again. */
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

int shm__pace(struct shm_comm *c, struct shm_pace_wait *w)
{
    struct shm_pace *p = &c->pace;
    if (w->looks < 64) {
        w->looks++;
        shm__cpu_relax();
        return SHM_PACE_AGAIN;
    }
    uint64_t now = host->clock_ns();
    if (!w->started) {
        w->started = 1;
        w->spin_until = now + c->cfg.spin_ns;
        /* recent yields lost the core: sleep instead */
        w->yield_until = now < LOAD(p->calm_at) ? w->spin_until : w->spin_until + c->cfg.yield_ns;
    }
    if (now < w->spin_until) {
        for (int i = 0; i < 32; i++)
            shm__cpu_relax();
        return SHM_PACE_AGAIN;
    }
    if (now < w->yield_until) {
        sched_yield();
        uint64_t back = host->clock_ns(), backoff = LOAD(p->backoff_ns);
        if (back - now > SHM_PACE_LOST_NS) {
            backoff = backoff ? backoff * 2 : SHM_PACE_BACKOFF_MIN_NS;
            if (backoff > SHM_PACE_BACKOFF_MAX_NS)
                backoff = SHM_PACE_BACKOFF_MAX_NS;
            STORE(p->backoff_ns, backoff);
            STORE(p->calm_at, back + backoff);
            __atomic_add_fetch(&p->lost, 1, __ATOMIC_RELAXED);
            w->yield_until = 0;
        } else if (backoff) {
            STORE(p->backoff_ns, backoff / 2 < SHM_PACE_BACKOFF_MIN_NS ? 0 : backoff / 2);
        }
        return SHM_PACE_AGAIN;
    }
    __atomic_add_fetch(&p->sleeps, 1, __ATOMIC_RELAXED);
    plx__slice_shorten(c->cfg.wait_slice_ns);
    return SHM_PACE_SLEEP;
}
