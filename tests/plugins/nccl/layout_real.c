/* Compares our NCCL declarations (layout_ours.c) with the real nccl.h:
 * enum values, the unique id, and ncclConfig_t's size and layout. */
#include <nccl.h>
#include <stddef.h>
#include <stdio.h>

extern const long plx_nccl_ours[];

static const char *const names[] = {
    "ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError", "ncclInvalidArgument",
    "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress", "ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32",
    "ncclInt64", "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclSum", "ncclProd",
    "ncclMax", "ncclMin", "ncclAvg", "NCCL_UNIQUE_ID_BYTES", "sizeof(ncclUniqueId)", "NCCL_SPLIT_NOCOLOR",
    "NCCL_CONFIG_UNDEF_INT", "sizeof(ncclConfig_t)", "offsetof(blocking)", "offsetof(netName)",
    "offsetof(commName)", "offsetof(nvlinkCentricSched)",
};

static const long real[] = {
    ncclSuccess, ncclUnhandledCudaError, ncclSystemError, ncclInternalError, ncclInvalidArgument,
    ncclInvalidUsage, ncclRemoteError, ncclInProgress,
    ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64,
    ncclBfloat16, ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg,
    NCCL_UNIQUE_ID_BYTES, (long)sizeof(ncclUniqueId), NCCL_SPLIT_NOCOLOR, (long)NCCL_CONFIG_UNDEF_INT,
    (long)sizeof(ncclConfig_t), (long)offsetof(ncclConfig_t, blocking), (long)offsetof(ncclConfig_t, netName),
    (long)offsetof(ncclConfig_t, commName), (long)offsetof(ncclConfig_t, nvlinkCentricSched),
};

int main(void)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++)
        if (plx_nccl_ours[i] != real[i]) {
            fprintf(stderr, "%s: ours %ld, nccl.h %ld\n", names[i], plx_nccl_ours[i], real[i]);
            bad = 1;
        }
    if (plx_nccl_ours[sizeof real / sizeof real[0]] != -12345) {
        fprintf(stderr, "the two lists have different lengths\n");
        bad = 1;
    }
    printf("NCCL %d.%d.%d header: %s\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, bad ? "MISMATCH" : "our declarations match");
    return bad;
}
