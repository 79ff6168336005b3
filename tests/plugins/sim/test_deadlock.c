/* Coroutine ranks that deadlock (each receives from the other, nobody
 * sends) get PLX_ERR_INVALID_USAGE naming the deadlock from plx_recv at
 * once, and plexus_sim_run_ranks returns it too: not PLX_ERR_TIMEOUT,
 * which the core takes for the end of a wait slice and asks again, until
 * the operation's deadline (TIMEOUT_MS here). Nothing is timed: on the old
 * code the receives return PLX_ERR_TIMEOUT after TIMEOUT_MS and fail the
 * status check. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"

#define TIMEOUT_MS 20000

static int failures;
static char url[64];

static void rank_body(int rank, void *arg)
{
    (void)arg;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.init = url;
    o.rank = rank;
    o.size = 2;
    o.timeout_ms = TIMEOUT_MS;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        printf("FAIL rank %d: plx_comm_init: %s\n", rank, plx_last_error());
        failures++;
        return;
    }
    int x[4];
    int rc = plx_recv(c, x, 4, PLX_I32, 1 - rank, 7);
    const char *msg = rc ? plx_last_error() : "";
    int ok = rc == PLX_ERR_INVALID_USAGE && strstr(msg, "deadlock");
    printf("%s rank %d: plx_recv from rank %d: %s: %s\n", ok ? "ok  " : "FAIL", rank, 1 - rank, plx_err_name(rc), msg);
    failures += !ok;
    plx_comm_destroy(c);
}

int main(void)
{
    const char *root = getenv("PLEXUS_BUILD_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/sim/plexus-sim.so", root ? root : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int (*run)(int, size_t, void (*)(int, void *), void *) =
        h ? (int (*)(int, size_t, void (*)(int, void *), void *))dlsym(h, "plexus_sim_run_ranks") : NULL;
    if (!run) {
        printf("SKIP: no sim plugin with coroutine ranks at %s: %s\n", path, dlerror());
        return 77;
    }
    snprintf(url, sizeof url, "mem://deadlock-%d", (int)getpid());
    int rc = run(2, (size_t)1 << 20, rank_body, NULL);
    int ok = rc == PLX_ERR_INVALID_USAGE;
    printf("%s plexus_sim_run_ranks: %s\n", ok ? "ok  " : "FAIL", plx_err_name(rc));
    failures += !ok;
    dlclose(h);
    return failures ? 1 : 0;
}
