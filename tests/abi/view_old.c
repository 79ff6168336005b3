/* view_old.c - a plugin of ABI 1.2 (built from its headers, abi_minor.py) that reads
 * its key untyped, through the process-wide host, inside comm_create: the
 * way such plugins were promised the new communicator's configuration
 * (options over the files). comm_create fails and says what it read unless
 * [viewold] mark is "from-option"; one rank only, nothing to send. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plexus/backend.h>

static const struct plx_host *host;

static int probe(struct plx_probe_result *out)
{
    out->state = PLX_PROBE_USABLE;
    snprintf(out->reason, sizeof out->reason, "one rank, reads its key in comm_create");
    return 0;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    uint32_t size = out->struct_size;
    struct plx_caps caps = {.struct_size = size, .dtypes = PLX_BIT(PLX_DTYPE_COUNT) - 1,
                            .redops = PLX_BIT(PLX_REDOP_COUNT) - 1, .mem_kinds = PLX_BIT(PLX_MEM_HOST)};
    memcpy(out, &caps, size < sizeof caps ? size : sizeof caps);
    return 0;
}

static int comm_create(const struct plx_comm_args *a, void **comm)
{
    const char *mark = host->config_get(host->ctx, "mark");
    if (a->size != 1)
        return host->error(host->ctx, PLX_ERR_UNSUPPORTED, "viewold: one rank only");
    if (!mark || strcmp(mark, "from-option"))
        return host->error(host->ctx, PLX_ERR_CONFIG, "viewold: comm_create read mark = '%s'", mark ? mark : "(unset)");
    *comm = malloc(1);
    return *comm ? 0 : PLX_ERR_NOMEM;
}

static int comm_destroy(void *comm)
{
    free(comm);
    return 0;
}

static int test(void *comm, void *req, int *done)
{
    (void)comm, (void)req;
    *done = 1;
    return 0;
}

static void req_free(void *comm, void *req)
{
    (void)comm, (void)req;
}

static const struct plx_param params[] = {
    {"mark", "", "what comm_create must read"},
    {NULL, NULL, NULL},
};

static const struct plx_backend backend = {
    .struct_size = sizeof backend, .abi_minor = 2, .name = "viewold", .version = "0",
    .description = "ABI 1.2: an untyped key read in comm_create", .params = params,
    .probe = probe, .get_caps = get_caps, .comm_create = comm_create, .comm_destroy = comm_destroy,
    .test = test, .req_free = req_free,
};

PLX_BACKEND_EXPORT int plx_backend_entry_v1(const struct plx_host *h, uint32_t *minor, const struct plx_backend **out)
{
    host = h;
    if (*minor > 2)
        *minor = 2;
    *out = &backend;
    return 0;
}
