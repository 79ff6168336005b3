/* alias.c - the backend `mpi`: whichever MPI plugin matches the launcher
 * that started this process (mpirun.openmpi -> mpi-openmpi, mpirun.mpich
 * -> mpi-mpich). It links no MPI: at entry it reads the launcher's
 * variables, loads the matching module from its own folder (they are
 * installed side by side, and sit side by side in the build tree) and
 * hands out that module's operations under the name "mpi". */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/backend.h"

static char reason[256];          /* why no target was picked */
static struct plx_backend backend; /* the target's, renamed; or the stubs below */
static char description[160];

static int stub_probe(struct plx_probe_result *out)
{
    out->state = PLX_PROBE_UNAVAILABLE;
    snprintf(out->reason, sizeof out->reason, "%s", reason);
    return 0;
}

static int stub_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    uint32_t size = out->struct_size;
    memset(out, 0, size);
    out->struct_size = size;
    return 0;
}

static const struct plx_host *host;

static int stub_create(const struct plx_comm_args *a, void **out)
{
    (void)a;
    (void)out;
    return host->error(host->ctx, PLX_ERR_UNAVAILABLE, "mpi: %s", reason);
}

static int stub_destroy(void *comm)
{
    (void)comm;
    return 0;
}

static int stub_test(void *comm, void *req, int *done)
{
    (void)comm;
    (void)req;
    *done = 1;
    return PLX_ERR_UNAVAILABLE;
}

static void stub_free(void *comm, void *req)
{
    (void)comm;
    (void)req;
}

/* The target's module, beside this one. */
static const char *pick(char *path, size_t len)
{
    const char *impl = getenv("OMPI_COMM_WORLD_SIZE") ? "openmpi" : getenv("PMI_SIZE") ? "mpich" : NULL;
    if (!impl) {
        snprintf(reason, sizeof reason,
                 "not started by an MPI launcher (neither OMPI_COMM_WORLD_SIZE nor PMI_SIZE is set): "
                 "use mpirun.openmpi or mpirun.mpich");
        return NULL;
    }
    Dl_info info;
    if (!dladdr((void *)pick, &info) || !info.dli_fname) {
        snprintf(reason, sizeof reason, "cannot tell which folder the mpi alias was loaded from");
        return NULL;
    }
    const char *slash = strrchr(info.dli_fname, '/');
    int dir = slash ? (int)(slash - info.dli_fname) : 1;
    snprintf(path, len, "%.*s/plexus-mpi-%s.so", dir, slash ? info.dli_fname : ".", impl);
    return impl;
}

static void stubs(void)
{
    backend = (struct plx_backend){
        .struct_size = sizeof backend,
        .abi_minor = PLX_ABI_MINOR,
        .probe = stub_probe,
        .get_caps = stub_caps,
        .comm_create = stub_create,
        .comm_destroy = stub_destroy,
        .test = stub_test,
        .req_free = stub_free,
    };
}

PLX_BACKEND_EXPORT int plx_backend_entry_v1(const struct plx_host *h, uint32_t *minor, const struct plx_backend **out)
{
    host = h;
    char path[PATH_MAX];
    const char *impl = pick(path, sizeof path);
    const struct plx_backend *target = NULL;
    uint32_t got = *minor;
    if (impl) {
        /* RTLD_LOCAL as the core loads plugins: if [mpi-IMPL] loaded it already,
         * this is the same handle and the same MPI state. */
        void *m = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        plx_backend_entry_v1_fn entry = m ? (plx_backend_entry_v1_fn)dlsym(m, PLX_BACKEND_ENTRY_V1_NAME) : NULL;
        if (!entry) {
            const char *e = dlerror();
            snprintf(reason, sizeof reason, "started by the %s launcher but %.100s cannot be loaded: %.100s", impl, path,
                     e ? e : "no entry point");
        } else if (entry(h, &got, &target) != 0 || !target) {
            snprintf(reason, sizeof reason, "%.200s refused to load", path);
            target = NULL;
        }
    }
    if (target) {
        size_t n = target->struct_size < sizeof backend ? target->struct_size : sizeof backend;
        memcpy(&backend, target, n);
        snprintf(description, sizeof description, "alias of %s here: %s", target->name,
                 target->description ? target->description : "");
        backend.description = description;
        *minor = got;
    } else {
        stubs();
        backend.description = "alias of the MPI plugin that matches the launcher (none here)";
        if (*minor > PLX_ABI_MINOR)
            *minor = PLX_ABI_MINOR;
    }
    backend.name = "mpi";
    backend.version = "0.1.0";
    *out = &backend;
    return 0;
}
