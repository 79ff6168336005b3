/* slice.c - a waiting thread's scheduler time slice.
 *
 * A rank about to sleep until a peer arrives asks the scheduler for a short
 * time slice (sched_setattr's sched_runtime, which EEVDF kernels, Linux 6.12
 * and later, take as a fair task's slice) until its operation ends. Beside
 * a foreign busy process on its core, a woken rank with the default slice
 * waits until that process's slice runs out before it runs again; with a
 * shorter one its wake-up preempts at once. Kernels without custom slices
 * ignore the field: the probe says which, for plexus-info. The slice goes
 * back to what it was when the operation ends, so the caller's own compute
 * keeps its slice. Per thread, as scheduling attributes are. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "slice.h"

/* The kernel's struct plx__sched_attr (its first version, which every kernel
 * with sched_setattr takes): linux/sched/types.h clashes with sched.h. */
struct plx__sched_attr {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
};

/* The calling thread's slice before plx__slice_shorten, while shortened:
 * per thread, as the scheduling attributes are. In a pthread key, not
 * _Thread_local: this file is linked into dlopen'ed plugins, and gcc 12's
 * LeakSanitizer crashes now and then at exit walking the dynamic TLS of a
 * plugin whose block a thread never touched. */
struct slice_state {
    int shortened;
    uint64_t old_ns;
};

static pthread_key_t slice_key;
static pthread_once_t slice_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void make_key(void)
{
    key_ok = pthread_key_create(&slice_key, free) == 0;
}

/* This thread's state; created when asked for (NULL if it cannot be). */
static struct slice_state *state(int create)
{
    pthread_once(&slice_once, make_key);
    if (!key_ok)
        return NULL;
    struct slice_state *s = pthread_getspecific(slice_key);
    if (!s && create && (s = calloc(1, sizeof *s)) && pthread_setspecific(slice_key, s) != 0) {
        free(s);
        s = NULL;
    }
    return s;
}

static int get_attr(struct plx__sched_attr *a)
{
    memset(a, 0, sizeof *a);
    return (int)syscall(SYS_sched_getattr, 0, a, sizeof *a, 0);
}

static int set_runtime(struct plx__sched_attr *a, uint64_t ns)
{
    a->size = sizeof *a;
    a->sched_flags = 0;
    a->sched_runtime = ns;
    return (int)syscall(SYS_sched_setattr, 0, a, 0);
}

void plx__slice_shorten(uint64_t ns)
{
    struct slice_state *slice = ns ? state(1) : NULL;
    if (!slice || slice->shortened)
        return;
    struct plx__sched_attr a;
    /* Only fair tasks: a real-time or deadline thread keeps its policy. */
    if (get_attr(&a) || (a.sched_policy != SCHED_OTHER && a.sched_policy != SCHED_BATCH))
        return;
    uint64_t old = a.sched_runtime;
    if (old && old <= ns)
        return;
    if (set_runtime(&a, ns) == 0) {
        slice->shortened = 1;
        slice->old_ns = old;
    }
}

void plx__slice_restore(void)
{
    struct slice_state *slice = state(0);
    if (!slice || !slice->shortened)
        return;
    slice->shortened = 0;
    struct plx__sched_attr a;
    if (get_attr(&a) == 0)
        set_runtime(&a, slice->old_ns);
}

uint64_t plx__slice_ns(void)
{
    struct plx__sched_attr a;
    if (get_attr(&a) || (a.sched_policy != SCHED_OTHER && a.sched_policy != SCHED_BATCH))
        return 0;
    return a.sched_runtime;
}

int plx__slice_probe(uint64_t ns, char *why, size_t len)
{
    struct plx__sched_attr a;
    if (!ns) {
        snprintf(why, len, "off (0)");
        return 0;
    }
    if (get_attr(&a)) {
        snprintf(why, len, "unavailable: sched_getattr failed (%s)", strerror(errno));
        return 0;
    }
    if (!a.sched_runtime) {
        snprintf(why, len, "no effect: this kernel has no custom slices for fair tasks (sched_getattr reports none)");
        return 0;
    }
    snprintf(why, len, "this kernel takes custom slices (a thread's default here is %llu us)",
             (unsigned long long)(a.sched_runtime / 1000));
    return 1;
}

