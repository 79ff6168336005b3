/* fsdp_precision.c - element conversions for mixed precision: master
 * shards (f32 typically) to gathered parameters in param_dtype, gradients
 * to reduce_dtype and back. 16-bit values go through f32 with
 * round-to-nearest-even, the core's kernels (reduce.h). */
#include <stdint.h>
#include <string.h>

#include "reduce.h"
#include "fsdp_internal.h"

int plx__fsdp_dtype_ok(int dtype)
{
    return dtype == PLX_F32 || dtype == PLX_F64 || dtype == PLX_F16 || dtype == PLX_BF16;
}

double plx__fsdp_get(const void *p, int dtype, size_t i)
{
    switch (dtype) {
    case PLX_F32: return ((const float *)p)[i];
    case PLX_F64: return ((const double *)p)[i];
    case PLX_F16: return plx__f16_to_f32(((const uint16_t *)p)[i]);
    default: return plx__bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

/* Store v; 16-bit types round from f32 (a double rounds to f32 first,
 * exact for values that came from f32 arithmetic). */
static void put(void *p, int dtype, size_t i, double v)
{
    switch (dtype) {
    case PLX_F32: ((float *)p)[i] = (float)v; break;
    case PLX_F64: ((double *)p)[i] = v; break;
    case PLX_F16: ((uint16_t *)p)[i] = plx__f32_to_f16((float)v); break;
    default: ((uint16_t *)p)[i] = plx__f32_to_bf16((float)v); break;
    }
}

void plx__fsdp_convert(void *dst, int ddt, const void *src, int sdt, size_t n)
{
    if (ddt == sdt) {
        memmove(dst, src, n * plx_dtype_size(ddt));
        return;
    }
    if (sdt == PLX_F32 && (ddt == PLX_F16 || ddt == PLX_BF16)) {
        plx__narrow(dst, src, n, ddt);
        return;
    }
    for (size_t i = 0; i < n; i++)
        put(dst, ddt, i, plx__fsdp_get(src, sdt, i));
}

void plx__fsdp_accumulate(void *dst, int ddt, const void *src, int sdt, size_t n)
{
    if (ddt == PLX_F32 && sdt == PLX_F32) {
        float *d = dst;
        const float *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] += s[i];
        return;
    }
    if (ddt == PLX_F64 && sdt == PLX_F64) {
        double *d = dst;
        const double *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] += s[i];
        return;
    }
    /* f32 and 16-bit sums are done in f32, as PyTorch adds two tensors */
    for (size_t i = 0; i < n; i++) {
        double a = plx__fsdp_get(dst, ddt, i), b = plx__fsdp_get(src, sdt, i);
        put(dst, ddt, i, ddt == PLX_F64 ? a + b : (double)((float)a + (float)b));
    }
}

void plx__fsdp_scale(void *p, int dtype, size_t n, double scale)
{
    if (dtype == PLX_F32) {
        float *x = p;
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(x[i] * scale);
        return;
    }
    for (size_t i = 0; i < n; i++)
        put(p, dtype, i, plx__fsdp_get(p, dtype, i) * scale);
}
