/* fiber.c - ranks as coroutines: plexus_sim_run_ranks runs every rank of a
 * world on the calling thread, each on a small stack of its own, so that
 * tens of thousands of ranks fit in one process where a thread per rank
 * does not. A rank runs until it waits for a message that has not arrived;
 * then the rank with the earliest virtual time among those that can go on
 * runs next. Messages are priced as they are posted, so running ranks in
 * virtual-time order charges shared links in the order the model's time
 * says, and a run gives the same answer every time. When no rank can go on,
 * every waiting rank's wait fails (a deadlock), never a hang. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "sim.h"

struct sim_fiber {
    ucontext_t uc;
    struct sim_sched *s;
    int rank;
    int queued, finished;
    double key;      /* virtual ns it may run from */
    uint64_t order;  /* ties: first queued, first run */
    char *stack;
    size_t map_bytes;
};

struct sim_sched {
    ucontext_t main;
    void (*body)(int rank, void *arg);
    void *arg;
    struct sim_fiber *fibers;
    struct sim_fiber **heap; /* runnable fibers, earliest key first */
    int nheap;
    uint64_t next_order;
    int deadlocked;
};

static _Thread_local struct sim_fiber *current;

struct sim_fiber *sim_fiber_self(void)
{
    return current;
}

static int before(const struct sim_fiber *x, const struct sim_fiber *y)
{
    return x->key < y->key || (x->key == y->key && x->order < y->order);
}

static void heap_push(struct sim_sched *s, struct sim_fiber *f)
{
    int i = s->nheap++;
    while (i > 0 && before(f, s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = f;
}

static struct sim_fiber *heap_pop(struct sim_sched *s)
{
    if (!s->nheap)
        return NULL;
    struct sim_fiber *top = s->heap[0], *last = s->heap[--s->nheap];
    int i = 0, n = s->nheap;
    for (;;) {
        int k = 2 * i + 1;
        if (k >= n)
            break;
        if (k + 1 < n && before(s->heap[k + 1], s->heap[k]))
            k++;
        if (!before(s->heap[k], last))
            break;
        s->heap[i] = s->heap[k];
        i = k;
    }
    s->heap[i] = last;
    return top;
}

void sim_fiber_wake(struct sim_fiber *f, double at_ns)
{
    if (!f || f == current || f->queued || f->finished) /* a running rank looks before it waits */
        return;
    f->queued = 1;
    f->key = at_ns;
    f->order = f->s->next_order++;
    heap_push(f->s, f);
}

int sim_fiber_block(void)
{
    struct sim_fiber *f = current;
    if (f->s->deadlocked)
        return -1;
    swapcontext(&f->uc, &f->s->main);
    return f->s->deadlocked ? -1 : 0;
}

static void fiber_main(void)
{
    struct sim_fiber *f = current;
    f->s->body(f->rank, f->s->arg);
    f->finished = 1; /* uc_link returns to the scheduler */
}

static int fiber_make(struct sim_sched *s, struct sim_fiber *f, int rank, size_t stack_bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    stack_bytes = (stack_bytes + page - 1) / page * page;
    f->s = s;
    f->rank = rank;
    f->map_bytes = stack_bytes + page;
    /* A guard page below the stack: an overflow faults instead of
     * writing into the next rank's stack. Untouched pages cost nothing. */
    void *m = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    mprotect(m, page, PROT_NONE);
    f->stack = m;
    if (getcontext(&f->uc) != 0) {
        munmap(m, f->map_bytes);
        return -1;
    }
    f->uc.uc_stack.ss_sp = (char *)m + page;
    f->uc.uc_stack.ss_size = stack_bytes;
    f->uc.uc_link = &s->main;
    makecontext(&f->uc, fiber_main, 0);
    return 0;
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

static int schedule(struct sim_sched *s, int n)
{
    int live = n, rc = 0;
    while (live > 0) {
        struct sim_fiber *f = heap_pop(s);
        if (!f) {
            if (s->deadlocked || !wake_deadlocked(s, n))
                break; /* cannot happen: woken fibers finish or wait no more */
            rc = PLX_ERR_TIMEOUT;
            continue;
        }
        f->queued = 0;
        current = f;
        swapcontext(&s->main, &f->uc);
        current = NULL;
        if (f->finished) {
            munmap(f->stack, f->map_bytes);
            f->stack = NULL;
            live--;
        }
    }
    return rc;
}

/* Runs body(rank, arg) for ranks 0..nranks-1 as coroutines of the calling
 * thread, each on a stack of stack_bytes, rank 0 first. A sim communicator
 * created inside body joins its world without waiting for the others, and
 * its waits hand the thread to the next rank instead of blocking; native
 * collectives are off (the core's algorithms run over point-to-point).
 * Returns 0, PLX_ERR_TIMEOUT when the ranks deadlocked (their waits
 * failed), or another error when the coroutines could not be made. */
PLX_BACKEND_EXPORT int plexus_sim_run_ranks(int nranks, size_t stack_bytes, void (*body)(int rank, void *arg),
                                            void *arg)
{
    if (nranks <= 0 || !body || current)
        return PLX_ERR_INVALID_ARG;
    struct sim_sched s = {.body = body, .arg = arg};
    s.fibers = calloc((size_t)nranks, sizeof *s.fibers);
    s.heap = calloc((size_t)nranks, sizeof *s.heap);
    int rc = s.fibers && s.heap ? 0 : PLX_ERR_NOMEM;
    int made = 0;
    while (!rc && made < nranks)
        if (fiber_make(&s, &s.fibers[made], made, stack_bytes) == 0)
            made++;
        else
            rc = PLX_ERR_NOMEM;
    if (!rc) {
        for (int i = 0; i < nranks; i++)
            sim_fiber_wake(&s.fibers[i], 0);
        rc = schedule(&s, nranks);
    } else {
        fprintf(stderr, "sim: cannot make the stack of rank %d of %d\n", made, nranks);
        for (int i = 0; i < made; i++)
            munmap(s.fibers[i].stack, s.fibers[i].map_bytes);
    }
    free(s.heap);
    free(s.fibers);
    return rc;
}
