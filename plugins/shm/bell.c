/* bell.c - how point-to-point waits: one doorbell word per rank (a futex in
 * its struct shm_p2p_ctl) that every event for that rank bumps: a sender
 * wrote a frame into one of its rings, a receiver freed space in a ring it
 * writes, an acknowledgement came. A waiter reads the bell, makes progress,
 * and sleeps on the futex only while the bell still holds what it read, so
 * no event between the two is lost. Sleepers register in the block so a
 * ringer makes the system call only when someone sleeps.
 *
 * Also here: whether a peer's process is gone, the same test sync.c makes
 * for collectives (pidfd, else kill(pid, 0) and its /proc state). */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"


void shm__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void shm__bell_ring(struct shm_comm *c, int r)
{
    struct shm_p2p_ctl *b = shm__p2p_ctl(c, r);
    __atomic_add_fetch(&b->bell, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&b->sleepers, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &b->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void shm__bell_sleep(struct shm_comm *c, uint32_t seen, uint64_t deadline_ns, int slice_ms)
{
    struct shm_p2p_ctl *b = shm__p2p_ctl(c, c->rank);
    uint64_t now = c->host->clock_ns();
    if (now >= deadline_ns)
        return;
    uint64_t ns = (uint64_t)slice_ms * 1000000u;
    if (deadline_ns - now < ns)
        ns = deadline_ns - now;
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    __atomic_add_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&b->bell, __ATOMIC_SEQ_CST) == seen)
        syscall(SYS_futex, &b->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
    __atomic_sub_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
}

int shm__peer_dead(struct shm_comm *c, int r)
{
    if (c->pidfd && c->pidfd[r] >= 0) {
        struct pollfd p = {.fd = c->pidfd[r], .events = POLLIN};
        return poll(&p, 1, 0) > 0;
    }
    int32_t pid = __atomic_load_n(&shm__ctl(c, r)->pid, __ATOMIC_ACQUIRE);
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *e = strrchr(buf, ')');
    return e && e[1] == ' ' && (e[2] == 'Z' || e[2] == 'X');
}
