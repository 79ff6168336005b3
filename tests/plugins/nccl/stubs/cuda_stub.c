/* A fake libcuda.so.1 / libnccl.so.2 for the probe tests: each build makes
 * one step of the probe fail in one known way. STUB_CUINIT: what cuInit
 * returns; STUB_COUNT: devices; STUB_NCCL_VERSION: for the libnccl stub. */
typedef int CUresult;

#ifdef STUB_NCCL_VERSION
int ncclGetVersion(int *v)
{
    *v = STUB_NCCL_VERSION;
    return 0;
}
#else
CUresult cuInit(unsigned int flags)
{
    (void)flags;
    return STUB_CUINIT;
}

CUresult cuDeviceGetCount(int *n)
{
    *n = STUB_COUNT;
    return 0;
}

CUresult cuEventQuery(void *e)
{
    (void)e;
    return 0;
}

CUresult cuGetErrorName(CUresult r, const char **name)
{
    *name = r == 999 ? "CUDA_ERROR_UNKNOWN" : "CUDA_ERROR_OTHER";
    return 0;
}
#endif
