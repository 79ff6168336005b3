/* probe_side_effects [segv] - run under plexus-run on tcp: no transport
 * library of an unused backend (MPI, UCX, UCC, NCCL, CUDA) is mapped into
 * the process, before plx_comm_init, after it, and after the discovery
 * that plexus-info does (plx_backends_discover and every backend's info).
 * With "segv" it then stores to a page it may not touch: the caller checks
 * that the process dies of SIGSEGV as any program would (no library's
 * handler in the way). */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "plexus/info.h"
#include "plexus/plexus.h"

static int failures;
#include "check.h"

static const char *const foreign[] = {"libmpi.so", "libmpich.so", "libucp.so", "libucs.so", "libuct.so",
                                      "libucc.so", "libnccl.so", "libcuda.so", "libcudart.so", "libopen-pal.so"};

/* The first foreign library mapped, or NULL. */
static const char *mapped_foreign(char *line, size_t n)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return "(cannot read /proc/self/maps)";
    const char *hit = NULL;
    while (!hit && fgets(line, (int)n, f))
        for (size_t i = 0; i < sizeof foreign / sizeof *foreign && !hit; i++)
            if (strstr(line, foreign[i]))
                hit = foreign[i];
    fclose(f);
    return hit;
}

static void expect_none(const char *when)
{
    char line[4096];
    const char *hit = mapped_foreign(line, sizeof line);
    if (hit)
        fprintf(stderr, "%s: %s is mapped: %s", when, hit, line);
    CHECK(hit == NULL);
}

int main(int argc, char **argv)
{
    expect_none("before plx_comm_init");
    struct plx_comm *comm = NULL;
    CHECK(plx_comm_init(NULL, &comm) == 0);
    if (!comm)
        return 1;
    expect_none("after plx_comm_init");
    CHECK(plx_backends_discover(NULL) == 0);
    for (size_t i = 0; i < plx_backend_count(); i++) {
        struct plx_backend_info bi = {.struct_size = sizeof bi};
        CHECK(plx_backend_info(i, &bi) == 0);
    }
    expect_none("after discovering every backend");
    float x = 1;
    CHECK(plx_allreduce(comm, &x, &x, 1, PLX_F32, PLX_SUM) == 0);
    expect_none("after an allreduce");
    if (argc > 1 && !strcmp(argv[1], "segv")) {
        /* The user's own bug: a store to memory it may not touch (a page
         * without access, so no sanitizer check stops it first). */
        volatile int *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        fflush(NULL);
        if (bad != MAP_FAILED)
            *bad = 1;
    }
    plx_comm_destroy(comm);
    printf("%s\n", failures ? "FAILED" : "ok: no foreign transport library mapped");
    return failures ? 1 : 0;
}
