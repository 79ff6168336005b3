/* thread_slice.h - a thread's scheduler slice as the kernel reports it
 * (sched_getattr's runtime: EEVDF's slice; 0 where the kernel gives none),
 * for the shm tests that check waits against it. */
#ifndef PLEXUS_TEST_THREAD_SLICE_H
#define PLEXUS_TEST_THREAD_SLICE_H

#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

struct sched_attr_v0 {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

/* tid 0: the calling thread. */
static inline uint64_t thread_slice_ns(pid_t tid)
{
    struct sched_attr_v0 a;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, tid, &a, sizeof a, 0))
        return 0;
    return a.runtime;
}

#endif
