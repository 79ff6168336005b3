/* libs.c - find and load libcuda.so.1 and libnccl.so.2 (the system's search
 * path, then [nccl] library_path, then CUDA's conventional prefix), resolve
 * the functions we use, and probe in order: driver present, cuInit (stub
 * driver and "no device" are different reasons), device count, NCCL version.
 * Never ncclGetUniqueId here: it starts a thread and opens a socket. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "elastic.h"
#include "libs.h"

const struct plx_host *nccl_host;
struct cuda_fns cu;
struct nccl_fns nc;
int nccl_version;

/* dlopen name from the places in the documented order; where lists them. */
static void *open_lib(const char *name, char *where, size_t len)
{
    const char *extra = plx_plugin_config_str(nccl_host, NULL, "library_path");
    const char *dirs[] = {NULL, extra, "/usr/local/cuda/lib64", "/usr/local/cuda/lib",
                          "/usr/local/cuda/targets/x86_64-linux/lib"};
    where[0] = '\0';
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char path[1024];
        if (i == 0) {
            snprintf(path, sizeof path, "%s", name);
        } else {
            if (!dirs[i] || !dirs[i][0])
                continue;
            snprintf(path, sizeof path, "%s/%s", dirs[i], name);
        }
        size_t l = strlen(where);
        snprintf(where + l, len - l, "%s%s", l ? ", " : "", i == 0 ? "the system's library path" : dirs[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

static int state = -1;
static char saved[512];

int nccl_libs_probe(char *reason, size_t len)
{
    if (state >= 0) {
        snprintf(reason, len, "%s", saved);
        return state;
    }
    char where[512];
    int st = PLX_PROBE_UNAVAILABLE;
    void *hc = open_lib("libcuda.so.1", where, sizeof where), *hn;
    if (!hc) {
        snprintf(saved, sizeof saved, "no CUDA driver: libcuda.so.1 not found (searched %.200s)", where);
        goto done;
    }
#define CUDA_SYM(name, sym, args) cu.name = (CUresult(*) args)dlsym(hc, sym);
    PLX_CUDA_FUNCS(CUDA_SYM)
#undef CUDA_SYM
    if (!cu.cuInit || !cu.cuDeviceGetCount || !cu.cuEventQuery) {
        snprintf(saved, sizeof saved, "libcuda.so.1 lacks the driver API (cuInit, cuEventQuery)");
        st = PLX_PROBE_BROKEN;
        goto done;
    }
    CUresult r = cu.cuInit(0);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        snprintf(saved, sizeof saved, "the CUDA driver is a stub library (cuInit: CUDA_ERROR_STUB_LIBRARY): no real driver is installed");
        goto done;
    }
    if (r == CUDA_ERROR_NO_DEVICE) {
        snprintf(saved, sizeof saved, "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)");
        goto done;
    }
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        if (cu.cuGetErrorName)
            cu.cuGetErrorName(r, &name);
        snprintf(saved, sizeof saved, "cuInit failed: %s (%d)", name ? name : "unknown error", r);
        goto done;
    }
    int count = 0;
    if (cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count <= 0) {
        snprintf(saved, sizeof saved, "no CUDA device (cuDeviceGetCount: %d)", count);
        goto done;
    }
    if (!(hn = open_lib("libnccl.so.2", where, sizeof where))) {
        snprintf(saved, sizeof saved, "%d CUDA device(s), but libnccl.so.2 not found (searched %.200s)", count, where);
        goto done;
    }
    int missing = 0;
#define NCCL_SYM(name, args) missing |= !(nc.name = (ncclResult_t(*) args)dlsym(hn, #name));
    PLX_NCCL_FUNCS(NCCL_SYM)
#undef NCCL_SYM
    nc.ncclGetErrorString = (const char *(*)(ncclResult_t))dlsym(hn, "ncclGetErrorString");
    if (!nc.ncclGetVersion || nc.ncclGetVersion(&nccl_version) != ncclSuccess) {
        snprintf(saved, sizeof saved, "libnccl.so.2 does not answer ncclGetVersion");
        st = PLX_PROBE_BROKEN;
        goto done;
    }
    if (nccl_version < PLX_NCCL_MIN_VERSION || missing) {
        snprintf(saved, sizeof saved, "NCCL %d.%d.%d is older than the minimum 2.18.0 this plugin supports "
                 "(ncclCommSplit, nonblocking init)", nccl_version / 10000, nccl_version / 100 % 100,
                 nccl_version % 100);
        goto done;
    }
    nccl_elastic_probe(hn, nccl_version);
    snprintf(saved, sizeof saved, "NCCL %d.%d.%d, %d CUDA device(s); elastic calls: %s", nccl_version / 10000,
             nccl_version / 100 % 100, nccl_version % 100, count, nccl_elastic.calls);
    st = PLX_PROBE_USABLE;
done:
    state = st;
    snprintf(reason, len, "%s", saved);
    return st;
}
