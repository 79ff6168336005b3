/* bootstrap_describe.c - which bootstrap plx_comm_init would use here and
 * why, for plexus-info: the same resolution plx_comm_init runs. */
#include <stdio.h>

#include "bootstrap.h"
#include "error.h"

int plx_bootstrap_describe(const struct plx_comm_options *opt, char *buf, size_t len)
{
    struct plx_comm_options o;
    struct plx__rendezvous rv;
    if (!buf || len == 0)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_bootstrap_describe: no buffer");
    if (!opt) {
        plx_comm_options_init(&o);
        opt = &o;
    }
    int rc = plx__rendezvous_resolve(opt, &rv);
    if (rc != 0) {
        snprintf(buf, len, "no bootstrap: %s", plx_last_error());
        return rc;
    }
    snprintf(buf, len, "rank %d of %d (from %s); rendezvous: %s%s%s: %s", rv.rank, rv.size, rv.source,
             rv.bootstrap, rv.url[0] ? " at " : "", rv.url, rv.why);
    return PLX_OK;
}
