/* test_ledger.c - the ledger of a communicator keeps its last N operations
 * in a file of constant size, readable while the job runs, and leaves no
 * file after a clean exit.
 *
 * Two sim ranks (threads) with [core] ledger_entries = 16 in a fresh folder
 * run 10,000 allreduces; every 1,000 operations rank 0 checks that its file
 * has the size of 16 entries and that the entries hold the last operations
 * in order; at the end the header says 10,000 done. After both destroy
 * their communicators the folder is empty. Then again with 12 entries: the
 * core finds a power of two's entry by a mask, any other's by a division. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plexus/ledger.h"
#include "ranks.h"

#define OPS 10000
static int nent; /* the run's ledger_entries */

static int failures;
/* A CHECK that stops the function: what follows depends on it. */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        int ok_ = !!(cond);                                                                        \
        CHECK(ok_ && #cond);                                                                       \
        if (!ok_)                                                                                  \
            return 1;                                                                              \
    } while (0)

static char dir[128];

static int files_in(const char *d, char *first, size_t len)
{
    DIR *h = opendir(d);
    int n = 0;
    if (!h)
        return 0;
    for (struct dirent *e; (e = readdir(h));)
        if (e->d_name[0] != '.') {
            if (!n && first)
                snprintf(first, len, "%s/%s", d, e->d_name);
            n++;
        }
    closedir(h);
    return n;
}

/* Rank 0's ledger: checks size and content after `done` operations. */
static int check_file(int done)
{
    char path[512] = "";
    DIR *h = opendir(dir);
    REQUIRE(h);
    for (struct dirent *e; (e = readdir(h));)
        if (strstr(e->d_name, ".r0.ledger"))
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    closedir(h);
    REQUIRE(path[0]);
    struct stat st;
    REQUIRE(stat(path, &st) == 0);
    size_t want = sizeof(struct plx_ledger_file) + nent * sizeof(struct plx_ledger_entry);
    REQUIRE((size_t)st.st_size == want);
    REQUIRE((st.st_mode & 0777) == 0600);
    int fd = open(path, O_RDONLY);
    REQUIRE(fd >= 0);
    const struct plx_ledger_file *f = mmap(NULL, want, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    REQUIRE(f != MAP_FAILED);
    REQUIRE(!memcmp(f->magic, PLX_LEDGER_MAGIC, 8) && f->nentries == (uint32_t)nent && f->rank == 0 && f->size == 2);
    if (f->done1 != (uint64_t)done || f->posted1 != (uint64_t)done)
        fprintf(stderr, "after %d operations: done1 %llu posted1 %llu\n", done, (unsigned long long)f->done1,
                (unsigned long long)f->posted1);
    REQUIRE(f->done1 == (uint64_t)done && f->posted1 == (uint64_t)done);
    for (int i = 0; i < nent && i < done; i++) {
        uint64_t seq = (uint64_t)done - 1 - (uint64_t)i;
        const struct plx_ledger_entry *e = &f->entries[seq % nent];
        REQUIRE(e->seq == seq && e->state == 3);
        REQUIRE((e->coll == PLX_COLL_ALLREDUCE && e->bytes == 32) || (e->coll == PLX_COLL_BARRIER && e->bytes == 0));
        REQUIRE(e->end_ns >= e->start_ns && (e->lock & 1) == 0);
    }
    munmap((void *)f, want);
    return 0;
}

static int body(struct rank_ctx *ctx, int st)
{
    REQUIRE(st == 0);
    float x[8] = {1}, y[8];
    for (int i = 1; i <= OPS; i++) {
        REQUIRE(plx_allreduce(ctx->comm, x, y, 8, PLX_F32, PLX_SUM) == 0);
        if (i % 1000 == 0) {
            REQUIRE(plx_barrier(ctx->comm) == 0);
            /* i allreduces, two barriers per earlier round, one in this one */
            if (ctx->rank == 0 && check_file(i + 2 * (i / 1000) - 1) != 0)
                return 1;
            REQUIRE(plx_barrier(ctx->comm) == 0);
        }
    }
    return 0;
}

/* One run of the ranks with ledger_entries = n; 0 when it passed. */
static int run_with(int n)
{
    nent = n;
    snprintf(dir, sizeof dir, "/tmp/plexus-test-ledger-%d-%d", (int)getpid(), n);
    char key[200], entries[64];
    snprintf(key, sizeof key, "core.ledger_dir=%s", dir);
    snprintf(entries, sizeof entries, "core.ledger_entries=%d", n);
    const char *ov[] = {key, entries, NULL};
    int rc = run_ranks(2, "sim", ov, 30000, body, NULL);
    char left[512] = "";
    int files = files_in(dir, left, sizeof left);
    rmdir(dir);
    if (rc || failures)
        return 1;
    if (files) {
        fprintf(stderr, "FAIL: %d file(s) left after a clean exit, e.g. %s\n", files, left);
        return 1;
    }
    printf("ok: %d operations, the ledger stayed at %d entries, no file left\n", OPS, n);
    return 0;
}

int main(void)
{
    return run_with(16) || run_with(12);
}
