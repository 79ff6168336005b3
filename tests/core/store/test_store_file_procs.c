/* The file:// store across processes: concurrent add from several forked
 * processes (and threads in each) gives the exact sum; a get in one process
 * sees a set made later by another; readers racing an overwriting writer
 * only ever see whole values. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "store.h"
#include "check.h"

static int failures;
enum { PROCS = 4, THREADS = 2, ADDS = 150 };

static char url[300];

static void *adder(void *arg)
{
    struct plx_store *s = arg;
    intptr_t bad = 0;
    for (int i = 0; i < ADDS; i++)
        if (plx__store_add(s, "counter", 1, NULL) != 0) {
            fprintf(stderr, "add: %s\n", plx_last_error());
            bad = 1;
            break;
        }
    return (void *)bad;
}

/* A child: its own store handle, THREADS threads adding. Exit 0 if all ok. */
static int child_adds(void)
{
    alarm(50); /* never outlive the test's timeout */
    struct plx_store *s;
    if (plx__store_open(url, 1, 2, 20000, &s) != 0) {
        fprintf(stderr, "open: %s\n", plx_last_error());
        return 1;
    }
    pthread_t t[THREADS];
    int bad = 0;
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, adder, s);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    plx__store_release(s);
    return bad;
}

/* Overwrite one key with values of two distinct lengths and fillers. */
static int child_writer(void)
{
    alarm(50);
    struct plx_store *s;
    if (plx__store_open(url, 1, 2, 20000, &s) != 0)
        return 1;
    usleep(100000); /* the parent's first get is posted before the key exists */
    static char a[100000], b[3000];
    memset(a, 'a', sizeof a);
    memset(b, 'b', sizeof b);
    int rc = 0;
    for (int i = 0; i < 300 && !rc; i++)
        rc = i % 2 ? plx__store_set(s, "torn", b, sizeof b) : plx__store_set(s, "torn", a, sizeof a);
    plx__store_set(s, "late", "from the child", 14);
    plx__store_release(s);
    return rc != 0;
}

static int wait_child(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/plexus-filestore-procs-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(url, sizeof url, "file://%s", dir);
    struct plx_store *s;
    if (plx__store_open(url, 0, 2, 20000, &s) != 0) {
        fprintf(stderr, "open: %s\n", plx_last_error());
        return 1;
    }

    /* Exact sum from PROCS processes x THREADS threads x ADDS adds. */
    pid_t kids[PROCS];
    for (int i = 0; i < PROCS; i++)
        if ((kids[i] = fork()) == 0)
            _exit(child_adds());
    for (int i = 0; i < PROCS; i++)
        CHECK(wait_child(kids[i]) == 0);
    int64_t total = -1;
    CHECK(plx__store_add(s, "counter", 0, &total) == 0);
    CHECK(total == PROCS * THREADS * ADDS);
    if (total != PROCS * THREADS * ADDS)
        fprintf(stderr, "sum %lld, expected %d\n", (long long)total, PROCS * THREADS * ADDS);

    /* A reader racing an overwriting writer sees only whole values, and a
     * get posted before the set completes once it lands. */
    pid_t w = fork();
    if (w == 0)
        _exit(child_writer());
    int torn = 0, reads = 0;
    for (;;) {
        void *v = NULL;
        size_t n = 0;
        if (s->ops->check(s, "late") == 1)
            break;
        if (plx__store_get(s, "torn", &v, &n, 20000) != 0) {
            torn++;
            break;
        }
        reads++;
        const char *c = v;
        if (!((n == 100000 && c[0] == 'a' && c[n - 1] == 'a') || (n == 3000 && c[0] == 'b' && c[n - 1] == 'b')))
            torn++;
        free(v);
    }
    void *v = NULL;
    size_t n = 0;
    CHECK(plx__store_get(s, "late", &v, &n, 20000) == 0 && n == 14 && !memcmp(v, "from the child", 14));
    free(v);
    CHECK(wait_child(w) == 0);
    CHECK(torn == 0);
    printf("%d reads during overwrites, %d torn\n", reads, torn);

    plx__store_release(s);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("ok\n");
    return failures ? 1 : 0;
}
