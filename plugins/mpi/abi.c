/* abi.c - the MPI library behind the standard-ABI plugin: libmpi_abi.so.1
 * (Debian's alternatives point it at MPICH's or Open MPI's) loaded at run
 * time, its calls looked up by name, the implementation read from its
 * version text. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_mpi.h"

#define PLX_MPI_ABI_DEFINE(f) __typeof__(f) *plx_abi_##f;
PLX_MPI_ABI_CALLS(PLX_MPI_ABI_DEFINE)
#undef PLX_MPI_ABI_DEFINE

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char why[320], file[256] = "libmpi_abi.so.1";
static int loaded;

static const struct mpi_abi_impl impls[] = {
    {"MPICH", "PMI_SIZE", "mpirun.mpich", "Open MPI", "OMPI_COMM_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_SIZE", "mpirun.openmpi", "MPICH", "PMI_SIZE"},
    /* Neither (the probe refuses it): no launcher variable names it. */
    {"an unknown MPI", "", "its launcher", "", ""},
};
static const struct mpi_abi_impl *impl = &impls[2];

static void load(void)
{
    const char *named = getenv("PLEXUS_MPI_ABI_LIBRARY");
    const char *name = named && *named ? named : "libmpi_abi.so.1";
    /* Local: nothing of it is visible to the next library loaded, so two
     * MPIs never meet in one namespace. */
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "%s cannot be loaded (%.200s)", name, dlerror());
        return;
    }
    struct {
        const char *name;
        void **at;
    } want[] = {
#define PLX_MPI_ABI_WANT(f) {#f, (void **)&plx_abi_##f},
        PLX_MPI_ABI_CALLS(PLX_MPI_ABI_WANT)
#undef PLX_MPI_ABI_WANT
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!(*want[i].at = dlsym(h, want[i].name))) {
            snprintf(why, sizeof why, "%s lacks %s: not an MPI of the standard ABI", name, want[i].name);
            return; /* the handle stays: the symbols found so far point into it */
        }
    }
    Dl_info info;
    if (dladdr((void *)plx_abi_MPI_Init, &info) && info.dli_fname)
        snprintf(file, sizeof file, "%s", info.dli_fname);
    static char text[1 << 16]; /* MPICH writes its whole configure line */
    int len = 0;
    MPI_Get_library_version(text, &len); /* allowed before MPI_Init */
    if (strstr(text, "MPICH"))
        impl = &impls[0];
    else if (strstr(text, "Open MPI"))
        impl = &impls[1];
    loaded = 1;
}

const char *mpi__abi_load(void)
{
    pthread_once(&once, load);
    return loaded ? NULL : why;
}

const struct mpi_abi_impl *mpi__abi_impl(void)
{
    mpi__abi_load();
    return impl;
}

const char *mpi__abi_file(void)
{
    mpi__abi_load();
    return file;
}
