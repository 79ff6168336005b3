/* test_ready.c - the coroutine scheduler's ready queue (plugins/sim/ready.h)
 * against a plain list scanned for its least: every pop, the least and the
 * second least agree, for keys that come in order (the runs), out of order
 * (the heap) and mixed, while the runs' ring buffers wrap (checked, with
 * the heap's use, so the test covers both). */
#include <stdio.h>
#include <stdlib.h>

#include "ready.h"

#define CAP 1000

static sim_key live[CAP];
static int nlive;

/* The first failure ends the test: the queue and the list differ from then on. */
static void fail(const char *what, int step)
{
    fprintf(stderr, "FAIL: %s at step %d\n", what, step);
    exit(1);
}

/* The index in live[] of its least key, other than skip (-1: none). */
static int least_of(int skip)
{
    int best = -1;
    for (int i = 0; i < nlive; i++)
        if (i != skip && (best < 0 || live[i] < live[best]))
            best = i;
    return best;
}

static void push(struct sim_ready *q, sim_key k)
{
    ready_push(q, k);
    live[nlive++] = k;
}

static void pop(struct sim_ready *q, int step)
{
    sim_key k;
    int at = ready_least(q, &k);
    int want = least_of(-1);
    if (want < 0) {
        if (at >= 0)
            fail("an empty queue has a least key", step);
        return;
    }
    if (at < 0 || k != live[want]) {
        fail("least key", step);
        return;
    }
    if (nlive > 1 && ready_second(q, at) != live[least_of(want)])
        fail("second least key", step);
    ready_drop(q, at);
    live[want] = live[--nlive];
    if (q->n != nlive)
        fail("count", step);
}

/* Keys as the scheduler makes them: a time, then a unique order. */
static sim_key key(uint64_t ns, uint64_t order)
{
    return (sim_key)ns << 64 | order;
}

int main(void)
{
    struct sim_ready q;
    if (ready_init(&q, CAP) != 0) {
        fprintf(stderr, "FAIL: ready_init\n");
        return 1;
    }
    srand(7);
    uint64_t order = 0, clock = 1000;
    int in_heap_seen = 0, wrapped = 0;
    for (int step = 0; step < 200000; step++) {
        int phase = step / 20000 % 4; /* in order, a few streams, random, bursts of equal times */
        int want_push = nlive < CAP && (nlive == 0 || rand() % 100 < (nlive < CAP / 2 ? 55 : 45));
        if (want_push) {
            uint64_t ns;
            if (phase == 0)
                ns = clock + (uint64_t)(rand() % 10);
            else if (phase == 1)
                ns = clock + (uint64_t)(rand() % 5) * 1000; /* five latencies: out of order across them */
            else if (phase == 2)
                ns = (uint64_t)(rand() % 100000);
            else
                ns = clock;
            push(&q, key(ns, order++));
            clock += (uint64_t)(rand() % 3);
            if (q.nheap)
                in_heap_seen = 1;
            for (int r = 0; r < SIM_READY_RUNS; r++)
                if (q.runs[r].head + q.runs[r].count > q.mask + 1)
                    wrapped = 1;
        } else {
            pop(&q, step);
        }
    }
    while (nlive)
        pop(&q, -1);
    pop(&q, -2); /* empty */
    ready_finish(&q);
    if (!in_heap_seen)
        fail("no key ever reached the heap: the test did not cover it", -1);
    if (!wrapped)
        fail("no run's ring buffer wrapped: the test did not cover it", -1);
    printf("ok: 200000 steps, least and second least agree with a scan\n");
    return 0;
}
