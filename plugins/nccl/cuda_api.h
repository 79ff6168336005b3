/* cuda_api.h - the CUDA driver API subset the plugin uses, loaded from
 * libcuda.so.1 at run time (a stable SONAME, unlike libcudart.so.N).
 * Stability: internal to the plugin. */
#ifndef PLX_CUDA_API_H
#define PLX_CUDA_API_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_NOT_READY = 600,
};
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_MEMORYTYPE_DEVICE 2

/* name, exported symbol (the _v2 ABI where the driver has one), arguments */
#define PLX_CUDA_FUNCS(X)                                                                     \
    X(cuInit, "cuInit", (unsigned int flags))                                                 \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *count))                                     \
    X(cuDeviceGet, "cuDeviceGet", (CUdevice * dev, int ordinal))                              \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * ctx, CUdevice dev))  \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice dev))              \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext ctx))                                    \
    X(cuStreamCreate, "cuStreamCreate", (CUstream * s, unsigned int flags))                   \
    X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream s))                                    \
    X(cuEventCreate, "cuEventCreate", (CUevent * e, unsigned int flags))                      \
    X(cuEventRecord, "cuEventRecord", (CUevent e, CUstream s))                                \
    X(cuEventQuery, "cuEventQuery", (CUevent e))                                              \
    X(cuEventDestroy, "cuEventDestroy_v2", (CUevent e))                                       \
    X(cuGetErrorName, "cuGetErrorName", (CUresult r, const char **name))                      \
    X(cuPointerGetAttribute, "cuPointerGetAttribute", (void *data, int attribute, CUdeviceptr ptr)) \
    X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr * p, size_t bytes))                          \
    X(cuMemFree, "cuMemFree_v2", (CUdeviceptr p))

#endif
