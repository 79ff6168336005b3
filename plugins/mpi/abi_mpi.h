/* abi_mpi.h - MPI for the plugin built against the MPI Forum's standard ABI
 * (mpi_abi.h, MPI 5): plugin.c and ulfm.c make the same calls as on an MPI
 * they link, here through pointers that abi.c fills from libmpi_abi.so.1,
 * loaded at run time: one plugin file serves every MPI with that ABI
 * (MPICH 5, Open MPI 6), and nothing links it. Stability: internal. */
#ifndef PLX_MPI_ABI_MPI_H
#define PLX_MPI_ABI_MPI_H

#include <mpi_abi.h>

/* Every MPI call the plugin makes (a call missing here does not link). */
#define PLX_MPI_ABI_CALLS(X) \
    X(MPI_Abi_get_version) X(MPI_Abort) X(MPI_Allgather) X(MPI_Allgatherv) X(MPI_Allreduce) X(MPI_Alltoall) \
    X(MPI_Alltoallv) X(MPI_Barrier) X(MPI_Bcast) X(MPI_Cancel) X(MPI_Comm_dup) X(MPI_Comm_free) X(MPI_Comm_get_attr) \
    X(MPI_Comm_group) X(MPI_Comm_rank) X(MPI_Comm_set_errhandler) X(MPI_Comm_size) X(MPI_Comm_split) \
    X(MPI_Error_class) X(MPI_Error_string) X(MPI_Finalize) X(MPI_Finalized) X(MPI_Gather) X(MPI_Get_library_version) \
    X(MPI_Group_free) X(MPI_Group_size) X(MPI_Group_translate_ranks) X(MPI_Iallgather) X(MPI_Iallgatherv) \
    X(MPI_Iallreduce) X(MPI_Ialltoall) X(MPI_Ialltoallv) X(MPI_Ibarrier) X(MPI_Ibcast) X(MPI_Igather) X(MPI_Init) \
    X(MPI_Init_thread) X(MPI_Initialized) X(MPI_Irecv) X(MPI_Ireduce) X(MPI_Ireduce_scatter_block) X(MPI_Iscatter) \
    X(MPI_Isend) X(MPI_Op_create) X(MPI_Op_free) X(MPI_Query_thread) X(MPI_Reduce) X(MPI_Reduce_scatter_block) \
    X(MPI_Request_free) X(MPI_Scatter) X(MPI_T_cvar_get_index) X(MPI_T_cvar_handle_alloc) X(MPI_T_cvar_handle_free) \
    X(MPI_T_cvar_read) X(MPI_T_finalize) X(MPI_T_init_thread) X(MPI_Test) X(MPI_Type_commit) X(MPI_Type_contiguous) \
    X(MPI_Type_free)

#define PLX_MPI_ABI_DECLARE(f) extern __typeof__(f) *plx_abi_##f;
PLX_MPI_ABI_CALLS(PLX_MPI_ABI_DECLARE)
#undef PLX_MPI_ABI_DECLARE

/* Loads the library once (PLEXUS_MPI_ABI_LIBRARY, else libmpi_abi.so.1):
 * NULL when every call is there, else why not, in words. */
const char *mpi__abi_load(void);
/* The implementation behind the library, from its version text (loaded):
 * its name, its launcher's variable and command, and the other's. */
struct mpi_abi_impl {
    const char *impl, *own_env, *launcher, *other_impl, *other_env;
};
const struct mpi_abi_impl *mpi__abi_impl(void);
/* The file the library was loaded from, for what plexus-info says. */
const char *mpi__abi_file(void);

#define MPI_Abi_get_version (*plx_abi_MPI_Abi_get_version)
#define MPI_Abort (*plx_abi_MPI_Abort)
#define MPI_Allgather (*plx_abi_MPI_Allgather)
#define MPI_Allgatherv (*plx_abi_MPI_Allgatherv)
#define MPI_Allreduce (*plx_abi_MPI_Allreduce)
#define MPI_Alltoall (*plx_abi_MPI_Alltoall)
#define MPI_Alltoallv (*plx_abi_MPI_Alltoallv)
#define MPI_Barrier (*plx_abi_MPI_Barrier)
#define MPI_Bcast (*plx_abi_MPI_Bcast)
#define MPI_Cancel (*plx_abi_MPI_Cancel)
#define MPI_Comm_dup (*plx_abi_MPI_Comm_dup)
#define MPI_Comm_free (*plx_abi_MPI_Comm_free)
#define MPI_Comm_get_attr (*plx_abi_MPI_Comm_get_attr)
#define MPI_Comm_group (*plx_abi_MPI_Comm_group)
#define MPI_Comm_rank (*plx_abi_MPI_Comm_rank)
#define MPI_Comm_set_errhandler (*plx_abi_MPI_Comm_set_errhandler)
#define MPI_Comm_size (*plx_abi_MPI_Comm_size)
#define MPI_Comm_split (*plx_abi_MPI_Comm_split)
#define MPI_Error_class (*plx_abi_MPI_Error_class)
#define MPI_Error_string (*plx_abi_MPI_Error_string)
#define MPI_Finalize (*plx_abi_MPI_Finalize)
#define MPI_Finalized (*plx_abi_MPI_Finalized)
#define MPI_Gather (*plx_abi_MPI_Gather)
#define MPI_Get_library_version (*plx_abi_MPI_Get_library_version)
#define MPI_Group_free (*plx_abi_MPI_Group_free)
#define MPI_Group_size (*plx_abi_MPI_Group_size)
#define MPI_Group_translate_ranks (*plx_abi_MPI_Group_translate_ranks)
#define MPI_Iallgather (*plx_abi_MPI_Iallgather)
#define MPI_Iallgatherv (*plx_abi_MPI_Iallgatherv)
#define MPI_Iallreduce (*plx_abi_MPI_Iallreduce)
#define MPI_Ialltoall (*plx_abi_MPI_Ialltoall)
#define MPI_Ialltoallv (*plx_abi_MPI_Ialltoallv)
#define MPI_Ibarrier (*plx_abi_MPI_Ibarrier)
#define MPI_Ibcast (*plx_abi_MPI_Ibcast)
#define MPI_Igather (*plx_abi_MPI_Igather)
#define MPI_Init (*plx_abi_MPI_Init)
#define MPI_Init_thread (*plx_abi_MPI_Init_thread)
#define MPI_Initialized (*plx_abi_MPI_Initialized)
#define MPI_Irecv (*plx_abi_MPI_Irecv)
#define MPI_Ireduce (*plx_abi_MPI_Ireduce)
#define MPI_Ireduce_scatter_block (*plx_abi_MPI_Ireduce_scatter_block)
#define MPI_Iscatter (*plx_abi_MPI_Iscatter)
#define MPI_Isend (*plx_abi_MPI_Isend)
#define MPI_Op_create (*plx_abi_MPI_Op_create)
#define MPI_Op_free (*plx_abi_MPI_Op_free)
#define MPI_Query_thread (*plx_abi_MPI_Query_thread)
#define MPI_Reduce (*plx_abi_MPI_Reduce)
#define MPI_Reduce_scatter_block (*plx_abi_MPI_Reduce_scatter_block)
#define MPI_Request_free (*plx_abi_MPI_Request_free)
#define MPI_Scatter (*plx_abi_MPI_Scatter)
#define MPI_T_cvar_get_index (*plx_abi_MPI_T_cvar_get_index)
#define MPI_T_cvar_handle_alloc (*plx_abi_MPI_T_cvar_handle_alloc)
#define MPI_T_cvar_handle_free (*plx_abi_MPI_T_cvar_handle_free)
#define MPI_T_cvar_read (*plx_abi_MPI_T_cvar_read)
#define MPI_T_finalize (*plx_abi_MPI_T_finalize)
#define MPI_T_init_thread (*plx_abi_MPI_T_init_thread)
#define MPI_Test (*plx_abi_MPI_Test)
#define MPI_Type_commit (*plx_abi_MPI_Type_commit)
#define MPI_Type_contiguous (*plx_abi_MPI_Type_contiguous)
#define MPI_Type_free (*plx_abi_MPI_Type_free)

#endif
