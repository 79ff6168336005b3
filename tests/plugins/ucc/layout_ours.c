/* Our UCC declarations, as numbers for layout_real.c to compare. */
#include <stddef.h>

#include "ucc_api.h"

const long plx_ucc_ours[] = {
    UCC_OK, UCC_INPROGRESS, UCC_OPERATION_INITIALIZED, UCC_THREAD_MULTIPLE, UCC_MEMORY_TYPE_CUDA,
    UCC_OP_SUM, UCC_OP_PROD, UCC_OP_MAX, UCC_OP_MIN, UCC_OP_AVG,
    UCC_COLL_TYPE_ALLGATHER, UCC_COLL_TYPE_ALLREDUCE, UCC_COLL_TYPE_ALLTOALL, UCC_COLL_TYPE_BARRIER,
    UCC_COLL_TYPE_BCAST, UCC_COLL_TYPE_GATHER, UCC_COLL_TYPE_REDUCE, UCC_COLL_TYPE_REDUCE_SCATTER,
    UCC_COLL_TYPE_SCATTER, (long)UCC_PREDEFINED_DT(13),
    (long)sizeof(ucc_lib_params_t), (long)sizeof(ucc_oob_coll_t), (long)sizeof(ucc_context_params_t),
    (long)offsetof(ucc_context_params_t, oob), (long)sizeof(ucc_team_params_t),
    (long)offsetof(ucc_team_params_t, oob), (long)offsetof(ucc_team_params_t, ep_map),
    (long)sizeof(ucc_coll_args_t), (long)offsetof(ucc_coll_args_t, dst), (long)offsetof(ucc_coll_args_t, op),
    (long)offsetof(ucc_coll_args_t, flags), (long)offsetof(ucc_coll_args_t, root),
    (long)offsetof(ucc_coll_args_t, cb), (long)sizeof(ucc_coll_buffer_info_t), -12345,
};
