/* fake_backend.c - a backend plugin whose every answer to the loader comes
 * from fuzz bytes: what the entry point returns, the ABI minor it answers,
 * the struct_size it declares (the descriptor is allocated at exactly that
 * size, so a loader read past it is an ASan report), which operations are
 * NULL, its name, what get_caps and probe return and write.
 *
 * fuzz_loader.c dlopens it first and hands it the input through
 * fuzz_fake_backend_input(); the loader's own dlopen of the same file then
 * gets the same copy. The descriptor is replaced (and the old one freed) on
 * the next input: the loader copies it, as backend.h allows it to. */
#include <stdlib.h>
#include <string.h>

#include "plexus/backend.h"

/* Bytes of the current input, read front to back; missing bytes read 0. */
static const unsigned char *in;
static size_t in_len, in_pos;

static unsigned take8(void)
{
    return in_pos < in_len ? in[in_pos++] : 0;
}

static uint32_t take32(void)
{
    uint32_t v = take8();
    v |= take8() << 8;
    v |= take8() << 16;
    return v | (uint32_t)take8() << 24;
}

/* Decisions, taken when the input arrives. */
static struct {
    unsigned entry_mode, minor, nulls, name_mode, str_mode, host_calls;
    uint32_t size;
    int caps_rc, probe_rc, probe_state;
    struct plx_caps caps;
    char reason[256];
    char name[64], version[32], log_text[48], key[48];
} d;
static struct plx_backend *desc;

static const struct plx_param params[] = {
    {"fuzz_key", "1", "a key"},
    {"other", NULL, NULL},
    {NULL, NULL, NULL},
};

static int probe(struct plx_probe_result *out)
{
    /* Caller-sized output: write no more than out->struct_size. */
    struct plx_probe_result r = {.struct_size = out->struct_size, .state = d.probe_state};
    memcpy(r.reason, d.reason, sizeof r.reason); /* not always NUL-terminated */
    memcpy(out, &r, out->struct_size < sizeof r ? out->struct_size : sizeof r);
    return d.probe_rc;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    struct plx_caps c = d.caps;
    c.struct_size = out->struct_size;
    memcpy(out, &c, out->struct_size < sizeof c ? out->struct_size : sizeof c);
    return d.caps_rc;
}

static int op_supported(void *comm, int coll, int dtype, int op, int mem_kind)
{
    (void)comm, (void)coll, (void)dtype, (void)op, (void)mem_kind;
    return 0;
}

static int comm_create(const struct plx_comm_args *args, void **comm)
{
    (void)args, (void)comm;
    return PLX_ERR_UNSUPPORTED;
}

static int comm_destroy(void *comm)
{
    (void)comm;
    return 0;
}

static int comm_abort(void *comm)
{
    (void)comm;
    return 0;
}

static int p2p(void *comm, const struct plx_p2p_args *a, void **req)
{
    (void)comm, (void)a, (void)req;
    return PLX_ERR_UNSUPPORTED;
}

static int collective(void *comm, const struct plx_coll_args *a, void **req)
{
    (void)comm, (void)a, (void)req;
    return PLX_ERR_UNSUPPORTED;
}

static int test(void *comm, void *req, int *done)
{
    (void)comm, (void)req;
    *done = 1;
    return 0;
}

static int wait_req(void *comm, void *req, int64_t timeout_ms)
{
    (void)comm, (void)req, (void)timeout_ms;
    return 0;
}

static void req_free(void *comm, void *req)
{
    (void)comm, (void)req;
}

static int comm_split(void *comm, int color, int key, const struct plx_comm_args *args, void **out)
{
    (void)comm, (void)color, (void)key, (void)args, (void)out;
    return PLX_ERR_UNSUPPORTED;
}

static void finalize(void)
{
}

static int comm_losses(void *comm, char *msg, size_t len)
{
    (void)comm;
    if (len)
        msg[0] = '\0';
    return 0;
}

/* Copies up to n-1 input bytes as a string (it may contain anything but NUL). */
static void take_str(char *dst, size_t n)
{
    size_t len = take8() % n;
    size_t i = 0;
    while (i < len && in_pos < in_len && in[in_pos])
        dst[i++] = (char)in[in_pos++];
    dst[i] = '\0';
}

PLX_BACKEND_EXPORT void fuzz_fake_backend_input(const unsigned char *data, size_t len)
{
    in = data;
    in_len = len;
    in_pos = 0;
    memset(&d, 0, sizeof d);
    d.entry_mode = take8();
    d.minor = take8();
    d.size = take8() | take8() << 8;
    d.nulls = take8() | take8() << 8;
    d.name_mode = take8();
    d.str_mode = take8();
    d.host_calls = take8();
    d.caps_rc = take8() % 4 == 3 ? PLX_ERR_INTERNAL : 0;
    d.caps.flags = take32();
    d.caps.collectives = take32();
    d.caps.dtypes = take32();
    d.caps.mem_kinds = take32();
    unsigned pr = take8();
    d.probe_rc = pr % 8 == 7 ? PLX_ERR_SYSTEM : 0;
    d.probe_state = pr % 5 == 4 ? (int)take32() : (int)(pr % 5) % 3;
    for (size_t i = 0; i < sizeof d.reason; i++) /* the rest fills the reason, NUL or not */
        d.reason[i] = (char)take8();
    free(desc);
    desc = NULL;
}

/* The strings, read from the reason's bytes so they are fuzzed as well. */
static void fill_strings(void)
{
    in = (const unsigned char *)d.reason;
    in_len = sizeof d.reason;
    in_pos = 0;
    take_str(d.name, sizeof d.name);
    take_str(d.version, sizeof d.version);
    take_str(d.log_text, sizeof d.log_text);
    take_str(d.key, sizeof d.key);
}

PLX_BACKEND_EXPORT int plx_backend_entry_v1(const struct plx_host *h, uint32_t *minor,
                                            const struct plx_backend **out)
{
    fill_strings();
    if (d.host_calls & 1)
        h->log(h->ctx, (int)(d.host_calls >> 1) % 6, "fake: %s", d.log_text);
    if (d.host_calls & 0x40)
        (void)h->config_get(h->ctx, d.key);
    switch (d.entry_mode % 8) {
    case 7:
        return h->error(h->ctx, PLX_ERR_INTERNAL, "fake: entry fails (%s)", d.log_text);
    case 6:
        *out = NULL; /* success without a descriptor */
        return 0;
    default:
        break;
    }
    /* The minor it answers: usually the smaller of the two, sometimes not. */
    *minor = d.minor % 4 == 3 ? d.minor : (*minor < d.minor % 4 ? *minor : d.minor % 4);

    struct plx_backend full = {
        .struct_size = 0, .abi_minor = d.minor % 4, .name = d.name, .version = d.version,
        .description = "fuzzed", .params = params,
        .probe = probe, .get_caps = get_caps, .op_supported = op_supported, .comm_create = comm_create,
        .comm_destroy = comm_destroy, .comm_abort = comm_abort, .isend = p2p, .irecv = p2p,
        .collective = collective, .test = test, .wait = wait_req, .req_free = req_free,
        .comm_split = comm_split, .finalize = finalize, .comm_losses = comm_losses,
    };
    switch (d.name_mode % 4) {
    case 0: full.name = "fz"; break; /* its drop-in section */
    case 1: full.name = NULL; break;
    case 2: full.name = "FZ"; break;
    default: break;                   /* the fuzzed string */
    }
    if (d.str_mode & 1)
        full.version = NULL;
    if (d.str_mode & 2)
        full.description = NULL;
    if (d.str_mode & 4)
        full.params = NULL;
    /* Bit i of nulls clears the i-th operation. */
    void (**ops[])(void) = {
        (void (**)(void))&full.probe, (void (**)(void))&full.get_caps, (void (**)(void))&full.op_supported,
        (void (**)(void))&full.comm_create, (void (**)(void))&full.comm_destroy,
        (void (**)(void))&full.comm_abort, (void (**)(void))&full.isend, (void (**)(void))&full.irecv,
        (void (**)(void))&full.collective, (void (**)(void))&full.test, (void (**)(void))&full.wait,
        (void (**)(void))&full.req_free, (void (**)(void))&full.comm_split, (void (**)(void))&full.finalize,
        (void (**)(void))&full.comm_losses,
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (d.nulls & (1u << i))
            *ops[i] = NULL;

    /* Declared size: mostly near the real sizes, where the edges are. */
    uint32_t size = d.size % 1024;
    if (d.size & 0x8000)
        size = (uint32_t)sizeof full - 24 + d.size % 48;
    size_t alloc = size < sizeof(uint32_t) ? sizeof(uint32_t) : size;
    desc = malloc(alloc);
    if (!desc)
        return PLX_ERR_NOMEM;
    memset(desc, 0xa5, alloc); /* fields of a newer ABI than ours: garbage to us */
    memcpy(desc, &full, alloc < sizeof full ? alloc : sizeof full);
    desc->struct_size = size;
    *out = desc;
    return 0;
}

/* What the harness checks the loader against. */
PLX_BACKEND_EXPORT uint32_t fuzz_fake_backend_declared_size(void)
{
    return desc ? desc->struct_size : 0;
}
