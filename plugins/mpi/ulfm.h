/* ulfm.h - whether the loaded MPI library can revoke and shrink (ULFM's
 * MPIX_Comm_revoke / MPIX_Comm_shrink / MPIX_Comm_agree), found at run time
 * in the library this plugin is linked to (ulfm.c). Stability: internal. */
#ifndef PLX_MPI_ULFM_H
#define PLX_MPI_ULFM_H

#if defined(PLX_MPI_ABI)
#include "abi_mpi.h"
#else
#include <mpi.h>
#endif

struct mpi_ulfm {
    int usable; /* the three calls exist and the library implements them */
    int (*revoke)(MPI_Comm comm);
    int (*shrink)(MPI_Comm comm, MPI_Comm *out);
    int (*agree)(MPI_Comm comm, int *flag);
    char why[320]; /* what was found, or why ULFM is absent: one line */
};

/* Probed once per process; never NULL. impl: "Open MPI" or "MPICH". */
const struct mpi_ulfm *mpi__ulfm(const char *impl);

#endif
