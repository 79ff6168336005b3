/* A minimal backend for loader tests, built several times with -D flags:
 * FAKE_NAME (declared name), FAKE_ENTRY_V2 (export only the ABI 2 symbol),
 * FAKE_NO_ENTRY (export no entry at all). */
#include <string.h>

#include "plexus/backend.h"

static int probe(struct plx_probe_result *out)
{
    out->state = PLX_PROBE_USABLE;
    strcpy(out->reason, "fake");
    return 0;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    out->flags = 0;
    return 0;
}

static int comm_create(const struct plx_comm_args *args, void **comm)
{
    (void)args;
    (void)comm;
    return PLX_ERR_UNSUPPORTED;
}

static int comm_destroy(void *comm)
{
    (void)comm;
    return 0;
}

static int test(void *comm, void *req, int *done)
{
    (void)comm;
    (void)req;
    *done = 1;
    return 0;
}

static void req_free(void *comm, void *req)
{
    (void)comm;
    (void)req;
}

static const struct plx_backend fake = {
    .struct_size = sizeof fake, .abi_minor = PLX_ABI_MINOR, .name = FAKE_NAME, .version = "0",
    .probe = probe, .get_caps = get_caps, .comm_create = comm_create, .comm_destroy = comm_destroy,
    .test = test, .req_free = req_free,
};

#if defined(FAKE_ENTRY_V2)
PLX_BACKEND_EXPORT int plx_backend_entry_v2(const struct plx_host *h, uint32_t *minor, const struct plx_backend **out)
#elif defined(FAKE_NO_ENTRY)
PLX_BACKEND_EXPORT int not_a_backend(const struct plx_host *h, uint32_t *minor, const struct plx_backend **out)
#else
PLX_BACKEND_EXPORT int plx_backend_entry_v1(const struct plx_host *h, uint32_t *minor, const struct plx_backend **out)
#endif
{
    (void)h;
    if (*minor > PLX_ABI_MINOR)
        *minor = PLX_ABI_MINOR;
    *out = &fake;
    return 0;
}
