/* The core's CUDA memory handling, without a GPU: a fake libcuda.so.1
 * (fake_cuda.c, linked in so the core finds it with RTLD_NOLOAD) marks some
 * buffers as device memory and makes them untouchable except through its
 * copy calls. On the sim backend (host memory only) a collective on them
 * must be refused with a message naming the backend and the fix, and with
 * [core] cuda_staging = true must give the right results through copies.
 * Host buffers must not be mistaken for device ones. */
#include <stdio.h>
#include <string.h>

#include "ranks.h"

void *fake_cuda_alloc(size_t n);
void fake_cuda_free(void *p);
int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n);
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n);
extern int fake_cuda_copies;

static int failures;
#define P 3
#define N 1001 /* not a multiple of P */

static void to_dev(float *dev, const float *host, size_t n)
{
    cuMemcpyHtoD_v2((unsigned long long)(uintptr_t)dev, host, n * sizeof *host);
}

static void from_dev(float *host, const float *dev, size_t n)
{
    cuMemcpyDtoH_v2(host, (unsigned long long)(uintptr_t)dev, n * sizeof *host);
}

static int refused_fn(struct rank_ctx *x, int rc)
{
    if (rc != 0)
        return 1;
    float *d = fake_cuda_alloc(N * sizeof(float));
    rc = plx_allreduce(x->comm, d, d, N, PLX_F32, PLX_SUM);
    const char *msg = plx_last_error();
    CHECK(rc == PLX_ERR_UNSUPPORTED);
    CHECK(strstr(msg, "backend 'sim' cannot take CUDA memory") != NULL);
    CHECK(strstr(msg, "cuda_staging") != NULL && strstr(msg, "nccl") != NULL);
    /* Point-to-point is never staged. */
    rc = plx_send(x->comm, d, N, PLX_F32, (x->rank + 1) % x->size, 7);
    CHECK(rc == PLX_ERR_UNSUPPORTED && strstr(plx_last_error(), "cannot take CUDA memory") != NULL);
    fake_cuda_free(d);
    return 0;
}

static int staged_fn(struct rank_ctx *x, int rc)
{
    if (rc != 0)
        return 1;
    int r = x->rank;
    float h[N * P], out[N * P];
    float *ds = fake_cuda_alloc(sizeof h), *dr = fake_cuda_alloc(sizeof h);

    /* allreduce, out of place and in place */
    for (int i = 0; i < N; i++)
        h[i] = (float)(r + 1) * (float)i;
    to_dev(ds, h, N);
    CHECK(plx_allreduce(x->comm, ds, dr, N, PLX_F32, PLX_SUM) == 0);
    from_dev(out, dr, N);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += out[i] != (float)(P * (P + 1) / 2) * (float)i;
    CHECK(bad == 0);
    CHECK(plx_allreduce(x->comm, ds, ds, N, PLX_F32, PLX_MAX) == 0);
    from_dev(out, ds, N);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += out[i] != (float)P * (float)i;
    CHECK(bad == 0);

    /* broadcast from rank 1 */
    for (int i = 0; i < N; i++)
        h[i] = r == 1 ? (float)i + 0.5f : -1.0f;
    to_dev(ds, h, N);
    CHECK(plx_broadcast(x->comm, ds, N, PLX_F32, 1) == 0);
    from_dev(out, ds, N);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += out[i] != (float)i + 0.5f;
    CHECK(bad == 0);

    /* allgather: block j holds rank j's values */
    for (int i = 0; i < N; i++)
        h[i] = (float)(r * 10000 + i);
    to_dev(ds, h, N);
    CHECK(plx_allgather(x->comm, ds, dr, N, PLX_F32) == 0);
    from_dev(out, dr, (size_t)N * P);
    bad = 0;
    for (int j = 0; j < P; j++)
        for (int i = 0; i < N; i++)
            bad += out[j * N + i] != (float)(j * 10000 + i);
    CHECK(bad == 0);

    /* reduce_scatter: rank r gets the sum of block r */
    for (int i = 0; i < N * P; i++)
        h[i] = (float)(i % 97) + (float)r;
    to_dev(ds, h, (size_t)N * P);
    CHECK(plx_reduce_scatter(x->comm, ds, dr, N, PLX_F32, PLX_SUM) == 0);
    from_dev(out, dr, N);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += out[i] != (float)P * (float)((r * N + i) % 97) + (float)(P * (P - 1) / 2);
    CHECK(bad == 0);

    /* reduce to rank 2: the others' receive buffer may be NULL */
    for (int i = 0; i < N; i++)
        h[i] = 1.0f;
    to_dev(ds, h, N);
    CHECK(plx_reduce(x->comm, ds, r == 2 ? dr : NULL, N, PLX_F32, PLX_SUM, 2) == 0);
    if (r == 2) {
        from_dev(out, dr, N);
        bad = 0;
        for (int i = 0; i < N; i++)
            bad += out[i] != (float)P;
        CHECK(bad == 0);
    }

    /* nonblocking: staged on the executor thread */
    for (int i = 0; i < N; i++)
        h[i] = (float)r;
    to_dev(ds, h, N);
    struct plx_work *w = NULL;
    CHECK(plx_iallreduce(x->comm, ds, dr, N, PLX_F32, PLX_SUM, NULL, &w) == 0);
    CHECK(w && plx_work_wait(w, 10000) == 0);
    plx_work_free(w);
    from_dev(out, dr, N);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += out[i] != (float)(P * (P - 1) / 2);
    CHECK(bad == 0);

    /* Host buffers are not device memory: no copies for them. */
    float hs[4] = {1, 2, 3, 4}, hr[4];
    CHECK(plx_barrier(x->comm) == 0); /* every rank's own copies above are done */
    int before = __atomic_load_n(&fake_cuda_copies, __ATOMIC_RELAXED);
    CHECK(plx_allreduce(x->comm, hs, hr, 4, PLX_F32, PLX_SUM) == 0);
    CHECK(hr[3] == 4.0f * P);
    CHECK(plx_barrier(x->comm) == 0);
    CHECK(__atomic_load_n(&fake_cuda_copies, __ATOMIC_RELAXED) == before);

    fake_cuda_free(ds);
    fake_cuda_free(dr);
    return 0;
}

int main(void)
{
    int worst = run_ranks(P, "sim", NULL, 20000, refused_fn, NULL);
    CHECK(worst == 0);
    const char *ov[] = {"core.cuda_staging=true", NULL};
    int copies0 = fake_cuda_copies;
    worst = run_ranks(P, "sim", ov, 20000, staged_fn, NULL);
    CHECK(worst == 0);
    CHECK(fake_cuda_copies > copies0);
    printf("cuda staging: %d fake-driver copies, %d failures\n", fake_cuda_copies - copies0, failures);
    return failures ? 1 : 0;
}
