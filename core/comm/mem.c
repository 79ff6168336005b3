/* mem.c - plx_mem_alloc / plx_mem_free: memory every rank of the host maps
 * (the backend's mem_alloc), or ordinary memory where the backend has none
 * or the communicator is hierarchical (its collectives do not reach one
 * backend's buffers directly). The communicator keeps a list of what it
 * handed out, so a free knows whose memory it is and a destroy releases
 * what is left before the backend's communicator goes. */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "error.h"

struct plx__mem {
    struct plx__mem *next;
    void *ptr;
    int backend; /* 1: the backend's mem_alloc made it; 0: posix_memalign */
};

static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;

static int backend_has_mem(const struct plx_comm *c)
{
    return !c->hier && c->be->ops.mem_alloc && c->be->ops.mem_free;
}

PLX_API int plx_mem_alloc(struct plx_comm *c, size_t bytes, void **ptr)
{
    if (!c || !ptr)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_mem_alloc: %s is NULL", !c ? "comm" : "ptr");
    *ptr = NULL;
    if (!bytes)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_mem_alloc: bytes is 0");
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return plx__err(PLX_ERR_ABORTED, "plx_mem_alloc on '%s': the communicator was aborted", c->name);
    if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE))
        return plx__err(PLX_ERR_INVALID_USAGE, "plx_mem_alloc on '%s': the communicator is unusable after an earlier "
                        "error; destroy it and create a new one", c->name);
    struct plx__mem *m = calloc(1, sizeof *m);
    if (!m)
        return plx__err(PLX_ERR_NOMEM, "plx_mem_alloc: out of memory");
    m->backend = backend_has_mem(c);
    if (m->backend) {
        int rc = c->be->ops.mem_alloc(c->bc, bytes, &m->ptr);
        if (rc) {
            free(m);
            return rc;
        }
    } else {
        if (posix_memalign(&m->ptr, 64, bytes) != 0) {
            free(m);
            return plx__err(PLX_ERR_NOMEM, "plx_mem_alloc: %zu bytes: out of memory", bytes);
        }
        memset(m->ptr, 0, bytes);
    }
    pthread_mutex_lock(&mem_mu);
    m->next = c->mem;
    c->mem = m;
    pthread_mutex_unlock(&mem_mu);
    *ptr = m->ptr;
    return 0;
}

static int release(struct plx_comm *c, struct plx__mem *m)
{
    int rc = 0;
    if (m->backend)
        rc = c->be->ops.mem_free(c->bc, m->ptr);
    else
        free(m->ptr);
    free(m);
    return rc;
}

PLX_API int plx_mem_free(struct plx_comm *c, void *ptr)
{
    if (!ptr)
        return 0;
    if (!c)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_mem_free: comm is NULL");
    pthread_mutex_lock(&mem_mu);
    struct plx__mem **at = &c->mem;
    while (*at && (*at)->ptr != ptr)
        at = &(*at)->next;
    struct plx__mem *m = *at;
    if (m)
        *at = m->next;
    pthread_mutex_unlock(&mem_mu);
    if (!m)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_mem_free: %p was not allocated by plx_mem_alloc on communicator '%s'",
                        ptr, c->name);
    return release(c, m);
}

void plx__mem_release_all(struct plx_comm *c)
{
    pthread_mutex_lock(&mem_mu);
    struct plx__mem *m = c->mem;
    c->mem = NULL;
    pthread_mutex_unlock(&mem_mu);
    while (m) {
        struct plx__mem *next = m->next;
        release(c, m);
        m = next;
    }
}
