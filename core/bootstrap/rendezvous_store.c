/* rendezvous_store.c - the job's store: the caller's own (callbacks), one
 * plexus opens by url, or torchrun's agent store, which plexus joins as a
 * client with its keys where torch's workers put theirs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "error.h"
#include "store.h"

int plx__rendezvous_torchelastic(const char *init, struct plx__rendezvous *r)
{
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (!agent || strcmp(agent, "True") || (init && strcmp(init, "env://")))
        return 0;
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    const char *attempt = getenv("TORCHELASTIC_RESTART_COUNT");
    if (!addr || !*addr || !port || !*port)
        return plx__err(PLX_ERR_INVALID_ARG, "TORCHELASTIC_USE_AGENT_STORE=True (torchrun) but MASTER_ADDR or "
                        "MASTER_PORT is not set: cannot find the agent's store");
    char *end;
    long n = attempt ? strtol(attempt, &end, 10) : -1;
    if (!attempt || !*attempt || *end || n < 0)
        return plx__err(PLX_ERR_INVALID_ARG, "TORCHELASTIC_USE_AGENT_STORE=True (torchrun) but "
                        "TORCHELASTIC_RESTART_COUNT='%s' is not a restart count", attempt ? attempt : "");
    /* The agent (node 0's) hosts a TCPStore on MASTER_PORT: every rank is a
     * client, and keys go under the attempt, so a restarted attempt never
     * reads the keys of the one before. */
    snprintf(r->url, sizeof r->url, "tcp://%s:%s", addr, port);
    /* torch's TCPStore client writes "/" before every key on the wire, and
     * its workers' PrefixStore adds "/worker/attempt_N/": the same bytes
     * here put plexus's keys where a torch worker of this attempt sees them
     * (as "world/..."). */
    snprintf(r->key_prefix, sizeof r->key_prefix, "//worker/attempt_%ld", n);
    r->client_only = 1;
    return 1;
}

int plx__rendezvous_store_open(const struct plx_config *v, const struct plx_comm_options *opt,
                               const struct plx__rendezvous *rv, int rank, int size, int64_t timeout_ms,
                               struct plx_store **out)
{
    struct plx_store *s = NULL;
    int rc;
    *out = NULL;
    if (opt->store)
        rc = plx__store_external_open(opt->store, timeout_ms, &s);
    else if (!strncmp(rv->url, "pmix://", 7)) {
        char url[sizeof rv->url];
        rc = plx__pmix_store_url(v, rv, timeout_ms, url, sizeof url);
        if (rc == 0)
            rc = plx__store_open_in(v, url, rank, size, timeout_ms, &s);
    } else if (!strncmp(rv->url, "pmi://", 6)) {
        char url[sizeof rv->url];
        rc = plx__pmi_store_url(v, rv, timeout_ms, url, sizeof url);
        if (rc == 0)
            rc = plx__store_open_in(v, url, rank, size, timeout_ms, &s);
    } else if (rv->url[0])
        /* rank -1: join as a client, never host (a launcher does). */
        rc = plx__store_open_in(v, rv->url, rv->client_only ? -1 : rank, size, timeout_ms, &s);
    else
        return 0;
    if (rc == PLX_ERR_INVALID_ARG && rv->bootstrap)
        plx__err_prefix("the store url from %s: ", rv->bootstrap);
    if (rc != 0 || !rv->key_prefix[0]) {
        *out = s;
        return rc;
    }
    rc = plx__store_prefixed(s, rv->key_prefix, out);
    plx__store_release(s); /* the view holds it */
    return rc;
}
