/* Our NCCL declarations, as numbers for layout_real.c to compare. */
#include <stddef.h>

#include "nccl_api.h"

const long plx_nccl_ours[] = {
    ncclSuccess, ncclUnhandledCudaError, ncclSystemError, ncclInternalError, ncclInvalidArgument,
    ncclInvalidUsage, ncclRemoteError, ncclInProgress,
    ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64,
    ncclBfloat16, ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg,
    NCCL_UNIQUE_ID_BYTES, (long)sizeof(ncclUniqueId), NCCL_SPLIT_NOCOLOR, (long)NCCL_CONFIG_UNDEF_INT,
    (long)sizeof(plx_ncclConfig_t), (long)offsetof(plx_ncclConfig_t, blocking),
    (long)offsetof(plx_ncclConfig_t, netName), (long)offsetof(plx_ncclConfig_t, commName),
    (long)offsetof(plx_ncclConfig_t, nvlinkCentricSched), -12345,
};
