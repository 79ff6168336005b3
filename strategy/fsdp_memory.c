/* fsdp_memory.c - memory statistics: every byte FSDP holds, by category,
 * and where the offload policy places each category (host or device). The
 * core has no device allocator, so in this build every buffer is host
 * memory; device_alloc = 0 says so and the device figures are the policy's
 * placement (what a device-allocating build would hold there; not
 * verified here, there is no GPU). */
#include <stddef.h>
#include <string.h>

#include "fsdp_internal.h"

/* The first version of the struct ended with optim_estimate_bytes. */
#define MEMSTATS_V1_SIZE (offsetof(struct plx_fsdp_memstats, optim_estimate_bytes) + sizeof(double))

static void place(size_t bytes, int on_host, size_t *host, size_t *device)
{
    *host = on_host ? bytes : 0;
    *device = on_host ? 0 : bytes;
}

PLX_API int plx_fsdp_memory(const struct plx_fsdp *f, struct plx_fsdp_memstats *out)
{
    if (!f || !out || out->struct_size < MEMSTATS_V1_SIZE)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_memory: %s", !f || !out ? "fsdp or out is NULL"
                        : "struct_size is smaller than the first version's (set it to sizeof the struct)");
    struct plx_fsdp_memstats m;
    memset(&m, 0, sizeof m);
    double elems = 0;
    for (int k = 0; k < f->nunits; k++)
        elems += (double)f->units[k].valid;
    size_t comm = f->gbuf_bytes + f->gsend_bytes + f->reduce_bytes;
    m.param_bytes = f->shard_bytes + f->full_bytes;
    m.grad_bytes = f->grad_bytes;
    m.gather_bytes = f->gbuf_bytes + f->gsend_bytes;
    m.peak_bytes = f->peak;
    m.padding_bytes = f->padding_bytes;
    m.optim_estimate_bytes = elems * f->optim_factor;
    m.reduce_bytes = f->reduce_bytes;
    m.offload = f->offload;
    m.device_alloc = 0;
    int shard_host = f->offload != PLX_FSDP_OFFLOAD_NONE, rest_host = f->offload == PLX_FSDP_OFFLOAD_FULL;
    place(f->shard_bytes, shard_host, &m.shard_host_bytes, &m.shard_device_bytes);
    place(f->full_bytes, 0, &m.full_host_bytes, &m.full_device_bytes); /* gathered parameters: device */
    place(f->grad_bytes, rest_host, &m.grad_host_bytes, &m.grad_device_bytes);
    place(comm, 0, &m.comm_host_bytes, &m.comm_device_bytes);
    m.host_bytes = m.shard_host_bytes + m.full_host_bytes + m.grad_host_bytes + m.comm_host_bytes;
    m.device_bytes = m.shard_device_bytes + m.full_device_bytes + m.grad_device_bytes + m.comm_device_bytes;
    m.optim_host_bytes = rest_host ? m.optim_estimate_bytes : 0;
    m.optim_device_bytes = rest_host ? 0 : m.optim_estimate_bytes;
    /* Write only what the caller's struct has room for. */
    m.struct_size = out->struct_size;
    memcpy(out, &m, out->struct_size < sizeof m ? out->struct_size : sizeof m);
    return 0;
}
