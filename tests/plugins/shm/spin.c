/* spin.c - how a waiting shm rank spends its wait ([shm] spin_ns = auto):
 * it spins while its peer runs on another CPU, sleeps while they share
 * one, and stops spinning for a peer that keeps it waiting far longer than
 * a spin lasts.
 *
 * Two ranks; rank 1 busies itself for 20 us before each 8-byte allreduce,
 * so rank 0 waits in every one. Rank 0 counts its calling thread's
 * voluntary context switches (a futex sleep is one) and CPU time
 * (getrusage RUSAGE_THREAD) over each phase:
 *   apart:    each rank bound to a CPU of its own: rank 0 must catch most
 *             arrivals spinning (fewer sleeps than a quarter of the ops);
 *   together: both bound to one CPU: rank 0 must sleep, so the peer it
 *             waits for gets the core at once: its CPU time stays below a
 *             sixteenth of a full spin per wait (a rank that spun there
 *             would keep the core for its time slice on every wait);
 *   slow:     apart again, rank 1 sleeps 40 ms before each allreduce: rank
 *             0's spin must shrink, so its CPU time stays below a third of
 *             what a full spin per wait would cost.
 * Counts and CPU time, not wall time: a busy machine makes the phases
 * slower, not wrong.
 * Exits 77 where this process may run on fewer than two CPUs.
 * Run with plexus-run -n 2. */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "thread_slice.h"

#define OPS 2000
#define SLOW_OPS 25

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void busy_us(unsigned us)
{
    uint64_t end = now_ns() + (uint64_t)us * 1000u;
    while (now_ns() < end) {
    }
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* What the plugin bounds a spin by: twice the thread's slice as the kernel
 * reports it, else its default formula (plugins/shm/pace.c). */
static uint64_t spin_bound_ns(void)
{
    uint64_t slice = thread_slice_ns(0);
    if (slice)
        return 2 * slice;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t scale = 1;
    for (long k = n < 8 ? n : 8; k > 1; k /= 2)
        scale++;
    return 2 * 750000u * scale;
}

struct use {
    long switches;
    uint64_t cpu_ns;
};

static struct use used(void)
{
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return (struct use){u.ru_nvcsw, ((uint64_t)u.ru_utime.tv_sec + (uint64_t)u.ru_stime.tv_sec) * 1000000000u +
                                        ((uint64_t)u.ru_utime.tv_usec + (uint64_t)u.ru_stime.tv_usec) * 1000u};
}

static int bind_to(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return sched_setaffinity(0, sizeof s, &s);
}

/* ops allreduces, rank 1 delayed by delay() before each; rank 0's use. */
static int phase(struct plx_comm *c, int me, int ops, void (*delay)(void), struct use *d)
{
    float x = 1;
    if (plx_barrier(c))
        return 1;
    struct use a = used();
    for (int i = 0; i < ops; i++) {
        if (me == 1)
            delay();
        if (plx_allreduce(c, &x, &x, 1, PLX_F32, PLX_SUM)) {
            fprintf(stderr, "rank %d: allreduce %d: %s\n", me, i, plx_last_error());
            return 1;
        }
    }
    struct use b = used();
    d->switches = b.switches - a.switches;
    d->cpu_ns = b.cpu_ns - a.cpu_ns;
    return 0;
}

static void short_delay(void)
{
    busy_us(20);
}

static void long_delay(void)
{
    sleep_ms(40);
}

int main(void)
{
    cpu_set_t mine;
    int cpus[2], n = 0;
    if (sched_getaffinity(0, sizeof mine, &mine) == 0)
        for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
            if (CPU_ISSET(i, &mine))
                cpus[n++] = i;
    if (n < 2) {
        printf("SKIP: this process may run on %d CPU(s); the phases need two\n", n);
        return 77;
    }
    const char *r = getenv("LOCAL_RANK"); /* plexus-run sets it */
    int me = r ? atoi(r) : 0;
    /* bound before the communicator exists, as a launcher binds ranks */
    if (bind_to(cpus[me == 1]))
        return perror("sched_setaffinity"), 1;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "shm";
    o.timeout_ms = 120000;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        fprintf(stderr, "spin: init: %s\n", plx_last_error());
        return 1;
    }
    me = plx_comm_rank(c);
    struct use apart, slow, together;
    /* after each binding a few operations first, so every rank has
     * published the CPU it now runs on */
    int bad = phase(c, me, OPS, short_delay, &apart);
    if (!bad && bind_to(cpus[0]))
        bad = (perror("sched_setaffinity"), 1);
    bad = bad || phase(c, me, 4, short_delay, &together) || phase(c, me, OPS / 4, short_delay, &together);
    if (!bad && bind_to(cpus[me == 1]))
        bad = (perror("sched_setaffinity"), 1);
    bad = bad || phase(c, me, 4, short_delay, &slow) || phase(c, me, SLOW_OPS, long_delay, &slow);
    if (!bad && me == 0) {
        uint64_t full = SLOW_OPS * spin_bound_ns();
        printf("apart: %ld sleeps in %d waits; together: %.1f ms of CPU and %ld sleeps in %d waits; slow: %.1f ms of "
               "CPU in %d waits (a full spin each: %.1f ms)\n", apart.switches, OPS, together.cpu_ns / 1e6,
               together.switches, OPS / 4, slow.cpu_ns / 1e6, SLOW_OPS, full / 1e6);
        if (apart.switches >= OPS / 4) {
            fprintf(stderr, "FAIL apart: rank 0 slept %ld times in %d waits for a peer on another CPU (want < %d)\n",
                    apart.switches, OPS, OPS / 4);
            bad = 1;
        }
        if (slow.cpu_ns >= full / 3) {
            fprintf(stderr, "FAIL slow: rank 0 used %.1f ms of CPU waiting %d times for a peer 40 ms late (want < %.1f)\n",
                    slow.cpu_ns / 1e6, SLOW_OPS, full / 3e6);
            bad = 1;
        }
        uint64_t spun = (uint64_t)(OPS / 4) * spin_bound_ns() / 16;
        if (together.cpu_ns >= spun) {
            fprintf(stderr, "FAIL together: rank 0 used %.1f ms of CPU waiting %d times for a peer on its own CPU (want "
                    "< %.1f: it spins)\n", together.cpu_ns / 1e6, OPS / 4, spun / 1e6);
            bad = 1;
        }
    }
    if (plx_barrier(c))
        bad = 1;
    plx_comm_destroy(c);
    return bad;
}
