/* test_estimates.c - the [core] estimates table (core/algo/estimates.c):
 * a good file's rows in any order; each malformed kind refused with
 * path:line and what is wrong; lookups exact at the rows, linear between
 * them, refused outside the rows, at a world size without rows and on
 * another backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "estimates.h"
#include "check.h"

static int failures;
static char path[] = "/tmp/plexus-estimates-XXXXXX";

static void write_file(const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        perror(path);
        exit(1);
    }
}

/* text is refused with "path" + want in the message. */
static void bad(const char *text, const char *want)
{
    write_file(text);
    struct plx__estimates t;
    char err[700] = "", full[400];
    int rc = plx__estimates_load(&t, path, err, sizeof err);
    snprintf(full, sizeof full, "%s%s", path, want);
    CHECK(rc == -1);
    CHECK(t.n == 0);
    if (!strstr(err, full))
        fprintf(stderr, "  want '%s' in '%s'\n", full, err);
    CHECK(strstr(err, full) != NULL);
    plx__estimates_finish(&t);
}

static void malformed(void)
{
    bad("allreduce 2 8 1e-6\nallreduce 2 16\n", ":2: expected 'COLL RANKS BYTES SECONDS'");
    bad("allreduce 2 8 1e-6 extra\n", ":1: expected 'COLL RANKS BYTES SECONDS'");
    bad("# c\nallreduse 2 8 1e-6\n", ":2: COLL 'allreduse' is not a collective");
    bad("allreduce 0 8 1e-6\n", ":1: RANKS '0' is not a whole number of ranks >= 1");
    bad("allreduce -2 8 1e-6\n", ":1: RANKS '-2'");
    bad("allreduce 2 8K 1e-6\n", ":1: BYTES '8K' is not a whole number of bytes");
    bad("allreduce 2 8 fast\n", ":1: SECONDS 'fast' is not a number of seconds >= 0");
    bad("allreduce 2 8 -1e-6\n", ":1: SECONDS '-1e-6'");
    bad("allreduce 2 8 nan\n", ":1: SECONDS 'nan'");
    bad("allreduce 2 8 inf\n", ":1: SECONDS 'inf'");
    bad("allreduce 2 8 1e-6\nallgather 2 8 1e-6\nallreduce 2 8 2e-6\n",
        ":3: allreduce at 2 ranks, 8 B is on line 1 already");
    bad("allreduce 2 8 1e-6\nbackend tcp\n", ":2: 'backend' must come once, before the rows");
    bad("backend tcp\nbackend shm\nallreduce 2 8 1e-6\n", ":2: 'backend' must come once");
    bad("backend\nallreduce 2 8 1e-6\n", ":1: expected 'backend NAME'");
    bad("# only comments\n\n", ": no 'COLL RANKS BYTES SECONDS' rows");
    char longline[700];
    memset(longline, 'x', sizeof longline - 2);
    longline[sizeof longline - 2] = '\n';
    longline[sizeof longline - 1] = '\0';
    bad(longline, ":1: line longer than");
    unlink(path);
    struct plx__estimates t;
    char err[700];
    CHECK(plx__estimates_load(&t, path, err, sizeof err) == -1);
    CHECK(strstr(err, "cannot read the estimates table") != NULL);
    plx__estimates_finish(&t);
}

static const char *const good_text =
    "# written by hand\n"
    "backend sim\n"
    "allreduce 4 1024 3e-05   # out of order: sorted on load\n"
    "allreduce 4 8 1.0e-05\n"
    "allreduce 4 64 2e-05\n"
    "\n"
    "allgather 4 1024 5e-05\n"
    "barrier 4 0 4.5e-06\n"
    "allreduce 2 8 7e-06\n"
    "reduce_scatter 4 64 1.5e-05\n";

/* The answer at (coll, ranks, bytes) on backend is want (rc 0), or a
 * refusal (rc -1) whose reason holds why. */
static void expect(const struct plx__estimates *t, const char *backend, int coll, int ranks, size_t bytes,
                   int rc, double want, const char *why)
{
    double s = -1;
    char got[700] = "";
    int r = plx__estimates_lookup(t, backend, coll, ranks, bytes, &s, got, sizeof got);
    if (r != rc || (rc == 0 && fabs(s - want) > 1e-15) || (rc && !strstr(got, why)))
        fprintf(stderr, "  %s %d ranks %zu B on %s: rc %d, %.9g s, '%s'\n", plx_coll_name(coll), ranks, bytes,
                backend, r, s, got);
    CHECK(r == rc);
    if (rc == 0)
        CHECK(fabs(s - want) <= 1e-15);
    else
        CHECK(strstr(got, why) != NULL);
}

static void lookups(void)
{
    write_file(good_text);
    struct plx__estimates t;
    char err[700] = "";
    CHECK(plx__estimates_load(&t, path, err, sizeof err) == 0);
    CHECK(t.n == 7);
    CHECK(!strcmp(t.backend, "sim"));
    /* Exactly the rows' values at their sizes. */
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 4, 8, 0, 1e-5, NULL);
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 4, 64, 0, 2e-5, NULL);
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 4, 1024, 0, 3e-5, NULL);
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 2, 8, 0, 7e-6, NULL);
    expect(&t, "sim", PLX_COLL_ALLGATHER, 4, 1024, 0, 5e-5, NULL);
    /* Linear in bytes between two rows. */
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 4, 36, 0, 1.5e-5, NULL);
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 4, 544, 0, 2.5e-5, NULL);
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 4, 9, 0, 1e-5 + 1e-5 / 56, NULL);
    /* A barrier has no size. */
    expect(&t, "sim", PLX_COLL_BARRIER, 4, 0, 0, 4.5e-6, NULL);
    expect(&t, "sim", PLX_COLL_BARRIER, 4, 12345, 0, 4.5e-6, NULL);
    /* Refused: outside the rows, another world size, another collective or backend. */
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 4, 4, -1, 0, "covers allreduce at 4 ranks from 8 to 1024 B, not 4 B");
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 4, 1025, -1, 0, "from 8 to 1024 B, not 1025 B");
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 2, 16, -1, 0, "covers allreduce at 2 ranks from 8 to 8 B");
    expect(&t, "sim", PLX_COLL_ALLREDUCE, 3, 64, -1, 0, "has no allreduce rows at 3 ranks (only at 2, 4)");
    expect(&t, "sim", PLX_COLL_ALLGATHER, 8, 1024, -1, 0, "has no allgather rows at 8 ranks (only at 4)");
    expect(&t, "sim", PLX_COLL_BROADCAST, 4, 64, -1, 0, "has no broadcast rows at 4 ranks");
    expect(&t, "tcp", PLX_COLL_ALLREDUCE, 4, 64, -1, 0, "is a table for backend sim, not tcp");
    expect(&t, "shm+tcp", PLX_COLL_ALLREDUCE, 4, 64, -1, 0, "not shm+tcp");
    plx__estimates_finish(&t);
    /* Without a backend line: any backend. */
    write_file("allreduce 4 8 1e-5\n");
    CHECK(plx__estimates_load(&t, path, err, sizeof err) == 0);
    expect(&t, "tcp", PLX_COLL_ALLREDUCE, 4, 8, 0, 1e-5, NULL);
    expect(&t, "shm", PLX_COLL_ALLREDUCE, 4, 8, 0, 1e-5, NULL);
    plx__estimates_finish(&t);
}

static void names(void)
{
    for (int c = 0; c < PLX_COLL_COUNT; c++) {
        CHECK(!strcmp(plx__estimates_coll_name(c), plx_coll_name(c)));
        CHECK(plx__estimates_coll_parse(plx_coll_name(c)) == c);
    }
    CHECK(plx__estimates_coll_parse("bogus") == -1);
    CHECK(plx__estimates_coll_parse(NULL) == -1);
    CHECK(!strcmp(plx__estimates_coll_name(PLX_COLL_COUNT), "?"));
}

int main(void)
{
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    names();
    malformed();
    lookups();
    unlink(path);
    printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
    return failures != 0;
}
