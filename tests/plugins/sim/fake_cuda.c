/* fake_cuda.c - a stand-in libcuda.so.1 for testing the core's memory-kind
 * detection and staging without a GPU. "Device" memory is mapped PROT_NONE,
 * so any code that touches it directly (instead of copying through the
 * driver) crashes the test; the copies open it for the copy only. Not a
 * model of CUDA beyond the four calls the core uses. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_ALLOCS 256
enum { OK = 0, INVALID_VALUE = 1, ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8, MEMORYTYPE_DEVICE = 2 };

static struct { uintptr_t base; size_t len, map; } allocs[MAX_ALLOCS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
int fake_cuda_copies; /* device<->host copies done, for the test to assert on */

static int find(uintptr_t p, size_t n)
{
    pthread_mutex_lock(&mu);
    int hit = -1;
    for (int i = 0; i < MAX_ALLOCS && hit < 0; i++)
        if (allocs[i].len && p >= allocs[i].base && p + n <= allocs[i].base + allocs[i].len)
            hit = i;
    pthread_mutex_unlock(&mu);
    return hit;
}

void *fake_cuda_alloc(size_t n)
{
    size_t map = (n + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, map ? map : 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!allocs[i].len) {
            allocs[i].base = (uintptr_t)p;
            allocs[i].len = n ? n : 1;
            allocs[i].map = map ? map : 4096;
            break;
        }
    pthread_mutex_unlock(&mu);
    return p;
}

void fake_cuda_free(void *p)
{
    int i = find((uintptr_t)p, 1);
    if (i < 0)
        return;
    munmap(p, allocs[i].map);
    pthread_mutex_lock(&mu);
    allocs[i].len = 0;
    pthread_mutex_unlock(&mu);
}

int cuPointerGetAttribute(void *data, int attr, unsigned long long ptr)
{
    if (find((uintptr_t)ptr, 1) < 0)
        return INVALID_VALUE; /* what the driver says of plain host memory */
    if (attr == ATTR_MEMORY_TYPE)
        *(unsigned int *)data = MEMORYTYPE_DEVICE;
    else if (attr == ATTR_IS_MANAGED)
        *(unsigned int *)data = 0;
    else
        return INVALID_VALUE;
    return OK;
}

/* Open the device range for one copy. Ranks run as threads on their own
 * allocations, so two copies never share a page. */
static int copy(void *dst, const void *src, size_t n, uintptr_t dev)
{
    int i = find(dev, n);
    if (i < 0)
        return INVALID_VALUE;
    void *base = (void *)allocs[i].base;
    mprotect(base, allocs[i].map, PROT_READ | PROT_WRITE);
    memcpy(dst, src, n);
    mprotect(base, allocs[i].map, PROT_NONE);
    __atomic_add_fetch(&fake_cuda_copies, 1, __ATOMIC_RELAXED);
    return OK;
}

int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n)
{
    return copy(dst, (const void *)(uintptr_t)src, n, (uintptr_t)src);
}

int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n)
{
    return copy((void *)(uintptr_t)dst, src, n, (uintptr_t)dst);
}

int cuStreamSynchronize(void *stream)
{
    (void)stream;
    return OK;
}
