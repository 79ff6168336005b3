/* libs.c - find and load libcuda.so.1 and libnccl.so.2 (the system's search
 * path, then [nccl] library_path, then CUDA's conventional prefix), resolve
 * the functions we use, and probe in order: driver library present, a GPU
 * the kernel driver lists, NCCL version. The probe runs in every process of
 * every job (auto probes each backend), so it never initialises CUDA:
 * cuInit opens every device and costs far more than the probe's file checks.
 * cuInit and the device count (stub driver and "no device" are different
 * reasons) run once, when a communicator is made (nccl_cuda_ready).
 * Never ncclGetUniqueId here: it starts a thread and opens a socket. */
#include <dirent.h>
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

/* The GPUs the NVIDIA kernel driver lists ([nccl] driver_gpus, one entry
 * each), or else its /dev/nvidiaN nodes: files only, no device opened. */
static int driver_gpus(char *where, size_t len)
{
    const char *dir = plx_plugin_config_str(nccl_host, NULL, "driver_gpus");
    int set = dir && *dir, n = 0;
    snprintf(where, len, "%s", set ? dir : "/proc/driver/nvidia/gpus");
    DIR *d = opendir(where);
    struct dirent *e;
    if (d) {
        while ((e = readdir(d)))
            n += e->d_name[0] != '.';
        closedir(d);
        return n;
    }
    if (set || !(d = opendir("/dev")))
        return 0;
    while ((e = readdir(d))) {
        unsigned k;
        char rest;
        n += sscanf(e->d_name, "nvidia%u%c", &k, &rest) == 1;
    }
    closedir(d);
    size_t l = strlen(where);
    snprintf(where + l, len - l, " or /dev/nvidiaN");
    return n;
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
    int gpus = driver_gpus(where, sizeof where);
    if (gpus <= 0) {
        snprintf(saved, sizeof saved, "no CUDA device: the NVIDIA kernel driver lists no GPU (%.200s)", where);
        goto done;
    }
    if (!(hn = open_lib("libnccl.so.2", where, sizeof where))) {
        snprintf(saved, sizeof saved, "%d GPU(s), but libnccl.so.2 not found (searched %.200s)", gpus, where);
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
    snprintf(saved, sizeof saved, "NCCL %d.%d.%d, %d GPU(s) (the driver's list; CUDA starts with a communicator); "
             "elastic calls: %s", nccl_version / 10000, nccl_version / 100 % 100, nccl_version % 100, gpus,
             nccl_elastic.calls);
    st = PLX_PROBE_USABLE;
done:
    state = st;
    snprintf(reason, len, "%s", saved);
    return st;
}

static int cuda_state = -1;
static char cuda_saved[256];

int nccl_cuda_ready(char *reason, size_t len)
{
    if (cuda_state >= 0) {
        snprintf(reason, len, "%s", cuda_saved);
        return cuda_state;
    }
    int st = PLX_PROBE_UNAVAILABLE, count = 0;
    CUresult r = cu.cuInit(0);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        snprintf(cuda_saved, sizeof cuda_saved, "the CUDA driver is a stub library (cuInit: CUDA_ERROR_STUB_LIBRARY): "
                 "no real driver is installed");
    } else if (r == CUDA_ERROR_NO_DEVICE) {
        snprintf(cuda_saved, sizeof cuda_saved, "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)");
    } else if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        if (cu.cuGetErrorName)
            cu.cuGetErrorName(r, &name);
        snprintf(cuda_saved, sizeof cuda_saved, "cuInit failed: %s (%d)", name ? name : "unknown error", r);
    } else if (cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count <= 0) {
        snprintf(cuda_saved, sizeof cuda_saved, "no CUDA device (cuDeviceGetCount: %d)", count);
    } else {
        snprintf(cuda_saved, sizeof cuda_saved, "%d CUDA device(s)", count);
        st = PLX_PROBE_USABLE;
    }
    cuda_state = st;
    snprintf(reason, len, "%s", cuda_saved);
    return st;
}
