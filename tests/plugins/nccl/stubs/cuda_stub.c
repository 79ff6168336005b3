/* A fake libcuda.so.1 / libnccl.so.2 for the probe tests: each build makes
 * one step of the probe fail in one known way. STUB_CUINIT: what cuInit
 * returns; STUB_COUNT: devices; STUB_NCCL_VERSION: for the libnccl stub,
 * with every function the plugin resolves when STUB_NCCL_ALL is set (each
 * fails). cuInit appends a line to $STUB_CUINIT_LOG when that is set. */
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;

#ifdef STUB_NCCL_ALL
#include "nccl_api.h"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define ncclGetVersion ncclGetVersion_defined_below
#define STUB_FN(name, args) ncclResult_t name args { return ncclInternalError; }
PLX_NCCL_FUNCS(STUB_FN)
#undef ncclGetVersion
#endif

#ifdef STUB_NCCL_VERSION
int ncclGetVersion(int *v)
{
    *v = STUB_NCCL_VERSION;
    return 0;
}
#else
CUresult cuInit(unsigned int flags)
{
    (void)flags;
    const char *log = getenv("STUB_CUINIT_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    if (f) {
        fputs("cuInit\n", f);
        fclose(f);
    }
    return STUB_CUINIT;
}

CUresult cuDeviceGetCount(int *n)
{
    *n = STUB_COUNT;
    return 0;
}

CUresult cuEventQuery(void *e)
{
    (void)e;
    return 0;
}

CUresult cuGetErrorName(CUresult r, const char **name)
{
    *name = r == 999 ? "CUDA_ERROR_UNKNOWN" : "CUDA_ERROR_OTHER";
    return 0;
}
#endif
