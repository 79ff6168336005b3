/* wait_slice.c - a rank whose wait sleeps asks the scheduler for the
 * [shm] (or [tcp]) wait_slice time slice while it waits, and has its own
 * slice back once the operation returns: for a collective and a receive.
 *
 * Rank 1 arrives 300 ms late, so rank 0's wait sleeps. A watcher thread of
 * rank 0 reads rank 0's calling thread's slice (sched_getattr on its thread
 * id) every millisecond meanwhile and keeps the smallest it saw. Rank 0
 * must have seen the configured slice during the wait and its default one
 * after. Exits 77 where the kernel has no custom slices for fair tasks
 * (sched_getattr reports none), where there is nothing to see.
 * Run with plexus-run -n 2: wait_slice SLICE_US [BACKEND], with
 * PLEXUS_SHM_WAIT_SLICE (PLEXUS_TCP_WAIT_SLICE) set to SLICE_US us. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "thread_slice.h"

static pid_t caller;
static atomic_int watching;
static uint64_t smallest;

static void *watch(void *arg)
{
    (void)arg;
    while (atomic_load(&watching)) {
        uint64_t s = thread_slice_ns(caller);
        if (s && (!smallest || s < smallest))
            smallest = s;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void late(void)
{
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
}

/* Rank 0: run op while the watcher looks; check what it saw and the slice after. */
static int check(const char *what, int (*op)(struct plx_comm *, float *), struct plx_comm *c, float *buf,
                 uint64_t want, uint64_t own)
{
    pthread_t t;
    smallest = 0;
    atomic_store(&watching, 1);
    pthread_create(&t, NULL, watch, NULL);
    int rc = op(c, buf);
    atomic_store(&watching, 0);
    pthread_join(t, NULL);
    uint64_t after = thread_slice_ns(caller);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", what, plx_err_name(rc), plx_last_error());
        return 1;
    }
    int bad = 0;
    if (smallest != want) {
        fprintf(stderr, "FAIL %s: the smallest slice seen while waiting was %llu ns, want %llu\n", what,
                (unsigned long long)smallest, (unsigned long long)want);
        bad = 1;
    }
    if (after != own) {
        fprintf(stderr, "FAIL %s: slice after the op is %llu ns, was %llu before\n", what, (unsigned long long)after,
                (unsigned long long)own);
        bad = 1;
    }
    if (!bad)
        printf("%s: slice %llu ns while waiting, %llu ns after (its own)\n", what, (unsigned long long)smallest,
               (unsigned long long)after);
    return bad;
}

static int allreduce(struct plx_comm *c, float *buf)
{
    return plx_allreduce(c, buf, buf, 1024, PLX_F32, PLX_SUM);
}

static int receive(struct plx_comm *c, float *buf)
{
    return plx_recv(c, buf, 1024, PLX_F32, 1, 7);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: wait_slice SLICE_US [BACKEND] (as PLEXUS_SHM_WAIT_SLICE sets it)\n");
        return 2;
    }
    uint64_t want = strtoull(argv[1], NULL, 10) * 1000;
    caller = (pid_t)syscall(SYS_gettid);
    uint64_t own = thread_slice_ns(caller);
    if (!own) {
        printf("SKIP: this kernel reports no time slice for fair tasks (no custom slices)\n");
        return 77;
    }
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = argc > 2 ? argv[2] : "shm";
    o.timeout_ms = 60000;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        fprintf(stderr, "wait_slice: init: %s\n", plx_last_error());
        return 1;
    }
    int me = plx_comm_rank(c), bad = 0;
    float buf[1024] = {0};
    if (me == 1) {
        late();
        bad |= allreduce(c, buf) != 0;
        late();
        bad |= plx_send(c, buf, 1024, PLX_F32, 0, 7) != 0;
    } else {
        bad |= check("allreduce", allreduce, c, buf, want, own);
        bad |= check("recv", receive, c, buf, want, own);
    }
    bad |= plx_barrier(c) != 0;
    plx_comm_destroy(c);
    return bad;
}
