/* run_sweep.c - find and kill every process of a plexus-run job by the mark
 * in its environment, and the watchdog that does so when plexus-run dies. */
#include "run_sweep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int run_random_hex(char *out, size_t raw_len)
{
    unsigned char raw[32];
    size_t got = 0;
    if (raw_len > sizeof raw)
        return -1;
    while (got < raw_len) {
        ssize_t k = getrandom(raw + got, raw_len - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    for (size_t i = 0; i < raw_len; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    memset(raw, 0, sizeof raw);
    return 0;
}

int run_mark_make(char *out, size_t len)
{
    static const char name[] = "PLEXUS_RUN_JOB=";
    const size_t raw_len = 16;
    if (len < sizeof name + 2 * raw_len)
        return -1;
    memcpy(out, name, sizeof name - 1);
    return run_random_hex(out + sizeof name - 1, raw_len);
}

/* Whether process pid's initial environment holds mark as a whole entry.
 * An exiting process (its memory gone) and a zombie read empty: no. */
static int has_mark(long pid, const char *mark)
{
    char path[64], *buf = NULL;
    size_t n = 0, cap = 0;
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    for (;;) {
        if (cap - n < 4096) {
            char *more = realloc(buf, cap + 65536);
            if (!more)
                break;
            buf = more;
            cap += 65536;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    size_t ml = strlen(mark);
    int found = 0;
    for (size_t at = 0; at + ml <= n && !found;) { /* entry by entry: NAME=value\0 */
        char *end = memchr(buf + at, '\0', n - at);
        size_t el = end ? (size_t)(end - (buf + at)) : n - at;
        found = el == ml && !memcmp(buf + at, mark, ml);
        at += el + 1;
    }
    free(buf);
    return found;
}

/* One pass over /proc: SIGKILL each marked process and its process group
 * (unless that is the caller's). Returns how many it found. */
static int sweep_once(const char *mark)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    pid_t self = getpid(), own_group = getpgrp();
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == self || !has_mark(pid, mark))
            continue;
        pid_t group = getpgid((pid_t)pid);
        if (group > 0 && group != own_group)
            kill(-group, SIGKILL);
        kill((pid_t)pid, SIGKILL);
        found++;
    }
    closedir(d);
    return found;
}

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

int run_sweep(const char *mark, int bound_ms)
{
    struct timespec t0, pause = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Again while any is found: one may fork between the reading and the kill. */
    int first = sweep_once(mark), found = first;
    while (found && elapsed_ms(&t0) < bound_ms) {
        nanosleep(&pause, NULL);
        found = sweep_once(mark);
    }
    return first;
}

/* The watchdog's life: wait for plexus-run's word or its end. Its own
 * session, so neither a group signal to plexus-run nor a terminal's reaches it. */
static _Noreturn void watch(int rd, const char *mark)
{
    setsid();
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) { /* holds no one's output open */
        dup2(null, 0);
        dup2(null, 1);
        close(null);
    }
    char c;
    ssize_t k;
    do
        k = read(rd, &c, 1);
    while (k < 0 && errno == EINTR);
    if (k == 1)
        _exit(0);
    int n = run_sweep(mark, 2000);
    if (n)
        fprintf(stderr, "plexus-run: the launcher died; its watchdog killed what was left of the job (%d marked "
                "process(es) and their process groups)\n", n);
    _exit(0);
}

int run_watchdog_start(const char *mark)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return -1;
    /* Twice forked, so it is no child of plexus-run (whose ranks are). */
    pid_t a = fork();
    if (a == 0) {
        close(p[1]);
        pid_t w = fork();
        if (w == 0)
            watch(p[0], mark);
        _exit(w < 0);
    }
    close(p[0]);
    int st = 0;
    while (a > 0 && waitpid(a, &st, 0) < 0 && errno == EINTR) {
    }
    if (a < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        close(p[1]);
        errno = a < 0 ? errno : EAGAIN;
        return -1;
    }
    return p[1];
}

void run_watchdog_done(int fd)
{
    if (fd < 0)
        return;
    ssize_t k;
    do
        k = write(fd, "x", 1);
    while (k < 0 && errno == EINTR);
    close(fd);
}
