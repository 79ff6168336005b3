/* ddp_hooks.c - per-bucket communication hooks: the default allreduce and
 * the built-in 16-bit compression (PyTorch's fp16_compress_hook and
 * bf16_compress_hook): an f32/f64 bucket is divided by the world size
 * (before the cast, so large gradients do not overflow f16), cast to 16
 * bits, allreduced with SUM and cast back into the bucket. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_internal.h"

struct compress {
    int dtype16;        /* PLX_F16 or PLX_BF16 */
    uint16_t **scratch; /* per bucket, grown on demand (starts are serialised by the DDP lock) */
    size_t *len;
    int n;
};

static int compress_start(void *state, const struct plx_ddp_bucket *b, struct plx_work **work)
{
    struct compress *c = state;
    int op = b->average ? PLX_AVG : PLX_SUM;
    if (b->dtype != PLX_F32 && b->dtype != PLX_F64)
        return plx_iallreduce(b->comm, b->data, b->data, b->count, b->dtype, op, NULL, work);
    if (b->index >= c->n) {
        int n = b->index + 8;
        uint16_t **s = realloc(c->scratch, (size_t)n * sizeof *s);
        if (s)
            c->scratch = s;
        size_t *l = s ? realloc(c->len, (size_t)n * sizeof *l) : NULL;
        if (!s || !l)
            return plx_set_error(PLX_ERR_NOMEM, "ddp compress hook: out of memory");
        c->len = l;
        for (int i = c->n; i < n; i++) {
            c->scratch[i] = NULL;
            c->len[i] = 0;
        }
        c->n = n;
    }
    if (c->len[b->index] < b->count) {
        uint16_t *s = realloc(c->scratch[b->index], (b->count ? b->count : 1) * sizeof *s);
        if (!s)
            return plx_set_error(PLX_ERR_NOMEM, "ddp compress hook: out of memory for bucket %d", b->index);
        c->scratch[b->index] = s;
        c->len[b->index] = b->count;
    }
    uint16_t *h = c->scratch[b->index];
    int P = plx_comm_size(b->comm);
    for (size_t i = 0; i < b->count; i++) {
        float v = b->dtype == PLX_F32 ? ((const float *)b->data)[i] : (float)((const double *)b->data)[i];
        if (b->average)
            v /= (float)P;
        plx_dtype_convert(&h[i], c->dtype16, &v, PLX_F32, 1);
    }
    return plx_iallreduce(b->comm, h, h, b->count, c->dtype16, PLX_SUM, NULL, work);
}

static int compress_finish(void *state, const struct plx_ddp_bucket *b)
{
    struct compress *c = state;
    if (b->dtype != PLX_F32 && b->dtype != PLX_F64)
        return 0;
    const uint16_t *h = c->scratch[b->index];
    for (size_t i = 0; i < b->count; i++) {
        float v = 0;
        plx_dtype_convert(&v, PLX_F32, &h[i], c->dtype16, 1);
        if (b->dtype == PLX_F32)
            ((float *)b->data)[i] = v;
        else
            ((double *)b->data)[i] = v;
    }
    return 0;
}

static void bucket_view(const struct plx_ddp *d, const struct ddp_bucket *k, struct plx_ddp_bucket *b)
{
    memset(b, 0, sizeof *b);
    b->struct_size = sizeof *b;
    b->index = (int)(k - d->buckets);
    b->data = plx__ddp_bucket_data(d, k);
    b->count = k->count;
    b->dtype = k->dtype;
    b->average = d->opt.average;
    b->comm = d->comm;
}

int plx__ddp_hook_start(struct plx_ddp *d, struct ddp_bucket *k)
{
    plx__ddp_fill(d, k);
    k->started = 1;
    struct plx_ddp_bucket b;
    bucket_view(d, k, &b);
    if (!d->hook.start)
        return plx_iallreduce(d->comm, b.data, b.data, b.count, b.dtype, b.average ? PLX_AVG : PLX_SUM, NULL, &k->work);
    int rc = d->hook.start(d->hook.state, &b, &k->work);
    if (rc && k->work) { /* a failed start owns nothing */
        plx_work_free(k->work);
        k->work = NULL;
    }
    return rc;
}

int plx__ddp_hook_finish(struct plx_ddp *d, struct ddp_bucket *k)
{
    if (!d->hook.finish)
        return 0;
    struct plx_ddp_bucket b;
    bucket_view(d, k, &b);
    return d->hook.finish(d->hook.state, &b);
}

void plx__ddp_hook_free(struct plx_ddp *d)
{
    struct compress *c = d->builtin;
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        free(c->scratch[i]);
    free(c->scratch);
    free(c->len);
    free(c);
    d->builtin = NULL;
}

PLX_API int plx_ddp_register_comm_hook(struct plx_ddp *d, const struct plx_ddp_comm_hook *hook)
{
    if (!d || !hook || !PLX_HAS_FIELD(hook, struct plx_ddp_comm_hook, finish) || !hook->start)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ddp_register_comm_hook: no hook, or a hook without start");
    if (d->steps)
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_ddp_register_comm_hook: only before the first step");
    plx__ddp_hook_free(d);
    d->hook = *hook;
    d->hook.struct_size = sizeof d->hook;
    return 0;
}

PLX_API int plx_ddp_register_builtin_hook(struct plx_ddp *d, int builtin)
{
    if (!d || builtin < PLX_DDP_HOOK_ALLREDUCE || builtin > PLX_DDP_HOOK_BF16_COMPRESS)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ddp_register_builtin_hook: no built-in hook %d", builtin);
    if (d->steps)
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_ddp_register_builtin_hook: only before the first step");
    plx__ddp_hook_free(d);
    memset(&d->hook, 0, sizeof d->hook);
    if (builtin == PLX_DDP_HOOK_ALLREDUCE)
        return 0;
    struct compress *c = calloc(1, sizeof *c);
    if (!c)
        return plx_set_error(PLX_ERR_NOMEM, "plx_ddp_register_builtin_hook: out of memory");
    c->dtype16 = builtin == PLX_DDP_HOOK_FP16_COMPRESS ? PLX_F16 : PLX_BF16;
    d->builtin = c;
    d->hook = (struct plx_ddp_comm_hook){sizeof d->hook, c, compress_start, compress_finish};
    return 0;
}
