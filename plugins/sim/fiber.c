/* fiber.c - ranks as coroutines: plexus_sim_run_ranks runs every rank of a
 * world on the calling thread, each on a small stack of its own, so that
 * tens of thousands of ranks fit in one process where a thread per rank
 * does not. A rank runs until it waits for a message that has not arrived;
 * then the rank with the earliest virtual time among those that can go on
 * runs next. Messages are priced as they are posted, so running ranks in
 * virtual-time order charges shared links in the order the model's time
 * says, and a run gives the same answer every time. When no rank can go on,
 * every waiting rank's wait fails (a deadlock), never a hang. */
/* _longjmp between stacks is what the fortified one refuses. */
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "ready.h"
#include "sim.h"

/* A rank is entered the first time through its ucontext (which sets up
 * its stack), and from then on with _setjmp/_longjmp, which save no signal
 * mask: swapcontext's two system calls per switch were a third of a run. */
struct sim_fiber {
    /* What a switch to it reads, then the registers _longjmp restores: its
     * first two lines, which the switch before it prefetches (jmp_buf's
     * signal mask, which _longjmp does not restore, comes after). */
    _Alignas(64) int started;
    int queued, finished;
    int rank;
    struct sim_sched *s;
    double clock_ns; /* model: the rank's virtual time, shared by all its communicators */
    const void *hot[SIM_FIBER_HOT]; /* what it reads first when it resumes (sim_fiber_block) */
    jmp_buf jb;
    int phased;      /* waits in plexus_sim_run_phase */
};

struct sim_sched {
    ucontext_t main;  /* where the first entry saves the scheduler: never resumed */
    ucontext_t *first; /* each fiber's first entry: apart, it keeps fibers small */
    jmp_buf main_jb;
    void (*body)(int rank, void *arg);
    void *arg;
    struct sim_fiber *fibers;
    const char **sps;          /* where each fiber's stack stood when it last handed the thread on,
                                * dense: read a switch ahead without a miss on its fiber */
    struct sim_ready ready;    /* the runnable fibers, earliest first (ready.h) */
    int index_bits;            /* a key's low bits: the fiber's index */
    uint64_t next_order;
    int deadlocked;
    struct sim_fiber *cur; /* the fiber running now (NULL: the scheduler) */
    int n;
    int live, phase_n; /* unfinished ranks; of them, those in plexus_sim_run_phase */
    double *queues; /* the model's link queues (model.c), made on first use */
};

/* The run of coroutines on the calling thread (NULL: a thread rank): the
 * one documented exception to "no plugin thread-locals", since the fiber
 * stack switches ranks under the thread and comm_create must find its rank.
 * Its running fiber is s->cur: a switch writes no thread-local, which in a
 * plugin costs a call each (__tls_get_addr), several per message. */
static _Thread_local struct sim_sched *running;

struct sim_fiber *sim_fiber_self(void)
{
    return running ? running->cur : NULL;
}

int sim_fiber_rank(const struct sim_fiber *f)
{
    return f->rank;
}

const void *sim_fiber_sched(const struct sim_fiber *f)
{
    return f->s;
}

double *sim_fiber_clock(struct sim_fiber *f)
{
    return &f->clock_ns;
}

int sim_fiber_count(const struct sim_fiber *f)
{
    return f->s->n;
}

double *sim_fiber_queues(struct sim_fiber *f)
{
    if (!f->s->queues)
        f->s->queues = calloc(SIM_QUEUE_DOUBLES(f->s->n), sizeof *f->s->queues);
    return f->s->queues;
}

static sim_key key_of(const struct sim_sched *s, double ns, const struct sim_fiber *f)
{
    double at = ns > 0 ? ns : 0; /* never negative; -0.0 and NaN as 0 */
    uint64_t bits;
    memcpy(&bits, &at, sizeof bits);
    uint64_t low = s->next_order << s->index_bits | (uint64_t)(f - s->fibers);
    return (sim_key)bits << 64 | low;
}

static double key_ns(sim_key k)
{
    uint64_t bits = (uint64_t)(k >> 64);
    double ns;
    memcpy(&ns, &bits, sizeof ns);
    return ns;
}

static struct sim_fiber *key_fiber(const struct sim_sched *s, sim_key k)
{
    return &s->fibers[(uint64_t)k & ((UINT64_C(1) << s->index_bits) - 1)];
}

static void queue_fiber(struct sim_sched *s, struct sim_fiber *f, double ns)
{
    ready_push(&s->ready, key_of(s, ns, f));
    s->next_order++;
}

/* The runnable fiber with the least key, taken off the queue (NULL: none). */
static struct sim_fiber *next_fiber(struct sim_sched *s)
{
    sim_key k;
    int at = ready_least(&s->ready, &k);
    if (at < 0)
        return NULL;
    ready_drop(&s->ready, at);
    return key_fiber(s, k);
}

/* A fiber resumes by returning through the frames of its wait, each on a
 * stack line that thousands of other ranks' stacks pushed out of the
 * cache: fetch them while the fiber before it runs. In a ring allreduce
 * the frames from the switch up to the algorithm's loop span about 0.9
 * KiB; the algorithm's context and then the call's arguments, which every
 * step reads, end 1.4 KiB above the switch. */
#define SIM_PREFETCH_BYTES 1472
/* ... and the switch's own frame below sp: the registers it saved, the
 * first thing the fiber reads, lie on the line before sp's where sp is
 * near a line's start. */
#define SIM_PREFETCH_BELOW 64

/* The next fiber's lines, while the one before it runs: its fiber, its
 * stack, and the two lines each of what it said it reads first. Inlined
 * always: GCC takes a call of a function that only prefetches for one
 * without effects and drops it. */
static inline __attribute__((always_inline)) void prefetch_next(const struct sim_sched *s, const struct sim_fiber *e)
{
    __builtin_prefetch(e, 1, 3);
    __builtin_prefetch((const char *)e + 64, 1, 3);
    const char *sp = s->sps[e - s->fibers];
    if (sp)
        for (int i = -SIM_PREFETCH_BELOW; i < SIM_PREFETCH_BYTES; i += 64)
            __builtin_prefetch(sp + i, 1, 3);
    for (int k = 0; k < SIM_FIBER_HOT; k++)
        if (e->hot[k]) {
            __builtin_prefetch(e->hot[k], 1, 3);
            __builtin_prefetch((const char *)e->hot[k] + 64, 1, 3);
        }
}

/* The fiber after the next (least_at: where the next one's key lies), a
 * switch ahead of its full prefetch: its fiber's lines, and the line at
 * its sp, whose page that prefetch then finds mapped. Its sp comes from
 * the dense array, so this read misses nowhere. */
static inline __attribute__((always_inline)) void prefetch_after_next(const struct sim_sched *s, int least_at)
{
    if (s->ready.n < 2)
        return;
    const struct sim_fiber *e = key_fiber(s, ready_second(&s->ready, least_at));
    __builtin_prefetch(e, 1, 3);
    __builtin_prefetch((const char *)e + 64, 1, 3);
    const char *sp = s->sps[e - s->fibers];
    if (sp)
        __builtin_prefetch(sp, 1, 3);
}

/* Hand the thread on: straight to the next runnable fiber where it has
 * run before (one switch, not two through the scheduler), else to the
 * scheduler, which starts fibers and sees deadlocks and phases. */
static void to_scheduler(struct sim_fiber *f)
{
    struct sim_sched *s = f->s;
    s->sps[f - s->fibers] = __builtin_frame_address(0);
    if (_setjmp(f->jb))
        return;
    sim_key k;
    int at = ready_least(&s->ready, &k);
    if (at >= 0 && key_fiber(s, k)->started) {
        ready_drop(&s->ready, at);
        struct sim_fiber *next = key_fiber(s, k);
        next->queued = 0;
        s->cur = next;
        at = ready_least(&s->ready, &k);
        if (at >= 0) {
            prefetch_next(s, key_fiber(s, k));
            prefetch_after_next(s, at);
        }
        _longjmp(next->jb, 1);
    }
    _longjmp(s->main_jb, 1);
}

void sim_fiber_wake(struct sim_fiber *f, double at_ns)
{
    if (!f || f == f->s->cur || f->queued || f->finished) /* a running rank looks before it waits */
        return;
    f->queued = 1;
    queue_fiber(f->s, f, at_ns);
}

int sim_fiber_block(const struct sim_fiber *of_run, const void *const hot[SIM_FIBER_HOT])
{
    struct sim_fiber *f = of_run->s->cur;
    if (f->s->deadlocked)
        return -1;
    memcpy(f->hot, hot, sizeof f->hot);
    to_scheduler(f);
    return f->s->deadlocked ? -1 : 0;
}

void sim_fiber_catch_up(const struct sim_fiber *of_run, const void *const hot[SIM_FIBER_HOT])
{
    struct sim_fiber *f = of_run->s->cur;
    struct sim_sched *s = f->s;
    sim_key k;
    if (ready_least(&s->ready, &k) < 0 || !(key_ns(k) < f->clock_ns))
        return;
    memcpy(f->hot, hot, sizeof f->hot);
    f->queued = 1;
    queue_fiber(s, f, f->clock_ns);
    to_scheduler(f);
}

static void fiber_main(void)
{
    struct sim_fiber *f = running->cur;
    f->s->body(f->rank, f->s->arg);
    f->finished = 1;
    _longjmp(f->s->main_jb, 1);
}

/* Run f until it waits or ends. */
static void enter(struct sim_sched *s, struct sim_fiber *f)
{
    if (_setjmp(s->main_jb))
        return;
    if (f->started)
        _longjmp(f->jb, 1);
    f->started = 1;
    swapcontext(&s->main, &s->first[f - s->fibers]);
}

/* Stacks come from one mapping for all ranks: a mapping each (with a
 * guard page, two) would exhaust the process's mappings (vm.max_map_count,
 * 65,530) at tens of thousands of ranks, and malloc, refused a mapping,
 * would then put every large buffer on the heap. Untouched pages cost
 * nothing. */
static void fiber_make(struct sim_sched *s, struct sim_fiber *f, int rank, char *stack, size_t stack_bytes)
{
    f->s = s;
    f->rank = rank;
    ucontext_t *uc = &s->first[rank];
    getcontext(uc);
    uc->uc_stack.ss_sp = stack;
    uc->uc_stack.ss_size = stack_bytes;
    uc->uc_link = NULL; /* fiber_main never returns */
    makecontext(uc, fiber_main, 0);
}

/* No rank can go on: wake every unfinished one, whose waits now fail. */
static int wake_deadlocked(struct sim_sched *s, int n)
{
    s->deadlocked = 1;
    int woken = 0;
    for (int i = 0; i < n; i++)
        if (!s->fibers[i].finished) {
            sim_fiber_wake(&s->fibers[i], 0);
            woken++;
        }
    return woken;
}

/* Every unfinished rank waits in plexus_sim_run_phase: all of them run
 * again from virtual time 0, idle links, in rank order. */
static void phase_release(struct sim_sched *s)
{
    s->phase_n = 0;
    if (s->queues)
        memset(s->queues, 0, SIM_QUEUE_DOUBLES(s->n) * sizeof *s->queues);
    for (int i = 0; i < s->n; i++) {
        struct sim_fiber *g = &s->fibers[i];
        if (!g->phased)
            continue;
        g->phased = 0;
        g->clock_ns = 0;
        g->queued = 1;
        queue_fiber(s, g, 0);
    }
}

static int schedule(struct sim_sched *s, int n)
{
    int rc = 0;
    s->live = n;
    while (s->live > 0) {
        struct sim_fiber *f = next_fiber(s);
        if (!f) {
            if (s->deadlocked || !wake_deadlocked(s, n))
                break; /* cannot happen: woken fibers finish or wait no more */
            rc = SIM_DEADLOCK;
            continue;
        }
        f->queued = 0;
        s->cur = f;
        enter(s, f);
        f = s->cur; /* the fiber that handed back: fibers switch among themselves */
        s->cur = NULL;
        if (f->finished && --s->live > 0 && s->phase_n == s->live)
            phase_release(s); /* the others wait for no one now */
    }
    return rc;
}

/* Coroutine ranks only: waits until every unfinished rank of the run has
 * called it, then starts them all again from virtual time 0 with idle
 * links, in rank order, as a fresh run starts: several measurements in one
 * run of ranks, on the same communicators. 0, or SIM_DEADLOCK when the
 * other ranks wait for messages instead. */
PLX_BACKEND_EXPORT int plexus_sim_run_phase(void)
{
    struct sim_fiber *f = sim_fiber_self();
    if (!f)
        return PLX_ERR_INVALID_USAGE;
    struct sim_sched *s = f->s;
    if (s->deadlocked)
        return SIM_DEADLOCK;
    f->phased = 1;
    if (++s->phase_n == s->live)
        phase_release(s);
    to_scheduler(f);
    return s->deadlocked ? SIM_DEADLOCK : 0;
}

/* Runs body(rank, arg) for ranks 0..nranks-1 as coroutines of the calling
 * thread, each on a stack of stack_bytes, rank 0 first. A sim communicator
 * created inside body joins its world without waiting for the others, and
 * its waits hand the thread to the next rank instead of blocking; native
 * collectives are off (the core's algorithms run over point-to-point).
 * Returns 0, SIM_DEADLOCK when the ranks deadlocked (their waits
 * failed with it), or another error when the coroutines could not be made. */
PLX_BACKEND_EXPORT int plexus_sim_run_ranks(int nranks, size_t stack_bytes, void (*body)(int rank, void *arg),
                                            void *arg)
{
    if (nranks <= 0 || !body || running)
        return PLX_ERR_INVALID_ARG;
    struct sim_sched s = {.body = body, .arg = arg, .n = nranks};
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    stack_bytes = (stack_bytes + page - 1) / page * page;
    size_t map_bytes = stack_bytes * (size_t)nranks;
    char *stacks = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    s.fibers = aligned_alloc(_Alignof(struct sim_fiber), (size_t)nranks * sizeof *s.fibers); /* size: a multiple */
    if (s.fibers)
        memset(s.fibers, 0, (size_t)nranks * sizeof *s.fibers);
    while ((1L << s.index_bits) < nranks)
        s.index_bits++;
    int queue_ok = ready_init(&s.ready, nranks) == 0;
    s.first = calloc((size_t)nranks, sizeof *s.first);
    s.sps = calloc((size_t)nranks, sizeof *s.sps);
    int rc = PLX_ERR_NOMEM;
    if (stacks != MAP_FAILED && s.fibers && queue_ok && s.first && s.sps) {
        for (int i = 0; i < nranks; i++) {
            fiber_make(&s, &s.fibers[i], i, stacks + (size_t)i * stack_bytes, stack_bytes);
            sim_fiber_wake(&s.fibers[i], 0);
        }
        running = &s;
        rc = schedule(&s, nranks);
        running = NULL;
    } else {
        fprintf(stderr, "sim: no memory for %d ranks (stacks of %zu bytes, fibers, their run queue)\n", nranks,
                stack_bytes);
    }
    if (stacks != MAP_FAILED)
        munmap(stacks, map_bytes);
    free(s.queues);
    free(s.first);
    free(s.sps);
    ready_finish(&s.ready);
    free(s.fibers);
    return rc;
}
