/* config_view.c - a communicator's options reach the shm child of a
 * hierarchical communicator (backend shm+tcp: the communicator runs on tcp,
 * its intra-host child on shm), which reads [shm] through its own view:
 *
 *   1. options shm.corrupt_rank=1, shm.corrupt_at=3 (fault injection): rank 1
 *      writes a corrupt slot header in the intra child's collective seq 3,
 *      so an allreduce fails within a few iterations, on every rank;
 *   2. a second communicator without those options, made afterwards in the
 *      same processes, runs clean and right: the options were that
 *      communicator's only.
 *
 * Run with plexus-run -n 2 (ranks of one host). Both communicators meet
 * through a file:// store of their own (a folder named after plexus-run's
 * pid), so the second does not race the first one's TCP store server
 * going away; rank 0 empties and removes it at the end. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plexus/plexus.h"

static char dir[128], url[160];

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int run(const char *name, const char *const *overrides, int expect_fail)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "shm+tcp";
    o.init = url;
    o.name = name;
    o.timeout_ms = 5000;
    o.overrides = overrides;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        fprintf(stderr, "%s: init: %s\n", name, plx_last_error());
        return 1;
    }
    int me = plx_comm_rank(c), P = plx_comm_size(c), bad = 0, failed = 0;
    enum { N = 8 };
    float a[N], b[N];
    for (int i = 0; i < 10 && !failed; i++) {
        for (int k = 0; k < N; k++)
            a[k] = (float)(me + 1) * (float)(k + 1);
        int rc = plx_allreduce(c, a, b, N, PLX_F32, PLX_SUM);
        if (rc) {
            printf("rank %d: %s: allreduce %d: %s: %s\n", me, name, i, plx_err_name(rc), plx_last_error());
            failed = 1;
            break;
        }
        for (int k = 0; k < N; k++)
            if (b[k] != (float)(P * (P + 1) / 2) * (float)(k + 1))
                bad = 1;
    }
    if (failed != expect_fail) {
        printf("rank %d: %s: %s\n", me, name,
               expect_fail ? "no allreduce failed: [shm] options did not reach the shm child"
                           : "an allreduce failed without fault injection");
        bad = 1;
    }
    if (bad)
        printf("rank %d: %s: FAILED\n", me, name);
    if (!expect_fail && plx_barrier(c) == 0 && me == 0) {
        plx_comm_destroy(c);
        remove_dir(); /* every rank is past its last store access */
        return bad;
    }
    plx_comm_destroy(c);
    return bad;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/plexus-shm-config-view-%d", (int)getppid());
    snprintf(url, sizeof url, "file://%s", dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        perror(dir);
        return 1;
    }
    static const char *const faulty[] = {"shm.corrupt_rank=1", "shm.corrupt_at=3", NULL};
    int bad = run("faulty", faulty, 1);
    bad |= run("clean", NULL, 0);
    return bad;
}
