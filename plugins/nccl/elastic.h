/* elastic.h - what the loaded NCCL offers for a communicator that loses
 * ranks (ncclCommRevoke 2.28, ncclCommShrink 2.27, ncclCommGrow 2.29),
 * looked up in the library itself (elastic.c). Stability: internal. */
#ifndef PLX_NCCL_ELASTIC_H
#define PLX_NCCL_ELASTIC_H

#include <stddef.h>

struct nccl_elastic {
    void *revoke, *shrink, *grow; /* the library's entry points, or NULL */
    int version;                  /* ncclGetVersion's, 0: NCCL not loaded */
    char calls[160];              /* "ncclCommRevoke present, ...", for the probe's reason and refusals */
};

extern struct nccl_elastic nccl_elastic;

/* Look the three up in the dlopen handle of libnccl.so.2 (version as
 * ncclGetVersion says) and fill nccl_elastic. */
void nccl_elastic_probe(void *libnccl, int version);
/* plx_comm_revoke on nccl: refused, saying what the library has. */
int nccl_comm_revoke(void *comm);

#endif
