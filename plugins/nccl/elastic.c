/* elastic.c - ncclCommRevoke / ncclCommShrink / ncclCommGrow in the loaded
 * NCCL, by dlsym (a plugin built here must not assume the NCCL it meets has
 * them). They are reported, not used: ncclCommRevoke stops only the calling
 * rank's work, while plx_comm_revoke must reach every rank (that needs a
 * notice through the job's store that the other ranks watch), and
 * ncclCommShrink needs the core's agreed set of survivors handed to the
 * backend, which the plugin ABI has no entry for. Until both exist
 * plx_comm_revoke and plx_comm_shrink refuse on nccl, saying so. */
#include <dlfcn.h>
#include <stdio.h>

#include "elastic.h"
#include "libs.h"

struct nccl_elastic nccl_elastic;

void nccl_elastic_probe(void *libnccl, int version)
{
    struct nccl_elastic *e = &nccl_elastic;
    e->revoke = dlsym(libnccl, "ncclCommRevoke");
    e->shrink = dlsym(libnccl, "ncclCommShrink");
    e->grow = dlsym(libnccl, "ncclCommGrow");
    e->version = version;
    snprintf(e->calls, sizeof e->calls, "ncclCommRevoke %s, ncclCommShrink %s, ncclCommGrow %s (not used yet)",
             e->revoke ? "present" : "absent", e->shrink ? "present" : "absent", e->grow ? "present" : "absent");
}

int nccl_comm_revoke(void *comm)
{
    (void)comm;
    const struct nccl_elastic *e = &nccl_elastic;
    return plx_plugin_error(nccl_host, PLX_ERR_UNSUPPORTED, "nccl: plx_comm_revoke is not mapped to ncclCommRevoke, "
                            "which stops only this rank's work (the other ranks would not hear of it); NCCL %d.%d.%d: "
                            "%s", e->version / 10000, e->version / 100 % 100, e->version % 100, e->calls);
}
