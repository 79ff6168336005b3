/* ulfm.c - ULFM (MPI's user-level failure mitigation) as the loaded MPI
 * library offers it. The symbols are looked up in the library that holds
 * MPI_Init, not taken from mpi.h: a plugin built against one build of an
 * MPI must not assume another build has them. Their presence is not enough:
 * MPICH exports them from every build, but only its ch3 device implements
 * them; on ch4 a call aborts the process. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ulfm.h"

static struct mpi_ulfm state;
static const char *impl_name;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* "Open MPI v4.1.4" or "MPICH 4.0.2 (ch4:ucx)" from the library's version text. */
static void version_of(const char *text, char *out, size_t n, char *device, size_t dn)
{
    device[0] = '\0';
    const char *d = strstr(text, "MPICH Device:");
    if (d) {
        d += strlen("MPICH Device:");
        d += strspn(d, " \t");
        snprintf(device, dn, "%.*s", (int)strcspn(d, " \t\n"), d);
    }
    const char *v = strstr(text, "MPICH Version:");
    if (v) {
        v += strlen("MPICH Version:");
        v += strspn(v, " \t");
        snprintf(out, n, "MPICH %.*s", (int)strcspn(v, " \t\n"), v);
        return;
    }
    snprintf(out, n, "%.*s", (int)strcspn(text, ",\n"), text);
}

/* Open MPI builds ULFM in but runs it only in a job that asked for it
 * (mpirun --with-ft ulfm, or the MCA parameter mpi_ft_enable): otherwise
 * a revoke is accepted and never reaches a peer, and a failed process ends
 * the job. 1: on, 0: off, -1: no such parameter (not Open MPI 5's ULFM). */
static int ompi_ft_enabled(void)
{
    int provided = 0, index = -1, count = 0, on = -1;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return -1;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index("mpi_ft_enable", &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, NULL, &h, &count) == MPI_SUCCESS) {
        int v[4] = {0};
        if (count == 1 && MPI_T_cvar_read(h, v) == MPI_SUCCESS)
            on = v[0] != 0;
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return on;
}

static void probe_once(void)
{
    static char text[1 << 16]; /* MPICH writes its whole configure line */
    int len = 0;
    MPI_Get_library_version(text, &len); /* allowed before MPI_Init */
    char version[128], device[64];
    version_of(text, version, sizeof version, device, sizeof device);
    Dl_info info;
    void *lib = NULL;
    if (dladdr((void *)&MPI_Init, &info) && info.dli_fname)
        lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    const char *file = lib ? strrchr(info.dli_fname, '/') : NULL;
    file = file ? file + 1 : lib ? info.dli_fname : "the MPI library";
    if (lib) {
        *(void **)&state.revoke = dlsym(lib, "MPIX_Comm_revoke");
        *(void **)&state.shrink = dlsym(lib, "MPIX_Comm_shrink");
        *(void **)&state.agree = dlsym(lib, "MPIX_Comm_agree");
    }
    if (!state.revoke || !state.shrink || !state.agree) {
        const char *names[3] = {"MPIX_Comm_revoke", "MPIX_Comm_shrink", "MPIX_Comm_agree"};
        const int have[3] = {state.revoke != NULL, state.shrink != NULL, state.agree != NULL};
        char missing[96] = "";
        for (int i = 0; i < 3; i++)
            if (!have[i])
                snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", missing[0] ? ", " : "",
                         names[i]);
#if defined(PLX_MPI_ABI)
        /* ULFM's MPIX_ calls are no part of the MPI-5 ABI: an ABI library may lack them although its MPI has them. */
        snprintf(state.why, sizeof state.why, "%s: its standard-ABI library %s has no %s", version, file, missing);
#else
        snprintf(state.why, sizeof state.why, "%s built without ULFM: %s has no %s", version, file, missing);
#endif
    } else if (!strcmp(impl_name, "MPICH") && strncmp(device, "ch3", 3) != 0) {
        snprintf(state.why, sizeof state.why, "%s with device %s: %s exports MPIX_Comm_revoke/shrink/agree, but "
                 "only MPICH's ch3 device implements them (on %s a call aborts the process)", version,
                 device[0] ? device : "?", file, device[0] ? device : "this device");
    } else if (!strcmp(impl_name, "Open MPI") && ompi_ft_enabled() == 0) {
        snprintf(state.why, sizeof state.why, "%s has ULFM (%s) but this job runs without it: start it with "
                 "`mpirun --with-ft ulfm` (or set the MCA parameter mpi_ft_enable=1)", version, file);
    } else {
        state.usable = 1;
        snprintf(state.why, sizeof state.why, "%s: MPIX_Comm_revoke/shrink/agree in %s", version, file);
    }
    if (!state.usable)
        state.revoke = NULL, state.shrink = NULL, state.agree = NULL;
}

const struct mpi_ulfm *mpi__ulfm(const char *impl)
{
    impl_name = impl;
    pthread_once(&once, probe_once);
    return &state;
}
