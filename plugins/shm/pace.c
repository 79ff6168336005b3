/* pace.c - how a waiting rank spends the time until what it waits for
 * arrives: look, spin, yield, sleep, adapted at run time to who else wants
 * the core.
 *
 * A rank first looks 64 times with a pause between, then spins (spin_ns),
 * then looks between sched_yield()s for yield_ns (0 by default), then
 * sleeps on a futex (the caller's).
 *
 * spin_ns = auto (the default) spins only while no other rank of the
 * communicator shares this rank's CPU: each rank publishes the CPU it
 * arrives at barriers on (sched_getcpu, when it changes), and a rank that
 * finds another on its own CPU, or a communicator with more ranks than the
 * cores this process may run on (a CPU a rank last arrived on may be stale
 * while ranks move), sleeps after its looks, so the peer it waits for gets
 * the core at once. The ranks counted are the job's on this machine where
 * the core says (plx_comm_args.machine_ranks: a hierarchy's hosts emulated
 * in namespaces of one machine, whose other ranks run tcp on the same
 * cores while these wait), else the communicator's. Otherwise the peer
 * runs on another core, and spinning costs it nothing. Beside foreign work (a compute
 * process on every core) that peer is preempted for whole time slices; a
 * rank that slept meanwhile is woken when the peer arrives but waits for
 * the foreign task's slice to end before it runs again, on every barrier,
 * while a rank that spins is still runnable and keeps its share of its
 * core. So the spin budget starts at twice this thread's scheduler slice
 * (as the kernel reports it; its default formula where it reports none),
 * which rides out one preemption of the peer. It adapts as tcp's does: a
 * wait that slept for longer than twice that bound (the peer computes, or
 * is slow for reasons no spin would cover) halves the budget, down to none,
 * and after SHM_PACE_REGROW waits that slept but that a full spin would
 * have caught, it doubles again.
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
#include <unistd.h>

#include "hostid.h"
#include "shm.h"
#include "slice.h"

#define SHM_PACE_LOST_NS 200000u
#define SHM_PACE_BACKOFF_MIN_NS (20 * UINT64_C(1000000))
#define SHM_PACE_BACKOFF_MAX_NS (2 * UINT64_C(1000000000))
#define SHM_PACE_REGROW 8

/* The fields of struct shm_pace are hints shared by the threads that wait
 * on one communicator (a collective, point-to-point): relaxed atomics, a
 * lost update only shifts when yielding is tried again. */
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* The kernel's default slice where it reports none: 0.75 ms scaled by
 * 1 + log2 of the online CPUs (at most 8), as CFS and EEVDF both size it. */
static uint64_t default_slice_ns(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t scale = 1;
    for (long k = n < 8 ? n : 8; k > 1; k /= 2)
        scale++;
    return 750000u * scale;
}

void shm__pace_init(struct shm_comm *c, int sharing)
{
    struct shm_pace *p = &c->pace;
    uint64_t slice = plx__slice_ns();
    p->spin_max_ns = 2 * (slice ? slice : default_slice_ns());
    p->spin_ns = p->spin_max_ns;
    /* A process bound to one CPU (a launcher's --bind-to core) is told
     * apart from its peers by the CPUs they publish alone. */
    int cores = plx_common_usable_cores();
    p->crowded = cores > 1 && sharing > cores;
    p->cores = cores;
}

void shm__pace_arrive(struct shm_comm *c)
{
    int32_t cpu = sched_getcpu() + 1; /* 0: unknown */
    if (cpu != LOAD(c->pace.cpu)) {
        STORE(c->pace.cpu, cpu);
        __atomic_store_n(&shm__ctl(c, c->rank)->cpu, cpu, __ATOMIC_RELAXED);
    }
}

/* Whether a spin here could keep a rank of this communicator off its core. */
static int shares_core(struct shm_comm *c)
{
    if (c->pace.crowded)
        return 1;
    shm__pace_arrive(c);
    int32_t mine = LOAD(c->pace.cpu);
    if (!mine)
        return 1;
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && __atomic_load_n(&shm__ctl(c, r)->cpu, __ATOMIC_RELAXED) == mine)
            return 1;
    return 0;
}

void shm__pace_done(struct shm_comm *c, const struct shm_pace_wait *w)
{
    struct shm_pace *p = &c->pace;
    if (!w->learns || !w->slept)
        return;
    uint64_t waited = c->host->clock_ns() - w->t0, spin = LOAD(p->spin_ns);
    if (waited >= 2 * p->spin_max_ns) {
        spin /= 2;
        STORE(p->spin_ns, spin < p->spin_max_ns / 64 ? 0 : spin);
        STORE(p->regrow, 0);
    } else if (spin < p->spin_max_ns && LOAD(p->regrow) + 1 >= SHM_PACE_REGROW) {
        spin = spin ? spin * 2 : p->spin_max_ns / 32;
        STORE(p->spin_ns, spin < p->spin_max_ns ? spin : p->spin_max_ns);
        STORE(p->regrow, 0);
    } else if (spin < p->spin_max_ns) {
        STORE(p->regrow, LOAD(p->regrow) + 1);
    }
}

int shm__pace(struct shm_comm *c, struct shm_pace_wait *w)
{
    struct shm_pace *p = &c->pace;
    if (w->looks < 64) {
        w->looks++;
        shm__cpu_relax();
        return SHM_PACE_AGAIN;
    }
    uint64_t now = c->host->clock_ns();
    if (!w->started) {
        w->started = 1;
        w->t0 = now;
        uint64_t spin = c->cfg.spin_ns;
        if (c->cfg.spin_auto) {
            w->learns = !shares_core(c);
            spin = w->learns ? LOAD(p->spin_ns) : 0;
        }
        w->spin_until = now + spin;
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
        uint64_t back = c->host->clock_ns(), backoff = LOAD(p->backoff_ns);
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
    w->slept = 1;
    plx__slice_shorten(c->cfg.wait_slice_ns);
    return SHM_PACE_SLEEP;
}
