/* launcher_store.c - rank 0's part of a bootstrap through a launcher's
 * key-value space (PMIx, PMI): host the store on a port the kernel picks,
 * at this host's name, for the address to be published; and the job
 * secret shared there, which only the job's processes can read, so the
 * store and tcp authenticate with nothing set by the user. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include "auth.h"
#include "bootstrap.h"
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

int plx__launcher_secret_make(char *out, size_t n)
{
    unsigned char raw[32];
    static const char hex[] = "0123456789abcdef";
    out[0] = '\0';
    const char *have = getenv(PLX__AUTH_ENV);
    if (have && *have)
        return 0; /* the user's own secret, on every rank */
    if (n < 2 * sizeof raw + 1 || getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return plx__err(PLX_ERR_SYSTEM, "launcher bootstrap: rank 0 cannot make a job secret (getrandom)");
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[2 * sizeof raw] = '\0';
    return plx__launcher_secret_adopt(out);
}

int plx__launcher_secret_adopt(const char *secret)
{
    const char *have = getenv(PLX__AUTH_ENV);
    if (!secret[0] || (have && *have)) /* rank 0 had one set: so do we (the launcher gave all the same) */
        return 0;
    /* The store and the tcp transport read the secret from the environment. */
    if (setenv(PLX__AUTH_ENV, secret, 1) != 0)
        return plx__err(PLX_ERR_SYSTEM, "launcher bootstrap: cannot set %s", PLX__AUTH_ENV);
    return 0;
}
