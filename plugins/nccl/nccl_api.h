/* nccl_api.h - our declarations of the NCCL 2.x subset the plugin uses, so
 * it builds without nccl.h and loads libnccl.so.2 at run time. Values and
 * layouts are checked against the real header by tests/plugins/nccl when
 * one is found at build time. Stability: internal to the plugin. */
#ifndef PLX_NCCL_API_H
#define PLX_NCCL_API_H

#include <limits.h>
#include <stddef.h>

typedef enum {
    ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
    ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7,
} ncclResult_t;

typedef enum {
    ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
    ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9,
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef struct ncclComm *ncclComm_t;
typedef struct CUstream_st *cudaStream_t; /* the runtime's stream is the driver's CUstream */

#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_MAGIC 0xcafebeefu

/* ncclConfig_v22800: the first fields are stable since 2.14; size and
 * version tell the library which fields the caller knows. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
    int trafficClass;
    const char *commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
} plx_ncclConfig_t;

#define PLX_NCCL_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
/* The oldest NCCL we support: ncclCommSplit and nonblocking init arrived in 2.18. */
#define PLX_NCCL_MIN_VERSION PLX_NCCL_VERSION(2, 18, 0)

/* The functions we resolve, as an X-macro: name, return, arguments. */
#define PLX_NCCL_FUNCS(X)                                                                            \
    X(ncclGetVersion, (int *version))                                                                \
    X(ncclGetUniqueId, (ncclUniqueId * id))                                                          \
    X(ncclCommInitRankConfig, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, plx_ncclConfig_t *config)) \
    X(ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, plx_ncclConfig_t *config)) \
    X(ncclCommFinalize, (ncclComm_t comm))                                                           \
    X(ncclCommDestroy, (ncclComm_t comm))                                                            \
    X(ncclCommAbort, (ncclComm_t comm))                                                              \
    X(ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError))                            \
    X(ncclAllReduce, (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st)) \
    X(ncclBroadcast, (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st)) \
    X(ncclReduce, (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t st)) \
    X(ncclAllGather, (const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st)) \
    X(ncclReduceScatter, (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st)) \
    X(ncclSend, (const void *b, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st)) \
    X(ncclRecv, (void *b, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st))      \
    X(ncclGroupStart, (void))                                                                        \
    X(ncclGroupEnd, (void))

#endif
