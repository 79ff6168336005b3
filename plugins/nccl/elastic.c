/* elastic.c - ncclCommRevoke / ncclCommShrink / ncclCommGrow in the loaded
 * NCCL, by dlsym (a plugin built here must not assume the NCCL it meets has
 * them). ncclCommShrink serves plx_comm_shrink (plugin.c), with the set of
 * survivors the core agreed on through the job's store. ncclCommRevoke is
 * reported, not used: it stops only the calling rank's work, while
 * plx_comm_revoke must reach every rank (that needs a notice through the
 * job's store that the other ranks watch), so plx_comm_revoke refuses on
 * nccl, saying so. ncclCommGrow is not mapped: plx_comm_grow builds the
 * grown communicator from the store, which nccl can (its ranks meet there). */
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
    snprintf(e->calls, sizeof e->calls, "ncclCommRevoke %s (not used), ncclCommShrink %s%s, ncclCommGrow %s (not used)",
             e->revoke ? "present" : "absent", e->shrink ? "present" : "absent",
             e->shrink ? " (plx_comm_shrink)" : "", e->grow ? "present" : "absent");
}

int nccl_comm_revoke(void *comm)
{
    (void)comm;
    const struct nccl_elastic *e = &nccl_elastic;
    return plx_plugin_error(nccl_host, PLX_ERR_UNSUPPORTED, "nccl: plx_comm_revoke is not mapped to ncclCommRevoke, "
                            "which stops only this rank's work (the other ranks would not hear of it); NCCL %d.%d.%d: "
                            "%s", e->version / 10000, e->version / 100 % 100, e->version % 100, e->calls);
}
