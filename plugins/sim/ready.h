/* ready.h - the coroutine scheduler's queue of runnable fibers (fiber.c),
 * earliest key first. Stability: internal to the plugin.
 *
 * A fiber is queued with the virtual time it may run from, and nearly
 * always that time is past every time queued before it: in a ring or a
 * tree, a message's arrival follows the sender's clock, and senders run in
 * time order. A heap of tens of thousands of fibers would sift every pop
 * from the root to a leaf, a chain of dependent reads whose deep levels
 * the ranks' stacks push out of the cache between pops. So a key goes to
 * the first of a few sorted runs whose last key is below it (a ring
 * buffer each, appended at its tail, read at its head: lines the hardware
 * fetches ahead); only a key below every run's tail goes to a small heap.
 * The least key is the least of the runs' heads and the heap's top, so
 * pops come in the same order as from one heap: the same answers. */
#ifndef PLX_SIM_READY_H
#define PLX_SIM_READY_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A key is one unsigned number: the bits of the virtual ns the fiber may
 * run from (a non-negative double orders as its bits do), then its queue
 * order (ties: first queued, first run), then the fiber's index. One
 * compare orders two keys, without a branch. Keys are unique. */
__extension__ typedef unsigned __int128 sim_key;

/* In a ring allreduce, four runs took all but a few percent of the keys. */
#define SIM_READY_RUNS 4
/* The heap is 4-ary: a node's four children fill one cache line ... */
#define SIM_HEAP_ARITY 4
/* ... since keys[i] lies at this offset in a line-aligned block. */
#define SIM_HEAP_KEY_SKEW (64 / sizeof(sim_key) - 1)

struct sim_run {
    sim_key *keys; /* a ring buffer of the queue's capacity */
    sim_key tail;  /* its last key (count > 0) */
    uint32_t head, count;
};

struct sim_ready {
    struct sim_run runs[SIM_READY_RUNS];
    uint32_t mask;       /* a run's capacity - 1 (a power of two) */
    int n;               /* keys queued, in the runs and the heap */
    int nheap;
    sim_key *heap;       /* earliest first */
    sim_key *heap_mem;   /* its line-aligned block */
    sim_key *runs_mem;
};

/* Room for capacity keys at once. 0, or -1 when out of memory (free with
 * ready_finish either way). */
static inline int ready_init(struct sim_ready *q, int capacity)
{
    memset(q, 0, sizeof *q);
    uint32_t cap = 1;
    while (cap < (uint32_t)capacity)
        cap <<= 1;
    q->mask = cap - 1;
    size_t heap_bytes = ((size_t)capacity + SIM_HEAP_KEY_SKEW) * sizeof(sim_key);
    q->heap_mem = aligned_alloc(64, (heap_bytes + 63) / 64 * 64);
    q->runs_mem = aligned_alloc(64, (size_t)SIM_READY_RUNS * cap * sizeof(sim_key));
    if (!q->heap_mem || !q->runs_mem)
        return -1;
    q->heap = q->heap_mem + SIM_HEAP_KEY_SKEW;
    for (int r = 0; r < SIM_READY_RUNS; r++)
        q->runs[r].keys = q->runs_mem + (size_t)r * cap;
    return 0;
}

static inline void ready_finish(struct sim_ready *q)
{
    free(q->heap_mem);
    free(q->runs_mem);
}

static inline void ready_heap_push(struct sim_ready *q, sim_key k)
{
    int i = q->nheap++;
    while (i > 0) {
        int up = (i - 1) / SIM_HEAP_ARITY;
        if (!(k < q->heap[up]))
            break;
        q->heap[i] = q->heap[up];
        i = up;
    }
    q->heap[i] = k;
}

/* The least of node i's children (i has one), and where it lies. */
static inline int ready_heap_least_child(const struct sim_ready *q, int i)
{
    int first = SIM_HEAP_ARITY * i + 1, best = first;
    int end = first + SIM_HEAP_ARITY < q->nheap ? first + SIM_HEAP_ARITY : q->nheap;
    for (int k = first + 1; k < end; k++)
        best = q->heap[k] < q->heap[best] ? k : best;
    return best;
}

static inline void ready_heap_drop_top(struct sim_ready *q)
{
    int n = --q->nheap, i = 0;
    sim_key last = q->heap[n];
    while (SIM_HEAP_ARITY * i + 1 < n) {
        int best = ready_heap_least_child(q, i);
        if (!(q->heap[best] < last))
            break;
        q->heap[i] = q->heap[best];
        i = best;
    }
    q->heap[i] = last;
}

/* The capacity bounds n: a run always has room. */
static inline void ready_push(struct sim_ready *q, sim_key k)
{
    q->n++;
    for (int r = 0; r < SIM_READY_RUNS; r++) {
        struct sim_run *run = &q->runs[r];
        if (!run->count || run->tail < k) {
            run->keys[(run->head + run->count++) & q->mask] = k;
            run->tail = k;
            return;
        }
    }
    ready_heap_push(q, k);
}

/* Where the least key lies: a run's index, SIM_READY_RUNS for the heap,
 * or -1 when the queue is empty; *k the key. */
static inline int ready_least(const struct sim_ready *q, sim_key *k)
{
    int at = -1;
    sim_key best = 0;
    if (q->nheap) {
        best = q->heap[0];
        at = SIM_READY_RUNS;
    }
    for (int r = 0; r < SIM_READY_RUNS; r++) {
        const struct sim_run *run = &q->runs[r];
        if (run->count) {
            sim_key h = run->keys[run->head];
            if (at < 0 || h < best) {
                best = h;
                at = r;
            }
        }
    }
    *k = best;
    return at;
}

/* Takes the least key from where ready_least found it. */
static inline void ready_drop(struct sim_ready *q, int at)
{
    q->n--;
    if (at == SIM_READY_RUNS) {
        ready_heap_drop_top(q);
        return;
    }
    struct sim_run *run = &q->runs[at];
    run->head = (run->head + 1) & q->mask;
    run->count--;
}

static inline void ready_consider(sim_key k, int *have, sim_key *best)
{
    if (!*have || k < *best)
        *best = k;
    *have = 1;
}

/* The key after the least (there are two or more): the least of the other
 * runs' heads, the next key of the least's own run or heap, and the heap's
 * top where the least came from a run. */
static inline sim_key ready_second(const struct sim_ready *q, int least_at)
{
    int have = 0;
    sim_key best = 0;
    if (least_at == SIM_READY_RUNS && q->nheap > 1)
        ready_consider(q->heap[ready_heap_least_child(q, 0)], &have, &best);
    else if (least_at != SIM_READY_RUNS && q->nheap)
        ready_consider(q->heap[0], &have, &best);
    for (int r = 0; r < SIM_READY_RUNS; r++) {
        const struct sim_run *run = &q->runs[r];
        uint32_t skip = r == least_at;
        if (run->count > skip)
            ready_consider(run->keys[(run->head + skip) & q->mask], &have, &best);
    }
    return best;
}

#endif
