/* launcher_store.c - rank 0's part of a bootstrap through a launcher's
 * key-value space (PMIx, PMI): host the store on a port the kernel picks,
 * at this host's name, for the address to be published. */
#include <stdio.h>
#include <unistd.h>

#include "comm.h"
#include "error.h"
#include "store_tcp.h"

int plx__launcher_host_store(const struct plx_config *cfg, const char *who, char *url, size_t n)
{
    struct plx__store_limits lim;
    struct plx__store_server *srv;
    char host[256];
    int port, rc;
    if (gethostname(host, sizeof host) != 0 || !host[0])
        return plx__err(PLX_ERR_SYSTEM, "%s bootstrap: rank 0 cannot read its host name", who);
    host[sizeof host - 1] = '\0';
    if ((rc = plx__store_limits_from_config(cfg, &lim)) != 0 ||
        (rc = plx__store_hosted_acquire_any(host, &lim, &srv, &port)) != 0)
        return rc;
    /* The server keeps serving once released; the store open that follows
     * takes it again by host and port. */
    plx__store_hosted_release(srv);
    snprintf(url, n, "tcp://%s:%d", host, port);
    return 0;
}
