/* Compares our UCC declarations (layout_ours.c) with a real ucc.h. */
#include <stddef.h>
#include <stdio.h>
#include <ucc/api/ucc.h>

extern const long plx_ucc_ours[];

static const long real[] = {
    UCC_OK, UCC_INPROGRESS, UCC_OPERATION_INITIALIZED, UCC_THREAD_MULTIPLE, UCC_MEMORY_TYPE_CUDA,
    UCC_OP_SUM, UCC_OP_PROD, UCC_OP_MAX, UCC_OP_MIN, UCC_OP_AVG,
    UCC_COLL_TYPE_ALLGATHER, UCC_COLL_TYPE_ALLREDUCE, UCC_COLL_TYPE_ALLTOALL, UCC_COLL_TYPE_BARRIER,
    UCC_COLL_TYPE_BCAST, UCC_COLL_TYPE_GATHER, UCC_COLL_TYPE_REDUCE, UCC_COLL_TYPE_REDUCE_SCATTER,
    UCC_COLL_TYPE_SCATTER, (long)UCC_DT_BFLOAT16,
    (long)sizeof(ucc_lib_params_t), (long)sizeof(ucc_oob_coll_t), (long)sizeof(ucc_context_params_t),
    (long)offsetof(ucc_context_params_t, oob), (long)sizeof(ucc_team_params_t),
    (long)offsetof(ucc_team_params_t, oob), (long)offsetof(ucc_team_params_t, ep_map),
    (long)sizeof(ucc_coll_args_t), (long)offsetof(ucc_coll_args_t, dst), (long)offsetof(ucc_coll_args_t, op),
    (long)offsetof(ucc_coll_args_t, flags), (long)offsetof(ucc_coll_args_t, root),
    (long)offsetof(ucc_coll_args_t, cb), (long)sizeof(ucc_coll_buffer_info_t),
};

int main(void)
{
    int bad = 0;
    size_t n = sizeof real / sizeof real[0];
    for (size_t i = 0; i < n; i++)
        if (plx_ucc_ours[i] != real[i]) {
            fprintf(stderr, "item %zu: ours %ld, ucc.h %ld\n", i, plx_ucc_ours[i], real[i]);
            bad = 1;
        }
    if (plx_ucc_ours[n] != -12345) {
        fprintf(stderr, "the two lists have different lengths\n");
        bad = 1;
    }
    printf("ucc.h: %s\n", bad ? "MISMATCH" : "our declarations match");
    return bad;
}
