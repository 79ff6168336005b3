/* A process that loads CUDA after its first collective: its next
 * collective on device memory must see it. The fake libcuda.so.1
 * (fake_cuda.c, not linked in: opened by path, argv[1], between the two
 * collectives) maps its "device" memory PROT_NONE, so a core that took the
 * buffer for host memory crashes the test in the sim backend's copy; one
 * that sees it refuses it (the sim backend takes host memory only). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ranks.h"

static int failures;
static void *(*dev_alloc)(size_t n);
static void (*dev_free)(void *p);
static const char *lib_path;

static int late_fn(struct rank_ctx *x, int rc)
{
    if (rc != 0)
        return 1;
    float h[4] = {1, 2, 3, 4};
    CHECK(plx_allreduce(x->comm, h, h, 4, PLX_F32, PLX_SUM) == 0); /* no CUDA in the process yet */
    if (x->rank == 0) {
        void *lib = dlopen(lib_path, RTLD_NOW | RTLD_GLOBAL); /* kept open: the core holds its symbols */
        if (lib) {
            *(void **)&dev_alloc = dlsym(lib, "fake_cuda_alloc");
            *(void **)&dev_free = dlsym(lib, "fake_cuda_free");
        }
        if (!lib || !dev_alloc || !dev_free) {
            fprintf(stderr, "FAIL: cannot open the fake driver %s: %s\n", lib_path, dlerror());
            CHECK_FAILED_();
        }
    }
    CHECK(plx_barrier(x->comm) == 0); /* the driver is loaded on every rank's side of this */
    if (!dev_alloc)
        return 1;
    float *d = dev_alloc(sizeof h);
    rc = plx_allreduce(x->comm, d, d, 4, PLX_F32, PLX_SUM);
    CHECK(rc == PLX_ERR_UNSUPPORTED && strstr(plx_last_error(), "cannot take CUDA memory") != NULL);
    dev_free(d);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_cuda_late PATH/libcuda.so.1\n");
        return 2;
    }
    lib_path = argv[1];
    int worst = run_ranks(2, "sim", NULL, 20000, late_fn, NULL);
    if (worst || failures)
        fprintf(stderr, "FAILED: %d check(s) failed\n", failures + (worst != 0));
    else
        printf("PASS: device memory made right after CUDA was loaded is seen as such\n");
    return worst || failures ? 1 : 0;
}
