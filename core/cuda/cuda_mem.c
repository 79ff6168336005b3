/* cuda_mem.c - the CUDA driver as the core sees it: looked up with
 * RTLD_NOLOAD, so a process that never loaded libcuda.so.1 (and so holds no
 * device memory) never loads it because of us. The symbols are our own
 * declarations of four stable driver entry points. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

#include "clock.h"
#include "cuda_mem.h"
#include "error.h"
#include "plexus/plexus.h"

typedef unsigned long long cu_ptr;
enum { CU_ATTR_MEMORY_TYPE = 2, CU_ATTR_IS_MANAGED = 8, CU_MEMORYTYPE_DEVICE = 2 };

static struct {
    int (*pointer_attr)(void *data, int attr, cu_ptr p);
    int (*dtoh)(void *dst, cu_ptr src, size_t n);
    int (*htod)(cu_ptr dst, const void *src, size_t n);
    int (*stream_sync)(void *stream);
    uint64_t next_look_ns; /* not loaded yet: look again after this */
    int ready;
} cu;
static pthread_mutex_t cu_mu = PTHREAD_MUTEX_INITIALIZER;

/* 1 once the driver is found. The lookup is repeated at most once a second,
 * so a process that loads CUDA after its first collective is still seen. */
static int driver(void)
{
    if (__atomic_load_n(&cu.ready, __ATOMIC_ACQUIRE))
        return 1;
    /* Every host collective asks: a look not due yet costs one coarse clock
     * read. next_look_ns moves only after a look found nothing, so a thread
     * that comes while another looks waits for its answer on the lock. */
    uint64_t now = plx__clock_coarse_ns();
    if (now < __atomic_load_n(&cu.next_look_ns, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&cu_mu);
    if (!cu.ready && now >= cu.next_look_ns) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            *(void **)&cu.pointer_attr = dlsym(h, "cuPointerGetAttribute");
            *(void **)&cu.dtoh = dlsym(h, "cuMemcpyDtoH_v2");
            *(void **)&cu.htod = dlsym(h, "cuMemcpyHtoD_v2");
            *(void **)&cu.stream_sync = dlsym(h, "cuStreamSynchronize");
            if (cu.pointer_attr && cu.dtoh && cu.htod && cu.stream_sync)
                __atomic_store_n(&cu.ready, 1, __ATOMIC_RELEASE);
            /* the handle stays: libcuda is never unloaded under a process's feet */
        }
        if (!cu.ready)
            __atomic_store_n(&cu.next_look_ns, now + 1000000000u, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&cu_mu);
    return __atomic_load_n(&cu.ready, __ATOMIC_ACQUIRE);
}

static int device_kind(const void *p)
{
    if (!p)
        return PLX_MEM_HOST;
    unsigned int type = 0, managed = 0;
    /* Fails (CUDA_ERROR_INVALID_VALUE) for memory CUDA does not know: host. */
    if (cu.pointer_attr(&type, CU_ATTR_MEMORY_TYPE, (cu_ptr)(uintptr_t)p) != 0 || type != CU_MEMORYTYPE_DEVICE)
        return PLX_MEM_HOST;
    if (cu.pointer_attr(&managed, CU_ATTR_IS_MANAGED, (cu_ptr)(uintptr_t)p) == 0 && managed)
        return PLX_MEM_HOST;
    return PLX_MEM_CUDA;
}

int plx__cuda_kind(const void *p)
{
    return plx__cuda_kind2(p, p);
}

int plx__cuda_kind2(const void *a, const void *b)
{
    if ((!a && !b) || !driver())
        return PLX_MEM_HOST;
    return device_kind(a) == PLX_MEM_CUDA || (b != a && device_kind(b) == PLX_MEM_CUDA) ? PLX_MEM_CUDA : PLX_MEM_HOST;
}

int plx__cuda_copy(void *dst, const void *src, size_t n, int to_host, void *stream)
{
    if (!driver())
        return plx__err(PLX_ERR_UNSUPPORTED, "CUDA staging: libcuda.so.1 is not loaded in this process");
    int rc = cu.stream_sync(stream);
    if (rc == 0 && n)
        rc = to_host ? cu.dtoh(dst, (cu_ptr)(uintptr_t)src, n) : cu.htod((cu_ptr)(uintptr_t)dst, src, n);
    if (rc != 0)
        return plx__err(PLX_ERR_SYSTEM, "CUDA staging: %s of %zu bytes failed (CUresult %d)",
                        to_host ? "device-to-host copy" : "host-to-device copy", n, rc);
    return 0;
}
