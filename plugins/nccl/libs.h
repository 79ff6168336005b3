/* libs.h - the CUDA driver and NCCL, loaded at run time, and the probe
 * that explains why they are not usable. Stability: internal. */
#ifndef PLX_NCCL_LIBS_H
#define PLX_NCCL_LIBS_H

#include "cuda_api.h"
#include "nccl_api.h"
#include "plexus/backend.h"
#include "plexus/plugin.h"

struct cuda_fns {
#define CUDA_FIELD(name, sym, args) CUresult(*name) args;
    PLX_CUDA_FUNCS(CUDA_FIELD)
#undef CUDA_FIELD
};

struct nccl_fns {
#define NCCL_FIELD(name, args) ncclResult_t(*name) args;
    PLX_NCCL_FUNCS(NCCL_FIELD)
#undef NCCL_FIELD
    const char *(*ncclGetErrorString)(ncclResult_t r);
};

extern const struct plx_host *nccl_host;
extern struct cuda_fns cu;
extern struct nccl_fns nc;
extern int nccl_version;

/* Load both libraries and check each step without initialising CUDA (the
 * GPUs are counted from the kernel driver's files); fills reason and returns
 * a PLX_PROBE_* state. Idempotent; cheap after the first call. */
int nccl_libs_probe(char *reason, size_t len);

/* After a usable probe: cuInit and the device count, once per process;
 * fills reason and returns a PLX_PROBE_* state. */
int nccl_cuda_ready(char *reason, size_t len);

#endif
