/* cuda_mem.c - the CUDA driver as the core sees it: looked up with
 * RTLD_NOLOAD, so a process that never loaded libcuda.so.1 (and so holds no
 * device memory) never loads it because of us. The symbols are our own
 * declarations of four stable driver entry points. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>

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
    unsigned long long looked_adds; /* not loaded yet: the process's object loads at the last look */
    int ready;
} cu;
static pthread_mutex_t cu_mu = PTHREAD_MUTEX_INITIALIZER;

static int first_object(struct dl_phdr_info *info, size_t size, void *adds)
{
    (void)size;
    *(unsigned long long *)adds = info->dlpi_adds;
    return 1; /* the count is the same in every object's answer: one is enough */
}

/* How many objects the process has loaded so far (never decreases). */
static unsigned long long objects_loaded(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(first_object, &adds);
    return adds;
}

/* 1 once the driver is found. A look (a dlopen) is made again only after
 * the process loaded another object, so a driver loaded after the first
 * collective is seen at the next one. (A look at most once a second missed
 * device memory made within that second, and copied from it as from host
 * memory.) Counting the loads takes the loader's lock: callers ask
 * host_seen first. */
static int driver(void)
{
    if (__atomic_load_n(&cu.ready, __ATOMIC_ACQUIRE))
        return 1;
    unsigned long long adds = objects_loaded();
    if (adds == __atomic_load_n(&cu.looked_adds, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&cu_mu);
    if (!cu.ready && adds != cu.looked_adds) {
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
        /* adds was counted before the look: a load after it changes the count */
        if (!cu.ready)
            __atomic_store_n(&cu.looked_adds, adds, __ATOMIC_RELEASE);
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

/* Buffers found to be host memory while no driver was loaded: a training
 * loop's next call on the same buffers needs no look. Device memory cannot
 * be where a host buffer is; only one freed, its address then given out by
 * a driver loaded since, would be taken for host memory. */
#define HOST_SEEN 4
static const void *host_seen[HOST_SEEN];
static unsigned host_seen_next;

static int seen(const void *p)
{
    if (!p)
        return 1;
    for (int i = 0; i < HOST_SEEN; i++)
        if (__atomic_load_n(&host_seen[i], __ATOMIC_RELAXED) == p)
            return 1;
    return 0;
}

static void remember(const void *p)
{
    if (p && !seen(p))
        __atomic_store_n(&host_seen[__atomic_fetch_add(&host_seen_next, 1, __ATOMIC_RELAXED) % HOST_SEEN], p,
                         __ATOMIC_RELAXED);
}

int plx__cuda_kind2(const void *a, const void *b)
{
    if (!a && !b)
        return PLX_MEM_HOST;
    if (!__atomic_load_n(&cu.ready, __ATOMIC_ACQUIRE)) {
        if (seen(a) && seen(b))
            return PLX_MEM_HOST;
        if (!driver()) {
            remember(a);
            remember(b);
            return PLX_MEM_HOST;
        }
    }
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
