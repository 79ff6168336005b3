/* req_free.c - shm builds its point-to-point requests in the core's memory
 * (ABI 1.5 req_size) and keeps no pointer to it once the request is freed,
 * also when it is freed while pending.
 *
 * Two ranks, threads of this process (mem:// store), over shm. Rank 0
 * posts a receive that cannot complete (its own timeout far past the
 * communicator's) and frees its work while it is pending: after the
 * communicator's timeout the core cancels it and hands the memory back, which the allocator gives out
 * again here and which is written over. Only then does rank 1 send twice on
 * the same tag. Both messages must land in rank 0's next two receives, in
 * order, the cancelled receive's buffer must stay untouched, and the
 * communicator must still run a collective. A plugin that left the freed
 * request on its list of posted receives matches the first message to
 * freed memory. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"

#define BYTES 64
#define TAG 7
#define TIMEOUT_MS 1000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int cancelled; /* rank 0 has freed its pending receive */
static char url[64];
static int failures;

#define FAIL(...)                                           \
    do {                                                    \
        fprintf(stderr, "FAIL: " __VA_ARGS__);              \
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED); \
    } while (0)

static struct plx_comm *open_comm(int rank)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "shm";
    o.rank = rank;
    o.size = 2;
    o.local_rank = rank;
    o.local_size = 2;
    o.init = url;
    o.name = "req-free";
    o.timeout_ms = TIMEOUT_MS;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        FAIL("rank %d: init: %s\n", rank, plx_last_error());
        return NULL;
    }
    return c;
}

/* Blocks of about a work's size, written over: freed memory gets reused. */
static void churn(void)
{
    void *p[64];
    for (int i = 0; i < 64; i++)
        if ((p[i] = malloc(512 + (size_t)i * 32)))
            memset(p[i], 0x5c, 512 + (size_t)i * 32);
    for (int i = 0; i < 64; i++)
        free(p[i]);
}

/* The pending receive, freed: the core cancels it after TIMEOUT_MS, long
 * before the receive's own timeout would end it in shm. */
static void post_and_free(struct plx_comm *c, unsigned char *old)
{
    struct plx_op_options oo = {.struct_size = sizeof oo, .timeout_ms = 30 * TIMEOUT_MS};
    struct plx_work *w = NULL;
    if (plx_irecv(c, old, BYTES, PLX_U8, 1, TAG, &oo, &w) != 0) {
        FAIL("rank 0: irecv: %s\n", plx_last_error());
        return;
    }
    int rc = plx_work_wait(w, 100);
    if (rc != PLX_ERR_TIMEOUT)
        FAIL("rank 0: a receive nobody sent to ended with %s, not a timeout\n", plx_err_name(rc));
    plx_work_free(w);
}

static void *rank0(void *arg)
{
    (void)arg;
    struct plx_comm *c = open_comm(0);
    if (!c)
        return NULL;
    unsigned char old[BYTES], buf[BYTES];
    memset(old, 0xaa, sizeof old);
    post_and_free(c, old);
    churn();
    pthread_mutex_lock(&mu);
    cancelled = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int k = 1; k <= 2; k++) {
        memset(buf, 0, sizeof buf);
        int rc = plx_recv(c, buf, BYTES, PLX_U8, 1, TAG);
        if (rc != 0)
            FAIL("rank 0: receive %d: %s\n", k, plx_last_error());
        for (int i = 0; rc == 0 && i < BYTES; i++)
            if (buf[i] != (unsigned char)(k + i)) {
                FAIL("rank 0: byte %d of message %d is %d, expected %d\n", i, k, buf[i], k + i);
                break;
            }
    }
    for (int i = 0; i < BYTES; i++)
        if (old[i] != 0xaa) {
            FAIL("rank 0: the cancelled receive's buffer was written (byte %d is %d)\n", i, old[i]);
            break;
        }
    float x = 1, y = 0;
    if (plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM) != 0 || y != 3)
        FAIL("rank 0: allreduce after the cancel: %s (got %g)\n", plx_last_error(), (double)y);
    plx_comm_destroy(c);
    return NULL;
}

static void *rank1(void *arg)
{
    (void)arg;
    struct plx_comm *c = open_comm(1);
    if (!c)
        return NULL;
    pthread_mutex_lock(&mu);
    while (!cancelled)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    unsigned char m[BYTES];
    for (int k = 1; k <= 2; k++) {
        for (int i = 0; i < BYTES; i++)
            m[i] = (unsigned char)(k + i);
        if (plx_send(c, m, BYTES, PLX_U8, 0, TAG) != 0)
            FAIL("rank 1: send %d: %s\n", k, plx_last_error());
    }
    float x = 2, y = 0;
    if (plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM) != 0 || y != 3)
        FAIL("rank 1: allreduce after the cancel: %s (got %g)\n", plx_last_error(), (double)y);
    plx_comm_destroy(c);
    return NULL;
}

int main(void)
{
    snprintf(url, sizeof url, "mem://shm-req-free-%d", (int)getpid());
    pthread_t t[2];
    pthread_create(&t[0], NULL, rank0, NULL);
    pthread_create(&t[1], NULL, rank1, NULL);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    if (failures)
        return 1;
    printf("a receive freed while pending gave the core's memory back; later messages landed in order\n");
    return 0;
}
